//! Intentions: atomic reservation, signals through the state machine, and
//! the history that records every one of them.

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use super::{Result, StoreError, Tx, from_ms, ms};
use crate::domain::intention::NewIntention;
use crate::domain::key::Purpose;
use crate::domain::state::{IntentionState, Signal, Transition, transition};
use crate::planner::Closure;
use crate::templates::Category;

/// Who caused a signal, as recorded in history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    Planner,
    Dispatcher,
    Webhook,
    Reconciler,
    Operator,
    Import,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Planner => "planner",
            Cause::Dispatcher => "dispatcher",
            Cause::Webhook => "webhook",
            Cause::Reconciler => "reconciler",
            Cause::Operator => "operator",
            Cause::Import => "import",
        }
    }
}

/// The outcome of [`Tx::reserve`].
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
    pub day: String,
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
        day: r.get(18)?,
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
    /// Reserves an intention: the new row, or the existing one for the same
    /// key. Check and insert are one statement inside the caller's
    /// `BEGIN IMMEDIATE`, and the key is `UNIQUE`, so concurrent presenters
    /// (threads or processes) all end up with the same row.
    pub fn reserve(
        &self,
        n: &NewIntention,
        commitment_id: i64,
        contact_id: Option<i64>,
        at: DateTime<Utc>,
    ) -> Result<Reserved> {
        let fingerprint = n.fingerprint();
        let related_id: Option<i64> = match &n.related_key {
            Some(k) => self.intention_id(k.as_str())?,
            None => None,
        };
        let params_json = serde_json::to_string(&n.parameters).map_err(|e| StoreError::Corrupt {
            table: "intentions",
            detail: e.to_string(),
        })?;
        // `starts_at` is the commitment's (migration 0002), set here so the
        // trigger that would otherwise copy it has nothing to do.
        let inserted: Option<i64> = self
            .conn()
            .query_row(
                "INSERT INTO intentions(key, commitment_id, commitment_version, purpose, contact_id, recipient,
                     category, channel, template, language, parameters, body, fingerprint, correlation_id,
                     asks_confirmation, due_at, expires_at, day, state, state_changed_at, related_id, created_by,
                     authorized_by, reason, created_at, updated_at, starts_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
                     'planned', ?19, ?20, ?21, ?22, ?23, ?19, ?19,
                     (SELECT starts_at FROM commitments WHERE id = ?2))
                 ON CONFLICT(key) DO NOTHING RETURNING id",
                params![
                    n.key.as_str(),
                    commitment_id,
                    n.commitment_version,
                    n.purpose.slug(),
                    contact_id,
                    n.recipient,
                    n.category.as_str(),
                    n.channel,
                    n.template,
                    n.language,
                    params_json,
                    n.body,
                    fingerprint,
                    n.correlation_id,
                    n.asks_confirmation,
                    ms(n.due_at),
                    n.expires_at.map(ms),
                    n.day,
                    ms(at),
                    related_id,
                    n.created_by,
                    n.authorized_by,
                    n.reason,
                ],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(id) = inserted {
            self.append_history(
                id,
                None,
                IntentionState::Planned,
                true,
                &Entry {
                    signal: "reserved",
                    cause: if n.created_by == "planner" {
                        Cause::Planner
                    } else {
                        Cause::Operator
                    },
                    evidence: None,
                    note: n.reason.as_deref(),
                    commitment_version: Some(n.commitment_version),
                },
                at,
            )?;
            return Ok(Reserved::New(id));
        }
        let (id, stored): (i64, String) = self.conn().query_row(
            "SELECT id, fingerprint FROM intentions WHERE key = ?1",
            [n.key.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if stored != fingerprint {
            return Err(StoreError::Conflict {
                key: n.key.to_string(),
                stored,
                presented: fingerprint,
            });
        }
        self.bump_counter("duplicate_keys", 1)?;
        Ok(Reserved::Existing(id))
    }

    pub fn intention_id(&self, key: &str) -> Result<Option<i64>> {
        Ok(self
            .conn()
            .query_row("SELECT id FROM intentions WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    pub fn intention(&self, id: i64) -> Result<IntentionRow> {
        self.conn()
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
            .conn()
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
                // Leaving `dispatching` ends the lease.
                self.conn().execute(
                    "UPDATE intentions SET state = ?2, state_reason = ?3, state_changed_at = ?4, updated_at = ?4,
                         lease_owner = CASE WHEN ?2 = 'dispatching' THEN lease_owner ELSE NULL END,
                         lease_until = CASE WHEN ?2 = 'dispatching' THEN lease_until ELSE NULL END
                     WHERE id = ?1",
                    params![id, to.as_str(), reason, ms(at)],
                )?;
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
            .conn()
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
        self.conn().execute(
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

    /// Closes still-planned intentions of a commitment per a planner rule;
    /// `keep` lists keys the same plan reserves. Returns the closed ids.
    pub fn close_planned(
        &self,
        commitment_id: i64,
        rule: Closure,
        keep: &[&str],
        version: i64,
        at: DateTime<Utc>,
    ) -> Result<Vec<i64>> {
        let (cond, reason, older_than) = match rule {
            Closure::OlderThan { version, reason } => ("commitment_version < ?2", reason, version),
            Closure::AllPlanned { reason } => ("?2 = ?2", reason, 0),
            Closure::ConfirmReminders { reason } => ("asks_confirmation = 1 AND ?2 = ?2", reason, 0),
            Closure::Reminders { reason } => ("purpose LIKE 'recordatorio-%' AND ?2 = ?2", reason, 0),
        };
        // `?2 = ?2` keeps one parameter list for every rule.
        let sql = format!(
            "SELECT id, key FROM intentions WHERE commitment_id = ?1 AND state = 'planned' AND {cond} ORDER BY id"
        );
        let candidates: Vec<(i64, String)> = self
            .conn()
            .prepare_cached(&sql)?
            .query_map(params![commitment_id, older_than], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut closed = Vec::new();
        for (id, key) in candidates {
            if keep.contains(&key.as_str()) {
                continue;
            }
            let r = self.signal(
                id,
                Signal::Cancel(reason),
                &Entry {
                    signal: "cancel",
                    cause: Cause::Planner,
                    evidence: None,
                    note: None,
                    commitment_version: Some(version),
                },
                at,
            )?;
            if r.moved() {
                closed.push(id);
            }
        }
        Ok(closed)
    }
}
