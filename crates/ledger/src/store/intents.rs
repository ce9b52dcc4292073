//! Intentions: atomic reservation, signals through the state machine, and
//! the history that records every one of them.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use std::collections::HashMap;

use rusqlite::params_from_iter;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};

use super::{Result, StoreError, Tx, from_ms, ms};
use crate::api::{PlannedRow, Reservation, ReserveRow};
use crate::domain::history::Record;
use crate::domain::key::Purpose;
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::{IntentionState, Signal, Transition, transition};
use crate::templates::Category;

/// Intentions per multi-row insert (26 parameters each, well under
/// SQLite's limit of 32,766).
const RESERVE_CHUNK: usize = 128;
/// History rows per multi-row insert (10 parameters each).
const HISTORY_CHUNK: usize = 128;

pub use crate::domain::history::Cause;

/// Bound values that borrow the row's strings instead of copying them.
fn text(t: &str) -> ToSqlOutput<'_> {
    ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes()))
}

fn opt_text(t: &Option<String>) -> ToSqlOutput<'_> {
    t.as_deref().map_or(ToSqlOutput::Owned(Value::Null), text)
}

fn int(i: i64) -> ToSqlOutput<'static> {
    ToSqlOutput::Owned(Value::Integer(i))
}

fn opt_int(i: Option<i64>) -> ToSqlOutput<'static> {
    ToSqlOutput::Owned(Value::from(i))
}

/// The outcome of reserving one intention: the new row, or the existing
/// one with the same key and content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "id", rename_all = "snake_case")]
pub enum Reserved {
    New(i64),
    Existing(i64),
}

impl Reserved {
    pub fn id(self) -> i64 {
        match self {
            Reserved::New(id) | Reserved::Existing(id) => id,
        }
    }
}

/// What [`Tx::signal`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalResult {
    pub from: IntentionState,
    pub transition: Transition,
}

impl SignalResult {
    pub fn moved(&self) -> bool {
        matches!(self.transition, Transition::Move(_))
    }
    pub fn refused(&self) -> bool {
        matches!(self.transition, Transition::Refuse)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct IntentionRow {
    pub id: i64,
    pub key: String,
    pub commitment_id: i64,
    pub commitment_ref: String,
    pub commitment_version: i64,
    pub purpose: String,
    pub recipient: String,
    pub category: String,
    pub channel: String,
    pub template: String,
    pub language: String,
    pub parameters: Vec<String>,
    pub body: String,
    pub fingerprint: String,
    pub correlation_id: String,
    pub asks_confirmation: bool,
    pub due_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub day: OperatingDay,
    pub state: IntentionState,
    pub state_reason: Option<String>,
    pub state_changed_at: DateTime<Utc>,
    pub related_id: Option<i64>,
    pub created_by: String,
    pub authorized_by: Option<String>,
    pub reason: Option<String>,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub attempt_count: i64,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub provider_command_id: Option<String>,
    pub provider_message_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl IntentionRow {
    pub fn purpose(&self) -> Purpose {
        Purpose::from_slug(&self.purpose)
    }
    pub fn category(&self) -> Category {
        Category::parse(&self.category).unwrap_or(Category::Transactional)
    }
}

pub(super) const INTENTION_COLS: &str = "i.id, i.key, i.commitment_id, c.ref, i.commitment_version, i.purpose,
    i.recipient, i.category, i.channel, i.template, i.language, i.parameters, i.body, i.fingerprint,
    i.correlation_id, i.asks_confirmation, i.due_at, i.expires_at, i.day, i.state, i.state_reason,
    i.state_changed_at, i.related_id, i.created_by, i.authorized_by, i.reason, i.lease_owner, i.lease_until,
    i.attempt_count, i.next_attempt_at, i.provider_command_id, i.provider_message_id, i.created_at";

pub(super) fn intention_row(r: &Row<'_>) -> rusqlite::Result<IntentionRow> {
    let params_json: String = r.get(11)?;
    let state: String = r.get(19)?;
    let corrupt =
        |i: usize, what: String| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, what.into());
    Ok(IntentionRow {
        id: r.get(0)?,
        key: r.get(1)?,
        commitment_id: r.get(2)?,
        commitment_ref: r.get(3)?,
        commitment_version: r.get(4)?,
        purpose: r.get(5)?,
        recipient: r.get(6)?,
        category: r.get(7)?,
        channel: r.get(8)?,
        template: r.get(9)?,
        language: r.get(10)?,
        parameters: serde_json::from_str(&params_json).map_err(|e| corrupt(11, e.to_string()))?,
        body: r.get(12)?,
        fingerprint: r.get(13)?,
        correlation_id: r.get(14)?,
        asks_confirmation: r.get(15)?,
        due_at: from_ms(r.get(16)?),
        expires_at: r.get::<_, Option<i64>>(17)?.map(from_ms),
        day: {
            let d: String = r.get(18)?;
            OperatingDay::parse(&d).map_err(|e| corrupt(18, e))?
        },
        state: state
            .parse()
            .map_err(|e: crate::domain::state::UnknownState| corrupt(19, e.to_string()))?,
        state_reason: r.get(20)?,
        state_changed_at: from_ms(r.get(21)?),
        related_id: r.get(22)?,
        created_by: r.get(23)?,
        authorized_by: r.get(24)?,
        reason: r.get(25)?,
        lease_owner: r.get(26)?,
        lease_until: r.get::<_, Option<i64>>(27)?.map(from_ms),
        attempt_count: r.get(28)?,
        next_attempt_at: r.get::<_, Option<i64>>(29)?.map(from_ms),
        provider_command_id: r.get(30)?,
        provider_message_id: r.get(31)?,
        created_at: from_ms(r.get(32)?),
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub from_state: Option<String>,
    pub to_state: String,
    pub applied: bool,
    pub signal: String,
    pub cause: String,
    pub evidence: Option<String>,
    pub note: Option<String>,
    pub commitment_version: Option<i64>,
}

/// A history entry to append.
pub struct Entry<'a> {
    pub signal: &'a str,
    pub cause: Cause,
    pub evidence: Option<&'a str>,
    pub note: Option<&'a str>,
    pub commitment_version: Option<i64>,
}

impl Tx<'_> {
    /// Reserves intentions: each new key is inserted with its history row,
    /// and every reservation gets back the stored id and fingerprint (the
    /// caller judges a different fingerprint a conflict). Check and insert
    /// are one statement per chunk inside the caller's `BEGIN IMMEDIATE`,
    /// and the key is `UNIQUE`, so concurrent presenters (threads or
    /// processes) all end up with the same row.
    pub fn reserve_many(&self, rows: &[Reservation<'_>]) -> Result<Vec<ReserveRow>> {
        let mut out: Vec<Option<ReserveRow>> = vec![None; rows.len()];
        let mut history = Vec::new();
        for (c, chunk) in rows.chunks(RESERVE_CHUNK).enumerate() {
            let mut inserted = self.insert_intentions(chunk)?;
            for (k, r) in chunk.iter().enumerate() {
                // A key given twice is inserted once: the second is "existing".
                if let Some(id) = inserted.remove(r.intention.key.as_str()) {
                    out[c * RESERVE_CHUNK + k] = Some(ReserveRow {
                        id,
                        inserted: true,
                        fingerprint: r.fingerprint.to_string(),
                    });
                    history.push(Record {
                        intention_id: id,
                        from: None,
                        to: IntentionState::Planned,
                        applied: true,
                        reason: None,
                        said: r.said.clone(),
                        at: r.at,
                    });
                }
            }
        }
        // Keys that already existed: the stored row, for the caller to compare.
        let mut stmt = self
            .conn()?
            .prepare_cached("SELECT id, fingerprint FROM intentions WHERE key = ?1")?;
        for (slot, r) in out.iter_mut().zip(rows) {
            if slot.is_none() {
                let (id, fingerprint) = stmt.query_row([r.intention.key.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))?;
                *slot = Some(ReserveRow {
                    id,
                    inserted: false,
                    fingerprint,
                });
            }
        }
        self.apply_records(&history)?;
        Ok(out.into_iter().flatten().collect())
    }

    /// One multi-row `INSERT … ON CONFLICT(key) DO NOTHING`; the ids of the
    /// rows it inserted, by key.
    fn insert_intentions(&self, chunk: &[Reservation<'_>]) -> Result<HashMap<String, i64>> {
        // `starts_at` is the commitment's (migration 0002), set here so the
        // trigger that would otherwise copy it has nothing to do.
        let one = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'planned', ?, \
                   ?, ?, ?, ?, ?, ?, (SELECT starts_at FROM commitments WHERE id = ?))";
        let sql = format!(
            "INSERT INTO intentions(key, commitment_id, commitment_version, purpose, contact_id, recipient,
                 category, channel, template, language, parameters, body, fingerprint, correlation_id,
                 asks_confirmation, due_at, expires_at, day, state, state_changed_at, related_id, created_by,
                 authorized_by, reason, created_at, updated_at, starts_at)
             VALUES {} ON CONFLICT(key) DO NOTHING RETURNING id, key",
            vec![one; chunk.len()].join(", ")
        );
        // The values each row computes, owned here so that every other
        // column binds a borrowed string (no copy of bodies and parameters).
        let mut computed: Vec<(String, String, String, Option<i64>)> = Vec::with_capacity(chunk.len());
        for r in chunk {
            let n = r.intention;
            let params_json = serde_json::to_string(&n.parameters).map_err(|e| StoreError::Corrupt {
                table: "intentions",
                detail: e.to_string(),
            })?;
            // Only a resend names a related intention: looked up here
            // instead of a subquery on every row.
            let related = match &n.related_key {
                Some(k) => self.intention_id(k.as_str())?,
                None => None,
            };
            computed.push((params_json, n.purpose.slug(), n.day.to_string(), related));
        }
        let mut values: Vec<ToSqlOutput<'_>> = Vec::with_capacity(chunk.len() * 26);
        for (r, (params_json, purpose, day, related)) in chunk.iter().zip(&computed) {
            let n = r.intention;
            let at = ms(r.at);
            values.extend([
                text(n.key.as_str()),
                int(r.commitment_id),
                int(n.commitment_version),
                text(purpose),
                opt_int(r.contact_id),
                text(&n.recipient),
                text(n.category.as_str()),
                text(&n.channel),
                text(&n.template),
                text(&n.language),
                text(params_json),
                text(&n.body),
                text(r.fingerprint),
                text(&n.correlation_id),
                int(i64::from(n.asks_confirmation)),
                int(ms(n.due_at)),
                opt_int(n.expires_at.map(ms)),
                text(day),
                int(at),
                opt_int(*related),
                text(&n.created_by),
                opt_text(&n.authorized_by),
                opt_text(&n.reason),
                int(at),
                int(at),
                int(r.commitment_id),
            ]);
        }
        let mut stmt = self.conn()?.prepare_cached(&sql)?;
        let rows = stmt
            .query_map(params_from_iter(values), |r| Ok((r.get(1)?, r.get(0)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    pub fn intention_id(&self, key: &str) -> Result<Option<i64>> {
        Ok(self
            .conn()?
            .query_row("SELECT id FROM intentions WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    pub fn intention(&self, id: i64) -> Result<IntentionRow> {
        self.conn()?
            .query_row(
                &format!("SELECT {INTENTION_COLS} FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE i.id = ?1"),
                [id],
                intention_row,
            )
            .optional()?
            .ok_or_else(|| StoreError::NoIntention(format!("#{id}")))
    }

    /// Feeds one signal through the state machine and records it. Moves
    /// and record-only signals are written to history; refused ones are
    /// not written and the caller decides how to explain them.
    pub fn signal(&self, id: i64, signal: Signal, entry: &Entry<'_>, at: DateTime<Utc>) -> Result<SignalResult> {
        let from: String = self
            .conn()?
            .query_row("SELECT state FROM intentions WHERE id = ?1", [id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NoIntention(format!("#{id}")))?;
        let from: IntentionState =
            from.parse()
                .map_err(|e: crate::domain::state::UnknownState| StoreError::Corrupt {
                    table: "intentions",
                    detail: e.to_string(),
                })?;
        let t = transition(from, signal);
        match t {
            Transition::Move(to) => {
                let reason = match signal {
                    Signal::Cancel(r) => Some(r.as_str().to_string()),
                    _ => entry.note.map(str::to_string),
                };
                self.move_state(id, None, to, reason.as_deref(), at)?;
                self.append_history(id, Some(from), to, true, entry, at)?;
            }
            Transition::Record(why) => {
                let note = match entry.note {
                    Some(n) => format!("{}: {n}", why.as_str()),
                    None => why.as_str().to_string(),
                };
                self.append_history(
                    id,
                    Some(from),
                    from,
                    false,
                    &Entry {
                        note: Some(&note),
                        ..*entry
                    },
                    at,
                )?;
            }
            Transition::Refuse => {}
        }
        Ok(SignalResult { from, transition: t })
    }

    /// Appends a history row without a state change (notes, duplicate
    /// webhooks, version sequences observed in flight).
    pub fn note(&self, id: i64, entry: &Entry<'_>, at: DateTime<Utc>) -> Result<()> {
        let state: String = self
            .conn()?
            .query_row("SELECT state FROM intentions WHERE id = ?1", [id], |r| r.get(0))?;
        let st = state.parse().unwrap_or(IntentionState::Planned);
        self.append_history(id, Some(st), st, false, entry, at)
    }

    fn append_history(
        &self,
        id: i64,
        from: Option<IntentionState>,
        to: IntentionState,
        applied: bool,
        e: &Entry<'_>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.conn()?.execute(
            "INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause, evidence, note, commitment_version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                id,
                ms(at),
                from.map(|s| s.as_str()),
                to.as_str(),
                applied,
                e.signal,
                e.cause.as_str(),
                e.evidence,
                e.note,
                e.commitment_version
            ],
        )?;
        Ok(())
    }

    pub fn planned_of_commitment(&self, commitment_id: i64) -> Result<Vec<PlannedRow>> {
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT id, key, commitment_version, purpose, asks_confirmation FROM intentions
             WHERE commitment_id = ?1 AND state = 'planned' ORDER BY id",
        )?;
        let rows = stmt
            .query_map([commitment_id], |r| {
                Ok(PlannedRow {
                    id: r.get(0)?,
                    key: r.get(1)?,
                    commitment_version: r.get(2)?,
                    purpose: r.get(3)?,
                    asks_confirmation: r.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// Appends history rows, moving the intentions of applied ones (see
    /// [`crate::api::LedgerTx::apply_records`]).
    pub fn apply_records(&self, records: &[Record]) -> Result<()> {
        for r in records {
            if let (true, Some(from)) = (r.applied, r.from) {
                let changed = self.move_state(r.intention_id, Some(from), r.to, r.reason.as_deref(), r.at)?;
                if changed == 0 {
                    return Err(StoreError::Moved {
                        id: r.intention_id,
                        expected: from,
                    });
                }
            }
        }
        for chunk in records.chunks(HISTORY_CHUNK) {
            let sql = format!(
                "INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause,
                     evidence, note, commitment_version) VALUES {}",
                vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ")
            );
            let mut values: Vec<ToSqlOutput<'_>> = Vec::with_capacity(chunk.len() * 10);
            for r in chunk {
                values.extend([
                    int(r.intention_id),
                    int(ms(r.at)),
                    r.from.map_or(ToSqlOutput::Owned(Value::Null), |s| text(s.as_str())),
                    text(r.to.as_str()),
                    int(i64::from(r.applied)),
                    text(r.said.signal.as_str()),
                    text(r.said.cause.as_str()),
                    opt_text(&r.said.evidence),
                    opt_text(&r.said.note),
                    opt_int(r.said.commitment_version),
                ]);
            }
            self.conn()?.prepare_cached(&sql)?.execute(params_from_iter(values))?;
        }
        Ok(())
    }

    /// Moves one intention to `to` (only from `from`, when given); leaving
    /// `dispatching` ends the lease. Returns the rows changed.
    fn move_state(
        &self,
        id: i64,
        from: Option<IntentionState>,
        to: IntentionState,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<usize> {
        Ok(self.conn()?.execute(
            "UPDATE intentions SET state = ?2, state_reason = ?3, state_changed_at = ?4, updated_at = ?4,
                 lease_owner = CASE WHEN ?2 = 'dispatching' THEN lease_owner ELSE NULL END,
                 lease_until = CASE WHEN ?2 = 'dispatching' THEN lease_until ELSE NULL END
             WHERE id = ?1 AND (?5 IS NULL OR state = ?5)",
            params![id, to.as_str(), reason, ms(at), from.map(|s| s.as_str())],
        )?)
    }
}
