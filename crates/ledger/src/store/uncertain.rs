//! Recovery and reconciliation support: expired leases become `uncertain`,
//! the uncertain queue is taken in holds so two reconcilers do not work on
//! the same intention at once, and reconciliation evidence goes through
//! [`Tx::signal`] like everything else.

use chrono::{DateTime, Duration, Utc};
use rusqlite::{OptionalExtension, params};

use super::intents::{INTENTION_COLS, IntentionRow, intention_row};
use super::queries::{ATTEMPT_COLS, AttemptRow, attempt_row};
use super::{Cause, ContactRow, Entry, Result, Tx, from_ms, ms};
use crate::domain::history::HistorySignal;
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::{IntentionState, ReviewReason, Signal};

/// An uncertain intention taken for one reconciliation pass.
#[derive(Debug, Clone)]
pub struct UncertainItem {
    pub intention: IntentionRow,
    pub contact: Option<ContactRow>,
    pub last_attempt: Option<AttemptRow>,
    /// When it became uncertain.
    pub since: DateTime<Utc>,
    /// Reconciliation tries already recorded.
    pub tries: u32,
}

impl Tx<'_> {
    /// Crash safety: `dispatching` intentions whose lease ended. With an
    /// unfinished attempt they become `uncertain` (the request may have gone
    /// out), never `planned`. Returns the ids moved.
    pub fn expire_leases(&self, now: DateTime<Utc>) -> Result<Vec<i64>> {
        let expired: Vec<(i64, Option<String>)> = self
            .conn()
            .prepare_cached(
                "SELECT id, lease_owner FROM intentions WHERE state = 'dispatching' AND lease_until < ?1 ORDER BY id",
            )?
            .query_map([ms(now)], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut moved = Vec::new();
        for (id, owner) in expired {
            let note = format!(
                "lease of {} expired with the attempt unfinished: outcome unknown",
                owner.as_deref().unwrap_or("?")
            );
            self.mark_open_attempts_uncertain(id, &note, now)?;
            let r = self.signal(
                id,
                Signal::Unknown,
                &Entry {
                    signal: HistorySignal::LeaseExpired.as_str(),
                    cause: Cause::Reconciler,
                    evidence: None,
                    note: Some(&note),
                    commitment_version: None,
                },
                now,
            )?;
            if r.moved() {
                moved.push(id);
            }
        }
        Ok(moved)
    }

    /// Shutdown with an attempt still in flight: the request may have been
    /// processed, so the intention becomes `uncertain`.
    pub fn abandon_attempt(&self, attempt_id: i64, why: &str, now: DateTime<Utc>) -> Result<bool> {
        let id: i64 = self
            .conn()
            .query_row("SELECT intention_id FROM attempts WHERE id = ?1", [attempt_id], |r| {
                r.get(0)
            })?;
        self.mark_open_attempts_uncertain(id, why, now)?;
        let r = self.signal(
            id,
            Signal::Unknown,
            &Entry {
                signal: HistorySignal::UnknownOutcome.as_str(),
                cause: Cause::Dispatcher,
                evidence: None,
                note: Some(why),
                commitment_version: None,
            },
            now,
        )?;
        Ok(r.moved())
    }

    fn mark_open_attempts_uncertain(&self, id: i64, why: &str, now: DateTime<Utc>) -> Result<()> {
        self.conn().execute(
            "UPDATE attempts SET ended_at = ?2, outcome = 'uncertain', error_detail = ?3
             WHERE intention_id = ?1 AND ended_at IS NULL",
            params![id, ms(now), why],
        )?;
        Ok(())
    }

    /// Takes up to `limit` uncertain intentions due for reconciliation and
    /// holds them until `now + hold` (so a second reconciler skips them).
    pub fn take_uncertain(&self, now: DateTime<Utc>, hold: Duration, limit: u32) -> Result<Vec<UncertainItem>> {
        self.take_uncertain_where(None, now, hold, limit)
    }

    /// As [`Tx::take_uncertain`], only for these ids (reprocessing), due or not.
    pub fn take_uncertain_ids(&self, ids: &[i64], now: DateTime<Utc>, hold: Duration) -> Result<Vec<UncertainItem>> {
        self.take_uncertain_where(Some(ids), now, hold, u32::MAX)
    }

    fn take_uncertain_where(
        &self,
        only: Option<&[i64]>,
        now: DateTime<Utc>,
        hold: Duration,
        limit: u32,
    ) -> Result<Vec<UncertainItem>> {
        let ids: Vec<i64> = match only {
            None => self
                .conn()
                .prepare_cached(
                    "SELECT id FROM intentions WHERE state = 'uncertain'
                       AND (next_attempt_at IS NULL OR next_attempt_at <= ?1) ORDER BY state_changed_at, id LIMIT ?2",
                )?
                .query_map(params![ms(now), limit], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?,
            Some(ids) => {
                let mut stmt = self
                    .conn()
                    .prepare_cached("SELECT id FROM intentions WHERE id = ?1 AND state = 'uncertain'")?;
                let mut out = Vec::new();
                for id in ids {
                    if let Some(id) = stmt.query_row([id], |r| r.get(0)).optional()? {
                        out.push(id);
                    }
                }
                out
            }
        };
        let mut items = Vec::with_capacity(ids.len());
        for id in ids {
            self.conn().execute(
                "UPDATE intentions SET next_attempt_at = ?2 WHERE id = ?1",
                params![id, ms(now + hold)],
            )?;
            let intention = self.intention(id)?;
            let contact = self.contact_by_phone(&intention.recipient)?;
            let last_attempt = self
                .conn()
                .query_row(
                    // A repeat the pre-send check stopped never reached the
                    // channel: the attempt before it says what is known.
                    &format!(
                        "SELECT {ATTEMPT_COLS} FROM attempts WHERE intention_id = ?1 AND outcome != 'not_sent'
                         ORDER BY n DESC LIMIT 1"
                    ),
                    [id],
                    attempt_row,
                )
                .optional()?;
            let tries: u32 = self.conn().query_row(
                "SELECT count(*) FROM intention_history WHERE intention_id = ?1 AND signal = 'reconcile'",
                [id],
                |r| r.get(0),
            )?;
            items.push(UncertainItem {
                since: intention.state_changed_at,
                intention,
                contact,
                last_attempt,
                tries,
            });
        }
        Ok(items)
    }

    /// Schedules the next reconciliation try of an uncertain intention.
    pub fn hold_uncertain(&self, id: i64, until: DateTime<Utc>) -> Result<()> {
        self.conn().execute(
            "UPDATE intentions SET next_attempt_at = ?2 WHERE id = ?1 AND state = 'uncertain'",
            params![id, ms(until)],
        )?;
        Ok(())
    }

    /// Records one reconciliation try that did not settle the intention.
    pub fn note_reconcile(&self, id: i64, note: &str, evidence: Option<&str>, now: DateTime<Utc>) -> Result<()> {
        self.note(
            id,
            &Entry {
                signal: HistorySignal::Reconcile.as_str(),
                cause: Cause::Reconciler,
                evidence,
                note: Some(note),
                commitment_version: None,
            },
            now,
        )
    }

    /// Applies reconciliation evidence (a lookup answer) to an intention.
    pub fn reconcile_evidence(
        &self,
        id: i64,
        signal: Signal,
        command_id: Option<&str>,
        message_id: Option<&str>,
        note: &str,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        if command_id.is_some() || message_id.is_some() {
            self.conn().execute(
                "UPDATE intentions SET provider_command_id = coalesce(?2, provider_command_id),
                     provider_message_id = coalesce(?3, provider_message_id) WHERE id = ?1",
                params![id, command_id, message_id],
            )?;
        }
        let r = self.signal(
            id,
            signal,
            &Entry {
                signal: HistorySignal::of(signal).as_str(),
                cause: Cause::Reconciler,
                evidence: command_id.or(message_id),
                note: Some(note),
                commitment_version: None,
            },
            now,
        )?;
        if command_id.is_some() || message_id.is_some() {
            self.apply_pending_statuses_for(id, now)?;
        }
        Ok(r.moved())
    }

    /// Sends an intention to `review` with the reconciler's explanation.
    pub fn reconcile_to_review(&self, id: i64, note: &str, now: DateTime<Utc>) -> Result<bool> {
        self.reconciler_review(id, None, note, None, now)
    }

    /// The reconciler hands an intention to a person; whether it moved.
    fn reconciler_review(
        &self,
        id: i64,
        evidence: Option<&str>,
        note: &str,
        commitment_version: Option<i64>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let entry = Entry {
            signal: HistorySignal::NeedsReview.as_str(),
            cause: Cause::Reconciler,
            evidence,
            note: Some(note),
            commitment_version,
        };
        Ok(self.signal(id, Signal::NeedsReview, &entry, now)?.moved())
    }

    /// A repeat that validity refused, with nothing to withdraw: a person
    /// must confirm with the customer, because the first request may or may
    /// not have gone out. `state_reason` is the typed reason the console
    /// shows in the operator's language; the history note keeps the
    /// verdict's own explanation and the version it read.
    pub fn review_refused_repeat(
        &self,
        id: i64,
        reason: ReviewReason,
        note: &str,
        version: i64,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let moved = self.reconciler_review(id, Some("validity_before_repeat"), note, Some(version), now)?;
        if moved {
            self.conn().execute(
                "UPDATE intentions SET state_reason = ?2 WHERE id = ?1",
                params![id, reason.as_str()],
            )?;
        }
        Ok(moved)
    }

    /// The soonest moment anything becomes due for the dispatcher or the
    /// reconciler (`None`: nothing scheduled). Lets `--until-idle` decide
    /// whether to wait or stop.
    pub fn next_due(&self) -> Result<Option<DateTime<Utc>>> {
        let v: Option<i64> = self.conn().query_row(
            "SELECT min(t) FROM (
                 SELECT max(due_at, coalesce(next_attempt_at, 0)) AS t FROM intentions WHERE state = 'planned'
                 UNION ALL SELECT coalesce(next_attempt_at, 0) FROM intentions WHERE state = 'uncertain')",
            [],
            |r| r.get(0),
        )?;
        Ok(v.map(from_ms))
    }

    /// Planned intentions due at `now` (pending queue size).
    pub fn count_due(&self, now: DateTime<Utc>) -> Result<i64> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM intentions WHERE state = 'planned' AND due_at <= ?1
               AND (next_attempt_at IS NULL OR next_attempt_at <= ?1)",
            [ms(now)],
            |r| r.get(0),
        )?)
    }

    /// Intentions of one operating day in these states, for reprocessing.
    pub fn day_intentions(&self, day: OperatingDay, states: &[IntentionState]) -> Result<Vec<IntentionRow>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {INTENTION_COLS} FROM intentions i JOIN commitments c ON c.id = i.commitment_id
             WHERE i.day = ?1 ORDER BY i.due_at, i.id"
        ))?;
        let rows: Vec<IntentionRow> = stmt
            .query_map([day.to_string()], intention_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows
            .into_iter()
            .filter(|r| states.is_empty() || states.contains(&r.state))
            .collect())
    }

    /// Whether any attempt of this intention was acknowledged by a channel.
    pub fn acknowledged(&self, id: i64) -> Result<bool> {
        self.has_acknowledged_attempt(id)
    }
}
