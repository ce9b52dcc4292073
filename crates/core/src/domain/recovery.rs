//! Recovery and reconciliation, decided: what becomes of an intention whose
//! worker lost its lease or stopped with an attempt open, and the rows the
//! reconciler writes (a try that settled nothing, evidence, a hand-over to
//! a person). The ledger reads the facts ([`LeaseFacts`]) and stores the
//! [`Recovery`] decided here; it chooses no signal, note or outcome.
//!
//! The rule behind all of it: an attempt that may have reached the channel
//! is never "not sent". Its outcome is *unknown*, so the intention becomes
//! `uncertain` and the reconciler looks for evidence; it never goes back to
//! `planned` (a blind resend).

use chrono::{DateTime, Duration, Utc};

use super::attempt::AttemptOutcome;
use super::finish::AttemptWrite;
use super::history::{self, Cause, HistorySignal, Record, Said};
use super::state::{IntentionState, ReviewReason, Signal};

/// What the ledger holds about one intention being recovered: its state,
/// the lease it had and its attempts still open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseFacts {
    pub intention_id: i64,
    pub state: IntentionState,
    /// Who held the lease (`None`: the row names nobody).
    pub owner: Option<String>,
    /// Attempts with no end yet, oldest first.
    pub open_attempts: Vec<i64>,
}

/// The rows a recovery writes: the open attempts closed as `uncertain`,
/// and the history rows (with the state change to `uncertain`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    pub attempts: Vec<AttemptWrite>,
    pub records: Vec<Record>,
}

impl Recovery {
    /// The intentions these records move (the ones that became uncertain).
    pub fn moved(&self) -> Vec<i64> {
        self.records
            .iter()
            .filter(|r| r.applied)
            .map(|r| r.intention_id)
            .collect()
    }
}

/// Leases that ended with their attempt unfinished: the request may have
/// gone out, so each open attempt ends `uncertain` and the intention
/// becomes `uncertain` with a `lease_expired` row by the reconciler.
pub fn expire_leases(expired: &[LeaseFacts], now: DateTime<Utc>) -> Recovery {
    let mut out = Recovery::default();
    for f in expired {
        let note = format!(
            "lease of {} expired with the attempt unfinished: outcome unknown",
            f.owner.as_deref().unwrap_or("?")
        );
        out.push(f, &note, HistorySignal::LeaseExpired, Cause::Reconciler, now);
    }
    out
}

/// A shutdown with attempts still in flight: each may have been processed,
/// so it ends `uncertain` and its intention becomes `uncertain`, said by
/// the dispatcher with `why`.
pub fn abandon(facts: &[LeaseFacts], why: &str, now: DateTime<Utc>) -> Recovery {
    let mut out = Recovery::default();
    for f in facts {
        out.push(f, why, HistorySignal::UnknownOutcome, Cause::Dispatcher, now);
    }
    out
}

impl Recovery {
    fn push(&mut self, f: &LeaseFacts, note: &str, signal: HistorySignal, cause: Cause, now: DateTime<Utc>) {
        self.attempts
            .extend(f.open_attempts.iter().map(|&attempt_id| AttemptWrite::End {
                attempt_id,
                outcome: AttemptOutcome::Uncertain,
                http_status: None,
                command_id: None,
                message_id: None,
                error_code: None,
                error_detail: Some(note.to_string()),
                at: now,
            }));
        let said = Said::new(signal, cause).note(note);
        if let (_, Some(r)) = history::on_signal(f.intention_id, f.state, Signal::Unknown, said, now) {
            self.records.push(r);
        }
    }
}

/// An attempt left open on an intention no dispatcher holds any more: its
/// answer was never recorded (the ledger was down when it came back),
/// while other evidence (a status webhook) moved the intention on, so no
/// lease expiry will ever close it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrphanFacts {
    pub attempt_id: i64,
    pub intention_id: i64,
    /// The intention's state now (never `dispatching`: that is a lease's).
    pub state: IntentionState,
}

/// Closes orphaned attempts with what is known. An intention the channel
/// acknowledged since (accepted, sent, delivered, read) says this request
/// reached it: the attempt ends `accepted`, noting that the evidence is
/// the intention's, not the attempt's own answer. Anything else proves
/// nothing about this request, so it ends `uncertain`. Writes no history:
/// the intention's state already says what is known, and an extra
/// reconciliation row would count as a try of an uncertain one.
pub fn close_orphans(orphans: &[OrphanFacts], now: DateTime<Utc>) -> Vec<AttemptWrite> {
    orphans
        .iter()
        .map(|o| {
            let (outcome, detail) = if o.state.has_channel_evidence() {
                (
                    AttemptOutcome::Accepted,
                    format!(
                        "closed by recovery: its answer was never recorded; the intention is {} by later channel evidence",
                        o.state
                    ),
                )
            } else {
                (
                    AttemptOutcome::Uncertain,
                    format!(
                        "closed by recovery: its answer was never recorded and the intention ({}) proves nothing about it: outcome unknown",
                        o.state
                    ),
                )
            };
            AttemptWrite::End {
                attempt_id: o.attempt_id,
                outcome,
                http_status: None,
                command_id: None,
                message_id: None,
                error_code: None,
                error_detail: Some(detail),
                at: now,
            }
        })
        .collect()
}

/// When an acknowledged message with no news is asked about again: the
/// status poll of channels that can be asked (the engine's
/// `GET /v1/commands/{id}`), and for those that cannot, the moment it
/// becomes a front-desk case ("sin confirmación de entrega",
/// `attention::Clause::Unconfirmed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusPoll {
    /// No new evidence for this long (`[policy] status_poll_minutes`).
    pub window: Duration,
}

impl StatusPoll {
    /// States whose message the channel took and may still report on.
    /// `read` is the last news there is.
    pub const STATES: [IntentionState; 3] = [
        IntentionState::Accepted,
        IntentionState::Sent,
        IntentionState::Delivered,
    ];

    /// Messages due longer ago than this are no longer asked about: a
    /// delivered message whose reader turned read receipts off stays
    /// delivered, and two days of asking is enough to learn the rest.
    pub const HORIZON: Duration = Duration::days(2);

    /// Polls are never closer together than this, whatever the window (a
    /// window of 0 asks at the next pass).
    pub const MIN_SPACING: Duration = Duration::seconds(2);

    /// Whether a message in `state` since `changed_at`, due at `due_at`,
    /// is asked about now.
    pub fn wants(
        &self,
        state: IntentionState,
        changed_at: DateTime<Utc>,
        due_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> bool {
        Self::STATES.contains(&state) && changed_at <= now - self.window && due_at >= now - Self::HORIZON
    }

    /// When to ask again if this answer brought nothing new: after as
    /// long again as the message has already gone without news (so a
    /// message is asked about a few times over the horizon, not every
    /// window), and at least one window later.
    pub fn next(&self, changed_at: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        let quiet = (now - changed_at).max(Duration::zero());
        now + quiet.max(self.window).max(Self::MIN_SPACING)
    }

    /// How often a service looks for messages due for a poll: a quarter of
    /// the window, between a second and a minute. The look reads a range
    /// of two days' messages, and on SQLite inside the write lock, so a
    /// window of an hour need not look every second.
    pub fn pass_every(&self) -> Duration {
        (self.window / 4).clamp(Duration::seconds(1), Duration::minutes(1))
    }

    /// The earliest state change a message can have and still be due for
    /// a poll (or a front-desk case) at `now`.
    pub fn quiet_since(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - self.window
    }
}

/// A reconciliation try that settled nothing: a `reconcile` row, no state
/// change (`tries` counts these rows).
pub fn reconcile_note(
    id: i64,
    state: IntentionState,
    note: &str,
    evidence: Option<&str>,
    now: DateTime<Utc>,
) -> Record {
    let mut said = Said::new(HistorySignal::Reconcile, Cause::Reconciler).note(note);
    said.evidence = evidence.map(str::to_string);
    history::note(id, state, said, now)
}

/// Evidence the reconciler found (a lookup's or a repeat's answer): the
/// state machine's own row, resting on the command or message id. `None`
/// when the machine refuses it (nothing is written).
pub fn reconcile_evidence(
    id: i64,
    state: IntentionState,
    signal: Signal,
    evidence: Option<&str>,
    note: &str,
    now: DateTime<Utc>,
) -> Option<Record> {
    let mut said = Said::new(HistorySignal::of(signal), Cause::Reconciler).note(note);
    said.evidence = evidence.map(str::to_string);
    history::on_signal(id, state, signal, said, now).1
}

/// What a status poll's answer writes: the state machine's row only when
/// it moves the intention. An answer that says what the ledger already
/// knows is no news, and the poll asks again later; a row for each would
/// fill the history of every quiet message.
pub fn poll_evidence(
    id: i64,
    state: IntentionState,
    signal: Signal,
    evidence: Option<&str>,
    note: &str,
    now: DateTime<Utc>,
) -> Option<Record> {
    reconcile_evidence(id, state, signal, evidence, note, now).filter(|r| r.applied)
}

/// Why the reconciler hands an intention to a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToReview {
    /// No evidence in time, or too many tries: the note explains.
    NoEvidence,
    /// A repeat that validity refused with nothing to withdraw: the first
    /// request may or may not have gone out. Carries the typed reason the
    /// console shows and the commitment version the verdict read.
    RefusedRepeat { reason: ReviewReason, version: i64 },
}

/// The `needs_review` row the reconciler writes, if the machine takes it.
/// A refused repeat keeps the verdict's explanation in the note and its
/// typed reason as the state reason.
pub fn reconcile_review(
    id: i64,
    state: IntentionState,
    why: ToReview,
    note: &str,
    now: DateTime<Utc>,
) -> Option<Record> {
    let said = Said::new(HistorySignal::NeedsReview, Cause::Reconciler).note(note);
    let said = match why {
        ToReview::NoEvidence => said,
        ToReview::RefusedRepeat { version, .. } => said.evidence("validity_before_repeat").version(version),
    };
    let mut r = history::on_signal(id, state, Signal::NeedsReview, said, now).1?;
    if let (true, ToReview::RefusedRepeat { reason, .. }) = (r.applied, why) {
        r.reason = Some(reason.as_str().to_string());
    }
    Some(r)
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
