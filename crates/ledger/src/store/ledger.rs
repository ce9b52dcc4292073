//! Commitments, their event log and contacts.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use super::{Result, StoreError, Tx, from_ms, ms};
use crate::domain::commitment::{Commitment, CommitmentKind, CommitmentStatus};
use crate::domain::counter::Counter;
use rusqlite::types::Type;

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

/// A stored commitment status, typed (an unknown word is a read error
/// naming it, not a status nobody matches).
pub(super) fn status_col(r: &Row<'_>, i: usize) -> rusqlite::Result<CommitmentStatus> {
    let status: String = r.get(i)?;
    CommitmentStatus::parse(&status).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(i, Type::Text, format!("unknown commitment status {status:?}").into())
    })
}

fn commitment_row(r: &Row<'_>) -> rusqlite::Result<CommitmentRow> {
    let kind: String = r.get(2)?;
    let status = status_col(r, 3)?;
    Ok(CommitmentRow {
        id: r.get(0)?,
        commitment: Commitment {
            reference: r.get(1)?,
            kind: CommitmentKind::parse(&kind).unwrap_or(CommitmentKind::Appointment),
            status,
            version: r.get(4)?,
            starts_at: r.get::<_, Option<i64>>(5)?.map(from_ms),
            service: r.get(6)?,
            location: r.get(7)?,
            phone: r.get(13)?,
            name: r.get(14)?,
            language: r.get(15)?,
            confirmed_at: r.get::<_, Option<i64>>(9)?.map(from_ms),
            manual_contact_at: r.get::<_, Option<i64>>(10)?.map(from_ms),
        },
        contact_id: r.get(8)?,
        reschedule_requested_at: r.get::<_, Option<i64>>(11)?.map(from_ms),
        updated_at: from_ms(r.get(12)?),
    })
}

fn contact_row(r: &Row<'_>) -> rusqlite::Result<ContactRow> {
    contact_row_from(r, 0)
}

/// A contact read from column `at` on (the contact columns of a join).
pub(super) fn contact_row_from(r: &Row<'_>, at: usize) -> rusqlite::Result<ContactRow> {
    Ok(ContactRow {
        id: r.get(at)?,
        phone: r.get(at + 1)?,
        name: r.get(at + 2)?,
        language: r.get(at + 3)?,
        consent_marketing: r.get(at + 4)?,
        opt_out_marketing_at: r.get::<_, Option<i64>>(at + 5)?.map(from_ms),
        opt_out_transactional_at: r.get::<_, Option<i64>>(at + 6)?.map(from_ms),
        last_inbound_at: r.get::<_, Option<i64>>(at + 7)?.map(from_ms),
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

/// A booking event already in the log, as it was received.
#[derive(Debug, Clone)]
pub struct LoggedEvent {
    pub commitment_ref: String,
    pub payload: String,
}

impl Tx<'_> {
    /// The logged event with this id, if any: a repeated id is a duplicate
    /// only when its content is the same.
    pub fn logged_event(&self, event_id: &str) -> Result<Option<LoggedEvent>> {
        Ok(self
            .conn()?
            .query_row(
                "SELECT commitment_ref, payload FROM commitment_events WHERE event_id = ?1",
                [event_id],
                |r| {
                    Ok(LoggedEvent {
                        commitment_ref: r.get(0)?,
                        payload: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }

    /// Appends a booking event to the log, with what it did (decided
    /// before anything is written, so the row is written once). `None`
    /// when its `event_id` was already recorded: the caller must then
    /// change nothing.
    pub fn record_commitment_event(&self, e: &NewEvent<'_>, at: DateTime<Utc>) -> Result<Option<i64>> {
        // No `RETURNING`: it would make this a statement with a journal of
        // its own (and flush the search index's pending rows each time).
        let inserted = self.conn()?.execute(
            "INSERT INTO commitment_events(event_id, commitment_ref, type, effect, version_before, version_after,
                 source, payload, received_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT(event_id) DO NOTHING",
            params![
                e.event_id,
                e.reference,
                e.kind,
                e.effect.as_str(),
                e.version_before,
                e.version_after,
                e.source,
                e.payload,
                ms(at)
            ],
        )?;
        if inserted == 0 {
            self.bump_counter(Counter::DuplicateEvents, 1)?;
            return Ok(None);
        }
        Ok(Some(self.conn()?.last_insert_rowid()))
    }

    pub fn commitment(&self, reference: &str) -> Result<Option<CommitmentRow>> {
        Ok(self
            .conn()?
            .query_row(
                &format!(
                    "SELECT {COMMITMENT_COLS} FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id WHERE c.ref = ?1"
                ),
                [reference],
                commitment_row,
            )
            .optional()?)
    }

    pub fn commitment_by_id(&self, id: i64) -> Result<CommitmentRow> {
        self.conn()?
            .query_row(
                &format!(
                    "SELECT {COMMITMENT_COLS} FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id WHERE c.id = ?1"
                ),
                [id],
                commitment_row,
            )
            .optional()?
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
        Ok(self.conn()?.query_row(
            "INSERT INTO contacts(phone, name, language, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
             ON CONFLICT(phone) DO UPDATE SET name = coalesce(excluded.name, name),
                 language = coalesce(excluded.language, language), updated_at = excluded.updated_at
             RETURNING id",
            params![phone, name, language, ms(at)],
            |r| r.get(0),
        )?)
    }

    pub fn contact(&self, id: i64) -> Result<Option<ContactRow>> {
        self.contact_where("id", id)
    }

    pub fn contact_by_phone(&self, phone: &str) -> Result<Option<ContactRow>> {
        self.contact_where("phone", phone)
    }

    /// The contact whose `column` (a unique one: `id`, `phone`) is `value`.
    fn contact_where(&self, column: &str, value: impl rusqlite::ToSql) -> Result<Option<ContactRow>> {
        let sql = format!(
            "SELECT id, phone, name, language, consent_marketing, opt_out_marketing_at,
                    opt_out_transactional_at, last_inbound_at FROM contacts WHERE {column} = ?1"
        );
        Ok(self.conn()?.query_row(&sql, [value], contact_row).optional()?)
    }

    /// Writes the commitment as the domain computed it; returns its id.
    pub fn save_commitment(&self, c: &Commitment, contact_id: Option<i64>, at: DateTime<Utc>) -> Result<i64> {
        Ok(self.conn()?.query_row(
            "INSERT INTO commitments(ref, kind, status, version, starts_at, service, location, contact_id,
                                     confirmed_at, manual_contact_at, created_at, updated_at, contact_name)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12)
             ON CONFLICT(ref) DO UPDATE SET status = excluded.status, version = excluded.version,
                 starts_at = excluded.starts_at, service = excluded.service, location = excluded.location,
                 contact_id = coalesce(excluded.contact_id, contact_id), confirmed_at = excluded.confirmed_at,
                 manual_contact_at = excluded.manual_contact_at, updated_at = excluded.updated_at,
                 contact_name = excluded.contact_name
             RETURNING id",
            params![
                c.reference,
                c.kind.as_str(),
                c.status.as_str(),
                c.version,
                c.starts_at.map(ms),
                c.service,
                c.location,
                contact_id,
                c.confirmed_at.map(ms),
                c.manual_contact_at.map(ms),
                ms(at),
                c.name
            ],
            |r| r.get(0),
        )?)
    }

    pub fn list_commitments(&self, limit: u32, offset: u32) -> Result<Vec<CommitmentRow>> {
        let mut stmt = self.conn()?.prepare_cached(&format!(
            "SELECT {COMMITMENT_COLS} FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id
             ORDER BY c.starts_at IS NULL, c.starts_at, c.id LIMIT ?1 OFFSET ?2"
        ))?;
        let rows = stmt
            .query_map(params![limit, offset], commitment_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// The commitment's event log, oldest first: `(event_id, type, effect,
    /// version_before, version_after, received_at)`.
    pub fn commitment_events(&self, reference: &str) -> Result<Vec<EventLogRow>> {
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT event_id, type, effect, version_before, version_after, received_at
             FROM commitment_events WHERE commitment_ref = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([reference], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    from_ms(r.get(5)?),
                ))
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}
