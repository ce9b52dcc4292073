//! Commitments, their event log and contacts.

use chrono::{DateTime, Utc};
use serde::Serialize;

use std::collections::HashMap;
use std::sync::LazyLock;

use super::dispatch::runs_of;
use super::{Result, StoreError, Tx, ms};
use crate::domain::commitment::{Commitment, CommitmentKind, CommitmentStatus};
use crate::domain::counter::Counter;
use crate::rows::Cols;
pub(super) use crate::rows::contact_row;
use crate::sql::Value;
use crate::vals;

#[derive(Debug, Clone, Serialize)]
pub struct CommitmentRow {
    pub id: i64,
    #[serde(flatten)]
    pub commitment: Commitment,
    pub contact_id: Option<i64>,
    pub reschedule_requested_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ContactRow {
    pub id: i64,
    pub phone: String,
    pub name: Option<String>,
    pub language: Option<String>,
    pub consent_marketing: bool,
    pub opt_out_marketing_at: Option<DateTime<Utc>>,
    pub opt_out_transactional_at: Option<DateTime<Utc>>,
    pub last_inbound_at: Option<DateTime<Utc>>,
}

/// One entry of a commitment's event log: `(event_id, type, effect,
/// version_before, version_after, received_at)`.
pub type EventLogRow = (String, String, String, Option<i64>, Option<i64>, DateTime<Utc>);

/// How a booking event was recorded in the append-only log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventEffect {
    Applied,
    Stale,
    NoChange,
}

impl EventEffect {
    fn as_str(self) -> &'static str {
        match self {
            EventEffect::Applied => "applied",
            EventEffect::Stale => "stale",
            EventEffect::NoChange => "no_change",
        }
    }
}

const COMMITMENT_COLS: &str = "c.id, c.ref, c.kind, c.status, c.version, c.starts_at, c.service, c.location,
     c.contact_id, c.confirmed_at, c.manual_contact_at, c.reschedule_requested_at, c.updated_at,
     k.phone, coalesce(c.contact_name, k.name), k.language";

fn commitment_row(r: &dyn Cols) -> std::result::Result<CommitmentRow, String> {
    let status = r.text(3)?;
    Ok(CommitmentRow {
        id: r.int(0)?,
        commitment: Commitment {
            reference: r.text(1)?,
            kind: CommitmentKind::parse(&r.text(2)?).unwrap_or(CommitmentKind::Appointment),
            // A stored status, typed: an unknown word is a read error
            // naming it, not a status nobody matches.
            status: CommitmentStatus::parse(&status).ok_or(format!("unknown commitment status {status:?}"))?,
            version: r.int(4)?,
            starts_at: r.opt_time(5)?,
            service: r.opt_text(6)?,
            location: r.opt_text(7)?,
            phone: r.opt_text(13)?,
            name: r.opt_text(14)?,
            language: r.opt_text(15)?,
            confirmed_at: r.opt_time(9)?,
            manual_contact_at: r.opt_time(10)?,
        },
        contact_id: r.opt_int(8)?,
        reschedule_requested_at: r.opt_time(11)?,
        updated_at: r.time(12)?,
    })
}

/// A booking event to append to the log, with its effect.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub event_id: &'a str,
    pub reference: &'a str,
    pub kind: &'a str,
    pub source: &'a str,
    pub payload: &'a str,
    pub effect: EventEffect,
    pub version_before: Option<i64>,
    pub version_after: Option<i64>,
}

/// The event log's columns, in the order of [`event_values`].
const EVENT_INSERT: &str = "INSERT INTO commitment_events(event_id, commitment_ref, type, effect, version_before,
     version_after, source, payload, received_at)";

/// One event's row, for one statement or a multi-row one.
fn event_values<'a>(e: &NewEvent<'a>, at: DateTime<Utc>) -> [Value<'a>; 9] {
    vals![
        e.event_id,
        e.reference,
        e.kind,
        e.effect.as_str(),
        e.version_before,
        e.version_after,
        e.source,
        e.payload,
        ms(at)
    ]
}

/// A booking event already in the log, as it was received.
#[derive(Debug, Clone)]
pub struct LoggedEvent {
    pub commitment_ref: String,
    pub payload: String,
}

/// A contact to insert or update by phone ([`Tx::upsert_contacts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewContact<'a> {
    pub phone: &'a str,
    pub name: Option<&'a str>,
    pub language: Option<&'a str>,
}

/// Rows per multi-row statement of a batch of events at most.
const BATCH_RUN: usize = 256;

/// How a saved commitment replaces the stored one.
const SAVE_COMMITMENT_CONFLICT: &str = "ON CONFLICT(ref) DO UPDATE SET status = excluded.status,
         version = excluded.version, starts_at = excluded.starts_at, service = excluded.service,
         location = excluded.location, contact_id = coalesce(excluded.contact_id, commitments.contact_id),
         confirmed_at = excluded.confirmed_at, manual_contact_at = excluded.manual_contact_at,
         updated_at = excluded.updated_at, contact_name = excluded.contact_name";

/// A commitment's columns in the order of [`Tx::save_commitments`].
fn commitment_values(c: &Commitment, contact_id: Option<i64>, at: DateTime<Utc>) -> [Value<'_>; 13] {
    vals![
        c.reference.as_str(),
        c.kind.as_str(),
        c.status.as_str(),
        c.version,
        c.starts_at.map(ms),
        c.service.as_deref(),
        c.location.as_deref(),
        contact_id,
        c.confirmed_at.map(ms),
        c.manual_contact_at.map(ms),
        ms(at),
        ms(at),
        c.name.as_deref()
    ]
}

/// `rows` groups of `width` bare `?` marks: the `VALUES` of a multi-row
/// `INSERT`, whose columns give PostgreSQL the parameters' types.
fn marks(width: usize, rows: usize) -> String {
    let row = format!("({})", vec!["?"; width].join(", "));
    vec![row.as_str(); rows].join(", ")
}

/// Texts as one JSON array, for [`in_texts`] (one statement text whatever
/// the number, as [`super::dispatch::id_list`]).
fn text_list(texts: &[&str]) -> String {
    serde_json::to_string(texts).unwrap_or_else(|_| "[]".into())
}

/// The `IN` operand for a [`text_list`] bound at `?n`.
fn in_texts(db: &crate::sql::Db<'_>, n: usize) -> String {
    if db.is_pg() {
        format!("SELECT value FROM json_array_elements_text(CAST(CAST(?{n} AS TEXT) AS json))")
    } else {
        format!("SELECT value FROM json_each(?{n})")
    }
}

impl Tx<'_> {
    /// The logged event with this id, if any: a repeated id is a duplicate
    /// only when its content is the same.
    pub fn logged_event(&self, event_id: &str) -> Result<Option<LoggedEvent>> {
        Ok(self.db().row(
            "SELECT commitment_ref, payload FROM commitment_events WHERE event_id = ?1",
            &vals![event_id],
            |r| {
                Ok(LoggedEvent {
                    commitment_ref: r.text(0)?,
                    payload: r.text(1)?,
                })
            },
        )?)
    }

    /// Appends a booking event to the log, with what it did (decided
    /// before anything is written, so the row is written once). `None`
    /// when its `event_id` was already recorded: the caller must then
    /// change nothing.
    pub fn record_commitment_event(&self, e: &NewEvent<'_>, at: DateTime<Utc>) -> Result<Option<i64>> {
        // Built once: this runs for every event ingested one at a time.
        static INSERT: LazyLock<String> =
            LazyLock::new(|| format!("{EVENT_INSERT} VALUES {} ON CONFLICT(event_id) DO NOTHING", marks(9, 1)));
        static INSERT_RETURNING: LazyLock<String> = LazyLock::new(|| format!("{} RETURNING id", *INSERT));
        let insert = INSERT.as_str();
        let args = event_values(e, at);
        let id = if self.is_pg() {
            self.db().row(&INSERT_RETURNING, &args, |r| r.int(0))?
        } else {
            // No `RETURNING` on SQLite: it would make this a statement with
            // a journal of its own (and flush the search index's pending
            // rows each time); the rowid is the connection's last insert.
            match self.db().exec(insert, &args)? {
                0 => None,
                _ => Some(self.sqlite()?.last_insert_rowid()),
            }
        };
        if id.is_none() {
            self.bump_counter(Counter::DuplicateEvents, 1)?;
        }
        Ok(id)
    }

    /// The logged events among `event_ids`, by id: one query for a batch
    /// of events (see [`Tx::logged_event`]).
    pub fn logged_events(&self, event_ids: &[&str]) -> Result<HashMap<String, LoggedEvent>> {
        if event_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let db = self.db();
        let sql = format!(
            "SELECT event_id, commitment_ref, payload FROM commitment_events WHERE event_id IN ({})",
            in_texts(&db, 1)
        );
        let rows = db.rows(&sql, &vals![text_list(event_ids)], |r| {
            Ok((
                r.text(0)?,
                LoggedEvent {
                    commitment_ref: r.text(1)?,
                    payload: r.text(2)?,
                },
            ))
        })?;
        Ok(rows.into_iter().collect())
    }

    /// The commitments among `references`, by reference: one query for a
    /// batch of events (see [`Tx::commitment`]).
    pub fn commitments_by_ref(&self, references: &[&str]) -> Result<HashMap<String, CommitmentRow>> {
        if references.is_empty() {
            return Ok(HashMap::new());
        }
        let db = self.db();
        let sql = format!(
            "SELECT {COMMITMENT_COLS} FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id
             WHERE c.ref IN ({})",
            in_texts(&db, 1)
        );
        let rows = db.rows(&sql, &vals![text_list(references)], commitment_row)?;
        Ok(rows.into_iter().map(|c| (c.commitment.reference.clone(), c)).collect())
    }

    /// Appends booking events to the log in multi-row statements, each
    /// with what it did; an `event_id` already recorded is left as it is.
    /// Returns how many were appended: fewer than given means some id was
    /// already there (the caller, which checked first, then treats the
    /// events one by one).
    pub fn record_commitment_events(&self, events: &[NewEvent<'_>], at: DateTime<Utc>) -> Result<usize> {
        let mut appended = 0;
        for run in runs_of(events.len(), BATCH_RUN) {
            let sql = format!(
                "{EVENT_INSERT} VALUES {} ON CONFLICT(event_id) DO NOTHING",
                marks(9, run.len())
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(run.len() * 9);
            for e in &events[run] {
                values.extend(event_values(e, at));
            }
            appended += self.db().exec(&sql, &values)?;
        }
        Ok(appended)
    }

    /// [`Tx::upsert_contact`] for many phones at once (each phone once):
    /// their ids, by phone.
    pub fn upsert_contacts(&self, contacts: &[NewContact<'_>], at: DateTime<Utc>) -> Result<HashMap<String, i64>> {
        self.remember_name_words(contacts.iter().filter_map(|c| c.name))?;
        let mut ids = HashMap::with_capacity(contacts.len());
        for run in runs_of(contacts.len(), BATCH_RUN) {
            let sql = format!(
                "INSERT INTO contacts(phone, name, language, created_at, updated_at) VALUES {}
                 ON CONFLICT(phone) DO UPDATE SET name = coalesce(excluded.name, contacts.name),
                     language = coalesce(excluded.language, contacts.language), updated_at = excluded.updated_at
                 RETURNING id, phone",
                marks(5, run.len())
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(run.len() * 5);
            for c in &contacts[run] {
                values.extend(vals![c.phone, c.name, c.language, ms(at), ms(at)]);
            }
            self.db().rows(&sql, &values, |r| {
                ids.insert(r.text(1)?, r.int(0)?);
                Ok(())
            })?;
        }
        Ok(ids)
    }

    /// [`Tx::save_commitment`] for many commitments at once (each
    /// reference once), with their contacts: their ids, by reference.
    pub fn save_commitments(
        &self,
        rows: &[(&Commitment, Option<i64>)],
        at: DateTime<Utc>,
    ) -> Result<HashMap<String, i64>> {
        self.remember_name_words(rows.iter().filter_map(|(c, _)| c.name.as_deref()))?;
        let mut ids = HashMap::with_capacity(rows.len());
        for run in runs_of(rows.len(), BATCH_RUN) {
            let sql = format!(
                "INSERT INTO commitments(ref, kind, status, version, starts_at, service, location, contact_id,
                                         confirmed_at, manual_contact_at, created_at, updated_at, contact_name)
                 VALUES {} {SAVE_COMMITMENT_CONFLICT} RETURNING id, ref",
                marks(13, run.len())
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(run.len() * 13);
            for (c, contact_id) in &rows[run] {
                values.extend(commitment_values(c, *contact_id, at));
            }
            self.db().rows(&sql, &values, |r| {
                ids.insert(r.text(1)?, r.int(0)?);
                Ok(())
            })?;
        }
        Ok(ids)
    }

    pub fn commitment(&self, reference: &str) -> Result<Option<CommitmentRow>> {
        Ok(self.db().row(
            &format!(
                "SELECT {COMMITMENT_COLS} FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id WHERE c.ref = ?1"
            ),
            &vals![reference],
            commitment_row,
        )?)
    }

    pub fn commitment_by_id(&self, id: i64) -> Result<CommitmentRow> {
        self.db()
            .row(
                &format!(
                    "SELECT {COMMITMENT_COLS} FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id WHERE c.id = ?1"
                ),
                &vals![id],
                commitment_row,
            )?
            .ok_or_else(|| StoreError::NoCommitment(format!("#{id}")))
    }

    /// Inserts or updates the contact by phone; the name and language of
    /// the latest event win, consent and opt-outs are never touched here.
    pub fn upsert_contact(
        &self,
        phone: &str,
        name: Option<&str>,
        language: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<i64> {
        self.remember_name_words(name)?;
        self.db()
            .row(
                "INSERT INTO contacts(phone, name, language, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT(phone) DO UPDATE SET name = coalesce(excluded.name, contacts.name),
                     language = coalesce(excluded.language, contacts.language), updated_at = excluded.updated_at
                 RETURNING id",
                &vals![phone, name, language, ms(at)],
                |r| r.int(0),
            )?
            .ok_or_else(|| StoreError::Corrupt {
                table: "contacts",
                detail: "an upsert returned no row".into(),
            })
    }

    pub fn contact(&self, id: i64) -> Result<Option<ContactRow>> {
        self.contact_where("id", Value::from(id))
    }

    pub fn contact_by_phone(&self, phone: &str) -> Result<Option<ContactRow>> {
        self.contact_where("phone", Value::from(phone))
    }

    /// The contact whose `column` (a unique one: `id`, `phone`) is `value`.
    fn contact_where(&self, column: &str, value: Value) -> Result<Option<ContactRow>> {
        let sql = format!(
            "SELECT id, phone, name, language, consent_marketing, opt_out_marketing_at,
                    opt_out_transactional_at, last_inbound_at FROM contacts WHERE {column} = ?1"
        );
        Ok(self.db().row(&sql, &[value], |r| contact_row(r, 0))?)
    }

    /// Writes the commitment as the domain computed it; returns its id.
    pub fn save_commitment(&self, c: &Commitment, contact_id: Option<i64>, at: DateTime<Utc>) -> Result<i64> {
        self.remember_name_words(c.name.as_deref())?;
        let sql = format!(
            "INSERT INTO commitments(ref, kind, status, version, starts_at, service, location, contact_id,
                                     confirmed_at, manual_contact_at, created_at, updated_at, contact_name)
             VALUES {} {SAVE_COMMITMENT_CONFLICT} RETURNING id",
            marks(13, 1)
        );
        self.db()
            .row(&sql, &commitment_values(c, contact_id, at), |r| r.int(0))?
            .ok_or_else(|| StoreError::Corrupt {
                table: "commitments",
                detail: "an upsert returned no row".into(),
            })
    }

    pub fn list_commitments(&self, limit: u32, offset: u32) -> Result<Vec<CommitmentRow>> {
        Ok(self.db().rows(
            &format!(
                "SELECT {COMMITMENT_COLS} FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id
                 ORDER BY c.starts_at IS NULL, c.starts_at, c.id LIMIT ?1 OFFSET ?2"
            ),
            &vals![limit, offset],
            commitment_row,
        )?)
    }

    /// The commitment's event log, oldest first: `(event_id, type, effect,
    /// version_before, version_after, received_at)`.
    pub fn commitment_events(&self, reference: &str) -> Result<Vec<EventLogRow>> {
        Ok(self.db().rows(
            "SELECT event_id, type, effect, version_before, version_after, received_at
             FROM commitment_events WHERE commitment_ref = ?1 ORDER BY id",
            &vals![reference],
            |r| {
                Ok((
                    r.text(0)?,
                    r.text(1)?,
                    r.text(2)?,
                    r.opt_int(3)?,
                    r.opt_int(4)?,
                    r.time(5)?,
                ))
            },
        )?)
    }
}
