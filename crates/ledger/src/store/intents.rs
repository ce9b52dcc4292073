//! Intentions: atomic reservation, signals through the state machine, and
//! the history that records every one of them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use std::collections::HashMap;

use super::dispatch::runs_of;
use super::{Result, StoreError, Tx, ms};
use crate::api::{PlannedRow, Reservation, ReserveRow};
use crate::domain::history::Record;
use crate::domain::key::Purpose;
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::{IntentionState, Signal, Transition, transition};
pub(super) use crate::rows::INTENTION_COLS;
use crate::sql::Value;
use crate::templates::Category;
use crate::vals;

/// Intentions per multi-row insert at most (26 parameters each, well
/// under SQLite's limit of 32,766): an import reserves a few hundred at a
/// time, and each statement pays its own statement journal (a copy of
/// every page it touches first), so fewer, larger statements copy less.
const RESERVE_RUN: usize = 512;

pub use crate::domain::history::Cause;

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
        let starts = self.commitment_starts(rows)?;
        for run in runs_of(rows.len(), RESERVE_RUN) {
            let chunk = &rows[run.clone()];
            let mut inserted = self.insert_intentions(chunk, &starts)?;
            for (k, r) in chunk.iter().enumerate() {
                // A key given twice is inserted once: the second is "existing".
                if let Some(id) = inserted.remove(r.intention.key.as_str()) {
                    out[run.start + k] = Some(ReserveRow {
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
        for (slot, r) in out.iter_mut().zip(rows) {
            if slot.is_none() {
                let (id, fingerprint) = self
                    .db()
                    .row(
                        "SELECT id, fingerprint FROM intentions WHERE key = ?1",
                        &vals![r.intention.key.as_str()],
                        |r| Ok((r.int(0)?, r.text(1)?)),
                    )?
                    .ok_or_else(|| StoreError::NoIntention(r.intention.key.to_string()))?;
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

    /// The start time of every commitment the reservations belong to, read
    /// once (`intentions.starts_at` copies it, migration 0002). A scalar
    /// subquery per row in the insert cost more: each opened a cursor of
    /// its own, and SQLite walks every open cursor when it opens one. On
    /// PostgreSQL a trigger sets the copy, so nothing is read.
    fn commitment_starts(&self, rows: &[Reservation<'_>]) -> Result<HashMap<i64, Option<i64>>> {
        if self.is_pg() || rows.is_empty() {
            return Ok(HashMap::new());
        }
        let mut ids: Vec<i64> = rows.iter().map(|r| r.commitment_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let db = self.db();
        let sql = format!(
            "SELECT id, starts_at FROM commitments WHERE id IN ({})",
            super::dispatch::in_ids(&db, 1)
        );
        let found = db.rows(&sql, &vals![super::dispatch::id_list(&ids)], |r| {
            Ok((r.int(0)?, r.opt_int(1)?))
        })?;
        Ok(found.into_iter().collect())
    }

    /// One multi-row `INSERT … ON CONFLICT(key) DO NOTHING`; the ids of the
    /// rows it inserted, by key.
    fn insert_intentions(
        &self,
        chunk: &[Reservation<'_>],
        starts: &HashMap<i64, Option<i64>>,
    ) -> Result<HashMap<String, i64>> {
        // `starts_at` is the commitment's (migration 0002), set here so the
        // trigger that would otherwise copy it has nothing to do.
        let one = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'planned', ?, \
                   ?, ?, ?, ?, ?, ?, ?)";
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
        let mut values: Vec<Value<'_>> = Vec::with_capacity(chunk.len() * 26);
        for (r, (params_json, purpose, day, related)) in chunk.iter().zip(&computed) {
            let n = r.intention;
            let at = ms(r.at);
            values.extend(vals![
                n.key.as_str(),
                r.commitment_id,
                n.commitment_version,
                purpose,
                r.contact_id,
                &n.recipient,
                n.category.as_str(),
                &n.channel,
                &n.template,
                &n.language,
                params_json,
                &n.body,
                r.fingerprint,
                &n.correlation_id,
                n.asks_confirmation,
                ms(n.due_at),
                n.expires_at.map(ms),
                day,
                at,
                *related,
                &n.created_by,
                n.authorized_by.as_ref(),
                n.reason.as_ref(),
                at,
                at,
                starts.get(&r.commitment_id).copied().flatten(),
            ]);
        }
        let mut ids = HashMap::with_capacity(chunk.len());
        self.db().rows(&sql, &values, |r| {
            ids.insert(r.text(1)?, r.int(0)?);
            Ok(())
        })?;
        Ok(ids)
    }

    pub fn intention_id(&self, key: &str) -> Result<Option<i64>> {
        Ok(self
            .db()
            .row("SELECT id FROM intentions WHERE key = ?1", &vals![key], |r| r.int(0))?)
    }

    pub fn intention(&self, id: i64) -> Result<IntentionRow> {
        self.db()
            .row(
                &format!("SELECT {INTENTION_COLS} FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE i.id = ?1"),
                &vals![id],
                |r| crate::rows::intention_row(r),
            )?
            .ok_or_else(|| StoreError::NoIntention(format!("#{id}")))
    }

    /// The state an intention is in now.
    fn state_of(&self, id: i64) -> Result<IntentionState> {
        self.db()
            .row("SELECT state FROM intentions WHERE id = ?1", &vals![id], |r| r.state(0))?
            .ok_or_else(|| StoreError::NoIntention(format!("#{id}")))
    }

    /// Feeds one signal through the state machine and records it. Moves
    /// and record-only signals are written to history; refused ones are
    /// not written and the caller decides how to explain them.
    pub fn signal(&self, id: i64, signal: Signal, entry: &Entry<'_>, at: DateTime<Utc>) -> Result<SignalResult> {
        let from = self.state_of(id)?;
        let t = transition(from, signal);
        match t {
            Transition::Move(to) => {
                let reason = match signal {
                    Signal::Cancel(r) => Some(r.as_str().to_string()),
                    _ => entry.note.map(str::to_string),
                };
                // Only from the state the decision was made on: on
                // PostgreSQL another writer (a webhook for the same message
                // a moment later) may have moved the row since it was read,
                // and an unconditional update would move it back down. The
                // transaction then runs again on the fresh row.
                if self.move_state(id, Some(from), to, reason.as_deref(), at)? == 0 {
                    return Err(self.stale(StoreError::Moved { id, expected: from }));
                }
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
        let st = self.state_of(id)?;
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
        self.db().exec(
            "INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause, evidence, note, commitment_version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            &vals![
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
        Ok(self.db().rows(
            "SELECT id, key, commitment_version, purpose, asks_confirmation FROM intentions
             WHERE commitment_id = ?1 AND state = 'planned' ORDER BY id",
            &vals![commitment_id],
            |r| {
                Ok(PlannedRow {
                    id: r.int(0)?,
                    key: r.text(1)?,
                    commitment_version: r.int(2)?,
                    purpose: r.text(3)?,
                    asks_confirmation: r.flag(4)?,
                })
            },
        )?)
    }

    /// Appends history rows, moving the intentions of applied ones (see
    /// [`crate::api::LedgerTx::apply_records`]).
    pub fn apply_records(&self, records: &[Record]) -> Result<()> {
        for r in records {
            if let (true, Some(from)) = (r.applied, r.from) {
                let changed = self.move_state(r.intention_id, Some(from), r.to, r.reason.as_deref(), r.at)?;
                if changed == 0 {
                    return Err(self.stale(StoreError::Moved {
                        id: r.intention_id,
                        expected: from,
                    }));
                }
            }
        }
        let all: Vec<&Record> = records.iter().collect();
        self.insert_history(&all)
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
        Ok(self.db().exec(
            "UPDATE intentions SET state = ?2, state_reason = ?3, state_changed_at = ?4, updated_at = ?4,
                 lease_owner = CASE WHEN ?2 = 'dispatching' THEN lease_owner ELSE NULL END,
                 lease_until = CASE WHEN ?2 = 'dispatching' THEN lease_until ELSE NULL END
             WHERE id = ?1 AND (CAST(?5 AS TEXT) IS NULL OR state = ?5)",
            &vals![id, to.as_str(), reason, ms(at), from.map(|s| s.as_str())],
        )?)
    }
}
