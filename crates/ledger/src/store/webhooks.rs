//! Channel events (status webhooks of the Cloud API and the engine), as
//! rows: stored raw in received order, deduplicated by `UNIQUE(source,
//! event_id)`, marked applied, pending or ignored; the lookups that
//! correlate them with an intention; the history row core decides for a
//! report. The order of the steps (record → correlate → apply, or wait)
//! is the application's (`unavez_app::status`).
//!
//! Everything runs inside the caller's transaction: the insert that
//! deduplicates and the state change it causes commit together, so two
//! identical deliveries arriving at the same instant apply once.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::intents::Entry;
use super::{Cause, Result, StoreError, Tx, ms};
use crate::domain::channel_event::EventStatus;
use crate::domain::counter::{Counter, Parking, Rejection, Source};
use crate::domain::history::HistorySignal;
use crate::domain::state::{IntentionState, Transition};
use crate::domain::status::Report;
use crate::domain::webhook;
use crate::rows::Cols;
use crate::vals;

/// `channel_events.source` of WhatsApp Cloud API notifications.
pub const SOURCE_CLOUD: &str = "cloud";
/// `channel_events.source` of the engine's webhooks.
pub const SOURCE_MOTOR: &str = "motor";

/// One stored event's `(kind, status, reason, copies)`.
pub type StoredEventRow = (String, String, Option<String>, i64);

/// A stored channel event: `(source, event_id, kind, status, intention_id)`.
pub type ChannelEventRow = (String, String, String, String, Option<i64>);

/// A channel event to record, exactly as received.
#[derive(Debug, Clone, Copy)]
pub struct NewChannelEvent<'a> {
    /// [`SOURCE_CLOUD`] or [`SOURCE_MOTOR`].
    pub source: &'a str,
    /// The deduplication id (Cloud statuses: `wamid:status:timestamp`).
    pub event_id: &'a str,
    /// `status`, `inbound` or `motor_event`.
    pub kind: &'a str,
    /// Provider message id (wamid) the event is about, if any.
    pub message_id: Option<&'a str>,
    /// Intention key it carries (`biz_opaque_callback_data`, engine key).
    pub intention_key: Option<&'a str>,
    /// The raw JSON object.
    pub payload: &'a str,
}

/// Result of [`Tx::record_channel_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    New(i64),
    /// Seen before: `row` is the original, `intention_id` what it was
    /// applied to (if it was).
    Duplicate {
        row: i64,
        intention_id: Option<i64>,
    },
}

/// What happened to one status event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum StatusOutcome {
    /// Correlated and fed to the state machine (`moved` says whether the
    /// state changed or the signal was history only).
    Applied {
        intention_id: i64,
        moved: bool,
        state: String,
    },
    /// No intention known for it yet: kept, applied once correlated.
    Pending,
    /// Same event id as an earlier one: counted on the stored event
    /// (`copies`), not applied again.
    Duplicate { intention_id: Option<i64> },
    /// Its key and its message id name two different intentions, or its
    /// state is not one the engine contract names: applied to nothing,
    /// kept for a person with a reason code.
    Parked { reason: String },
    /// Not for this installation (another engine instance): kept, applied
    /// to nothing.
    Refused { reason: String },
}

/// Reason code of an engine event whose key and message id disagree.
pub const PARKED_KEY_MESSAGE_MISMATCH: &str = Parking::KeyMessageMismatch.as_str();
/// Reason code of an engine event whose `estado` is not in the contract.
pub const PARKED_UNKNOWN_STATE: &str = Parking::UnknownState.as_str();
/// Reason code of an engine event from another engine instance.
pub const REFUSED_FOREIGN_INSTANCE: &str = Rejection::ForeignInstance.as_str();

impl Tx<'_> {
    /// Stores one event raw, unless its `(source, event_id)` is already
    /// stored; a duplicate adds one to the stored event's `copies` and bumps
    /// `duplicate_events` and `duplicate_events_<source>`.
    pub fn record_channel_event(&self, ev: &NewChannelEvent<'_>, at: DateTime<Utc>) -> Result<Recorded> {
        let id = self.db().row(
            "INSERT INTO channel_events(source, event_id, kind, message_id, intention_key, status, payload, received_at)
             VALUES (?1, ?2, ?3, ?4, ?5, 'received', ?6, ?7)
             ON CONFLICT(source, event_id) DO NOTHING RETURNING id",
            &vals![ev.source, ev.event_id, ev.kind, ev.message_id, ev.intention_key, ev.payload, ms(at)],
            |r| r.int(0),
        )?;
        if let Some(id) = id {
            return Ok(Recorded::New(id));
        }
        self.bump_counter(Counter::DuplicateEvents, 1)?;
        if let Some(source) = Source::parse(ev.source) {
            self.bump_counter(Counter::DuplicateEventsFrom(source), 1)?;
        }
        let (row, intention_id) = self
            .db()
            .row(
                "UPDATE channel_events SET copies = copies + 1 WHERE source = ?1 AND event_id = ?2
                 RETURNING id, intention_id",
                &vals![ev.source, ev.event_id],
                |r| Ok((r.int(0)?, r.opt_int(1)?)),
            )?
            .ok_or_else(|| StoreError::Corrupt {
                table: "channel_events",
                detail: format!("{}:{} conflicted on insert but is not stored", ev.source, ev.event_id),
            })?;
        Ok(Recorded::Duplicate { row, intention_id })
    }

    /// Sets an event's processing status (`applied`, `pending`, `ignored`)
    /// and the intention it was applied to.
    pub fn mark_channel_event(
        &self,
        row: i64,
        status: EventStatus,
        intention_id: Option<i64>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.db().exec(
            "UPDATE channel_events SET status = ?2, intention_id = coalesce(CAST(?3 AS BIGINT), intention_id),
                 applied_at = CASE WHEN ?2 = 'applied' THEN CAST(?4 AS BIGINT) ELSE applied_at END
             WHERE id = ?1",
            &vals![row, status.as_str(), intention_id, ms(at)],
        )?;
        Ok(())
    }

    /// Records the provider's references on an intention the first time
    /// they are learnt; never overwrites one already known.
    pub fn set_provider_refs(
        &self,
        id: i64,
        command_id: Option<&str>,
        message_id: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.db().exec(
            "UPDATE intentions SET provider_command_id = coalesce(provider_command_id, CAST(?2 AS TEXT)),
                 provider_message_id = coalesce(provider_message_id, CAST(?3 AS TEXT)), updated_at = ?4
             WHERE id = ?1 AND ((CAST(?2 AS TEXT) IS NOT NULL AND provider_command_id IS NULL)
                             OR (CAST(?3 AS TEXT) IS NOT NULL AND provider_message_id IS NULL))",
            &vals![id, command_id, message_id, ms(at)],
        )?;
        Ok(())
    }

    /// The intention whose provider message id is `mid` (the lowest id).
    pub fn intention_of_provider_message(&self, mid: &str) -> Result<Option<i64>> {
        Ok(self.db().row(
            "SELECT id FROM intentions WHERE provider_message_id = ?1 ORDER BY id LIMIT 1",
            &vals![mid],
            |r| r.int(0),
        )?)
    }

    /// The intention of the first attempt that learnt message id `mid`.
    pub fn intention_of_attempt_message(&self, mid: &str) -> Result<Option<i64>> {
        Ok(self.db().row(
            "SELECT intention_id FROM attempts WHERE message_id = ?1 ORDER BY id LIMIT 1",
            &vals![mid],
            |r| r.int(0),
        )?)
    }

    /// The provider message id an intention knows, if any.
    pub fn provider_message_id(&self, id: i64) -> Result<Option<String>> {
        self.db()
            .row(
                "SELECT provider_message_id FROM intentions WHERE id = ?1",
                &vals![id],
                |r| r.opt_text(0),
            )?
            .ok_or_else(|| StoreError::NoIntention(format!("#{id}")))
    }

    /// Stores the history row core decides for one report
    /// ([`webhook::report_row`]): through the state machine, or recorded
    /// only. Returns whether the intention moved and its state after.
    pub fn apply_report(&self, id: i64, report: &Report, at: DateTime<Utc>) -> Result<(bool, IntentionState)> {
        let row = self.intention(id)?;
        let plan = webhook::report_row(row.state, row.commitment_version, report);
        let entry = Entry {
            signal: &plan.word,
            cause: Cause::Webhook,
            evidence: Some(&plan.evidence),
            note: plan.note.as_deref(),
            commitment_version: plan.commitment_version,
        };
        let Some(signal) = plan.signal else {
            self.note(id, &entry, at)?;
            return Ok((false, row.state));
        };
        let r = self.signal(id, signal, &entry, at)?;
        Ok(match r.transition {
            Transition::Move(to) => (true, to),
            Transition::Record(_) | Transition::Refuse => (false, r.from),
        })
    }

    /// A history note caused by a webhook (`signal` is one of the note
    /// signals: a second message id, a parked event).
    pub fn webhook_note(
        &self,
        id: i64,
        signal: HistorySignal,
        evidence: &str,
        note: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let entry = Entry {
            signal: signal.as_str(),
            cause: Cause::Webhook,
            evidence: Some(evidence),
            note,
            commitment_version: None,
        };
        self.note(id, &entry, at)
    }

    /// The pending status events that belong to this intention (by its
    /// key, its provider message id or an attempt's message id), in
    /// received order.
    pub fn pending_statuses_for(&self, intention_id: i64) -> Result<Vec<PendingStatus>> {
        Ok(self.db().rows(
            "SELECT e.id, e.source, e.message_id, e.intention_key, e.payload FROM channel_events e
             WHERE e.status = 'pending' AND (
                 e.intention_key = (SELECT key FROM intentions WHERE id = ?1)
              OR e.message_id IN (SELECT provider_message_id FROM intentions WHERE id = ?1
                                  UNION SELECT message_id FROM attempts WHERE intention_id = ?1))
             ORDER BY e.id",
            &vals![intention_id],
            pending_row,
        )?)
    }

    /// Pending status events received since `since`, newest first, at
    /// most `limit`.
    pub fn recent_pending_statuses(&self, limit: u32, since: DateTime<Utc>) -> Result<Vec<PendingStatus>> {
        Ok(self.db().rows(
            "SELECT id, source, message_id, intention_key, payload FROM channel_events
             WHERE status = 'pending' AND received_at >= ?2 ORDER BY id DESC LIMIT ?1",
            &vals![limit, ms(since)],
            pending_row,
        )?)
    }

    /// How many status events wait for correlation.
    pub fn pending_status_count(&self) -> Result<i64> {
        Ok(self
            .db()
            .row(
                "SELECT count(*) FROM channel_events WHERE status = 'pending'",
                &[],
                |r| r.int(0),
            )?
            .unwrap_or(0))
    }

    /// One stored event: `(kind, status, reason, copies)`.
    pub fn channel_event(&self, source: &str, event_id: &str) -> Result<Option<StoredEventRow>> {
        Ok(self.db().row(
            "SELECT kind, status, reason, copies FROM channel_events WHERE source = ?1 AND event_id = ?2",
            &vals![source, event_id],
            |r| Ok((r.text(0)?, r.text(1)?, r.opt_text(2)?, r.int(3)?)),
        )?)
    }

    /// Copies received beyond the first, over every stored event of `source`.
    pub fn extra_copies(&self, source: &str) -> Result<i64> {
        // PostgreSQL's sum of BIGINT is NUMERIC: cast back to the integer both read.
        Ok(self
            .db()
            .row(
                "SELECT CAST(coalesce(sum(copies - 1), 0) AS BIGINT) FROM channel_events WHERE source = ?1",
                &vals![source],
                |r| r.int(0),
            )?
            .unwrap_or(0))
    }

    /// Channel events in received order, for tests and the console.
    pub fn channel_events(&self, limit: u32) -> Result<Vec<ChannelEventRow>> {
        Ok(self.db().rows(
            "SELECT source, event_id, kind, status, intention_id FROM channel_events ORDER BY id LIMIT ?1",
            &vals![limit],
            |r| Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.text(3)?, r.opt_int(4)?)),
        )?)
    }
}

/// A stored status event that waits for its intention.
#[derive(Debug, Clone)]
pub struct PendingStatus {
    pub id: i64,
    pub source: String,
    pub message_id: Option<String>,
    pub intention_key: Option<String>,
    /// The body as received (validated then).
    pub payload: String,
}

fn pending_row(r: &dyn Cols) -> std::result::Result<PendingStatus, String> {
    Ok(PendingStatus {
        id: r.int(0)?,
        source: r.text(1)?,
        message_id: r.opt_text(2)?,
        intention_key: r.opt_text(3)?,
        payload: r.text(4)?,
    })
}
