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

use chrono::{DateTime, Utc};

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
