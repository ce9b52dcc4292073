//! Recovery and reconciliation support, as facts: the leases that expired
//! (with their open attempts), the uncertain queue taken in holds so two
//! reconcilers do not work on the same intention at once, and what is due
//! next. What becomes of an expired lease, and every row the reconciler
//! writes, is decided in `unavez_core::domain::recovery` and stored through
//! [`crate::api::LedgerTx`].

use chrono::{DateTime, Duration, Utc};

use super::intents::IntentionRow;
use super::queries::{ATTEMPT_COLS, AttemptRow};
use super::{ContactRow, Result, StoreError, Tx, from_ms, ms};
use crate::domain::lifecycle::OperatingDay;
use crate::domain::recovery::{LeaseFacts, OrphanFacts, StatusPoll};
use crate::domain::state::IntentionState;
use crate::rows::{Cols, INTENTION_COLS, intention_row};
use crate::vals;

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
    /// Crash safety, the facts: `dispatching` intentions whose lease ended
    /// before `now`, with their owner and open attempts, by id. What
    /// becomes of them is decided in `unavez_core::domain::recovery`.
    pub fn expired_leases(&self, now: DateTime<Utc>) -> Result<Vec<LeaseFacts>> {
        let rows = self.db().rows(
            "SELECT i.id, i.lease_owner, i.state, a.id FROM intentions i
             LEFT JOIN attempts a ON a.intention_id = i.id AND a.ended_at IS NULL
             WHERE i.state = 'dispatching' AND i.lease_until < ?1 ORDER BY i.id, a.id",
            &vals![ms(now)],
            lease_row,
        )?;
        group_lease_facts(rows)
    }

    /// The same facts for the intentions of these attempts (a shutdown
    /// with attempts in flight), in the order of their first attempt given.
    pub fn lease_facts_of_attempts(&self, attempt_ids: &[i64]) -> Result<Vec<LeaseFacts>> {
        let mut rows = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for attempt in attempt_ids {
            let found = self.db().rows(
                "SELECT i.id, i.lease_owner, i.state, a.id FROM intentions i
                 LEFT JOIN attempts a ON a.intention_id = i.id AND a.ended_at IS NULL
                 WHERE i.id = (SELECT intention_id FROM attempts WHERE id = ?1) ORDER BY a.id",
                &vals![*attempt],
                lease_row,
            )?;
            match found.first() {
                None => return Err(StoreError::NoAttempt(*attempt)),
                Some(f) if seen.insert(f.0) => rows.extend(found),
                Some(_) => {}
            }
        }
        group_lease_facts(rows)
    }

    /// Attempts still open that started before `started_before` on
    /// intentions no dispatcher holds (any state but `dispatching`, whose
    /// open attempts are its lease's), at most `limit`, oldest first. On
    /// PostgreSQL the rows are locked, and one a late answer closed
    /// meanwhile is not returned. What they become is decided in
    /// `unavez_core::domain::recovery::close_orphans`.
    pub fn orphaned_attempts(&self, started_before: DateTime<Utc>, limit: u32) -> Result<Vec<OrphanFacts>> {
        let lock = if self.is_pg() {
            " FOR UPDATE OF a SKIP LOCKED"
        } else {
            ""
        };
        let rows = self.db().rows(
            &format!(
                "SELECT a.id, a.intention_id, i.state FROM attempts a JOIN intentions i ON i.id = a.intention_id
                 WHERE a.ended_at IS NULL AND a.started_at < ?1 AND i.state <> 'dispatching'
                 ORDER BY a.id LIMIT ?2{lock}"
            ),
            &vals![ms(started_before), limit],
            |r| Ok((r.int(0)?, r.int(1)?, r.text(2)?)),
        )?;
        rows.into_iter()
            .map(|(attempt_id, intention_id, state)| {
                Ok(OrphanFacts {
                    attempt_id,
                    intention_id,
                    state: parse_state(&state)?,
                })
            })
            .collect()
    }

    /// Acknowledged messages the status poll asks about now: in one of
    /// `poll`'s states with a known command, no news since
    /// `poll.quiet_since(now)`, due within its horizon and not asked about
    /// again before now (`next_attempt_at`, which only planned and
    /// uncertain intentions otherwise use), at most `limit`, the longest
    /// quiet first. On PostgreSQL the rows are locked, skipping those
    /// another reconciler is taking; the caller holds them
    /// ([`Tx::hold_status_polls`]) in the same transaction.
    pub fn status_polls_due(&self, poll: &StatusPoll, now: DateTime<Utc>, limit: u32) -> Result<Vec<IntentionRow>> {
        let lock = if self.is_pg() { " FOR UPDATE SKIP LOCKED" } else { "" };
        let states: Vec<String> = StatusPoll::STATES.iter().map(|s| format!("'{s}'")).collect();
        let ids: Vec<i64> = self.db().rows(
            &format!(
                "SELECT id FROM intentions WHERE state IN ({}) AND due_at >= ?1 AND state_changed_at <= ?2
                   AND provider_command_id IS NOT NULL AND (next_attempt_at IS NULL OR next_attempt_at <= ?3)
                 ORDER BY state_changed_at, id LIMIT ?4{lock}",
                states.join(", ")
            ),
            &vals![ms(now - StatusPoll::HORIZON), ms(poll.quiet_since(now)), ms(now), limit],
            |r| r.int(0),
        )?;
        ids.into_iter().map(|id| self.intention(id)).collect()
    }

    /// When each of these acknowledged messages is asked about next.
    pub fn hold_status_polls(&self, until: &[(i64, DateTime<Utc>)]) -> Result<()> {
        for (id, t) in until {
            self.db().exec(
                "UPDATE intentions SET next_attempt_at = ?2 WHERE id = ?1",
                &vals![*id, ms(*t)],
            )?;
        }
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
        // On PostgreSQL, reconcilers on several hosts take from one ledger:
        // each locks what it takes and skips what another is taking, and
        // the hold written below keeps it from the others once committed.
        // SQLite's `BEGIN IMMEDIATE` already makes this the only writer.
        let lock = if self.is_pg() { " FOR UPDATE SKIP LOCKED" } else { "" };
        let ids: Vec<i64> = match only {
            None => self.db().rows(
                &format!(
                    "SELECT id FROM intentions WHERE state = 'uncertain'
                       AND (next_attempt_at IS NULL OR next_attempt_at <= ?1) ORDER BY state_changed_at, id LIMIT ?2{lock}"
                ),
                &vals![ms(now), limit],
                |r| r.int(0),
            )?,
            Some(ids) => {
                let mut out = Vec::new();
                let sql = format!("SELECT id FROM intentions WHERE id = ?1 AND state = 'uncertain'{lock}");
                for id in ids {
                    if let Some(id) = self.db().row(&sql, &vals![*id], |r| r.int(0))? {
                        out.push(id);
                    }
                }
                out
            }
        };
        let mut items = Vec::with_capacity(ids.len());
        for id in ids {
            self.db().exec(
                "UPDATE intentions SET next_attempt_at = ?2 WHERE id = ?1",
                &vals![id, ms(now + hold)],
            )?;
            let intention = self.intention(id)?;
            let contact = self.contact_by_phone(&intention.recipient)?;
            let last_attempt = self.db().row(
                // A repeat the pre-send check stopped never reached the
                // channel: the attempt before it says what is known.
                &format!(
                    "SELECT {ATTEMPT_COLS} FROM attempts WHERE intention_id = ?1 AND outcome != 'not_sent'
                     ORDER BY n DESC LIMIT 1"
                ),
                &vals![id],
                super::queries::attempt_row,
            )?;
            let tries = self
                .db()
                .row(
                    "SELECT count(*) FROM intention_history WHERE intention_id = ?1 AND signal = 'reconcile'",
                    &vals![id],
                    |r| r.int(0),
                )?
                .unwrap_or(0);
            let tries = u32::try_from(tries).map_err(|e| StoreError::Corrupt {
                table: "intention_history",
                detail: e.to_string(),
            })?;
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
        self.db().exec(
            "UPDATE intentions SET next_attempt_at = ?2 WHERE id = ?1 AND state = 'uncertain'",
            &vals![id, ms(until)],
        )?;
        Ok(())
    }

    /// The soonest moment anything becomes due for the dispatcher or the
    /// reconciler (`None`: nothing scheduled). Lets `--until-idle` decide
    /// whether to wait or stop.
    pub fn next_due(&self) -> Result<Option<DateTime<Utc>>> {
        // Scalar max() is SQLite's only (GREATEST PostgreSQL's): a CASE both
        // read (`due_at` is never NULL). PostgreSQL wants the subquery named.
        let v = self.db().row(
            "SELECT min(t) FROM (
                 SELECT CASE WHEN due_at >= coalesce(next_attempt_at, 0) THEN due_at
                             ELSE coalesce(next_attempt_at, 0) END AS t
                 FROM intentions WHERE state = 'planned'
                 UNION ALL SELECT coalesce(next_attempt_at, 0) FROM intentions WHERE state = 'uncertain') AS due",
            &[],
            |r| r.opt_int(0),
        )?;
        Ok(v.flatten().map(from_ms))
    }

    /// Planned intentions due at `now` (pending queue size).
    pub fn count_due(&self, now: DateTime<Utc>) -> Result<i64> {
        Ok(self
            .db()
            .row(
                "SELECT count(*) FROM intentions WHERE state = 'planned' AND due_at <= ?1
                   AND (next_attempt_at IS NULL OR next_attempt_at <= ?1)",
                &vals![ms(now)],
                |r| r.int(0),
            )?
            .unwrap_or(0))
    }

    /// Intentions of one operating day in these states, for reprocessing.
    pub fn day_intentions(&self, day: OperatingDay, states: &[IntentionState]) -> Result<Vec<IntentionRow>> {
        let rows = self.db().rows(
            &format!(
                "SELECT {INTENTION_COLS} FROM intentions i JOIN commitments c ON c.id = i.commitment_id
                 WHERE i.day = ?1 ORDER BY i.due_at, i.id"
            ),
            &vals![day.to_string()],
            |r| intention_row(r),
        )?;
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

/// `(intention, lease owner, state, open attempt)`.
type LeaseRow = (i64, Option<String>, String, Option<i64>);

fn lease_row(r: &dyn Cols) -> std::result::Result<LeaseRow, String> {
    Ok((r.int(0)?, r.opt_text(1)?, r.text(2)?, r.opt_int(3)?))
}

/// One row per (intention, open attempt) → one [`LeaseFacts`] per intention,
/// in the order the rows came.
fn group_lease_facts(rows: Vec<LeaseRow>) -> Result<Vec<LeaseFacts>> {
    let mut out: Vec<LeaseFacts> = Vec::new();
    for (id, owner, state, attempt) in rows {
        if out.last().is_none_or(|f| f.intention_id != id) {
            let state = parse_state(&state)?;
            out.push(LeaseFacts {
                intention_id: id,
                state,
                owner,
                open_attempts: Vec::new(),
            });
        }
        if let (Some(a), Some(f)) = (attempt, out.last_mut()) {
            f.open_attempts.push(a);
        }
    }
    Ok(out)
}

fn parse_state(state: &str) -> Result<IntentionState> {
    state
        .parse()
        .map_err(|e: crate::domain::state::UnknownState| StoreError::Corrupt {
            table: "intentions",
            detail: e.to_string(),
        })
}
