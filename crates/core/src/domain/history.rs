//! History: the vocabulary of `intention_history` (who caused a row, which
//! signal it records) and the one pure rule that turns a signal into the
//! row to append and the state change it makes. The ledger stores these
//! rows as they come; it decides nothing about them.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::operator::OpKind;
use super::state::{IntentionState, Signal, Transition, transition};

/// Who caused a signal, as recorded in history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    pub const ALL: [Cause; 6] = [
        Cause::Planner,
        Cause::Dispatcher,
        Cause::Webhook,
        Cause::Reconciler,
        Cause::Operator,
        Cause::Import,
    ];

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

    pub fn parse(s: &str) -> Option<Cause> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a history row records (`intention_history.signal`): a state
/// machine signal, or a fact kept without one (a deferral, a note from the
/// reconciler, a version sequence observed in flight…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HistorySignal {
    /// The intention was reserved (the first row of every history).
    Reserved,
    // --- the state machine's own signals (`Signal::name`) ---
    Claim,
    Release,
    UnknownOutcome,
    NeedsReview,
    Cancel,
    Accepted,
    Sent,
    Delivered,
    Read,
    Failed,
    // --- attempt results and dispatcher facts ---
    /// The channel calls the command ambiguous.
    Ambiguous,
    /// The channel reports a key conflict.
    Conflict,
    /// A retry answer for an intention no longer ours to re-plan.
    Retry,
    /// Validity said "not now" (quiet hours, daily cap).
    Deferred,
    /// The pre-send check stopped the request: it never left.
    NotSent,
    /// As [`HistorySignal::NotSent`], for an intention that had moved on.
    NotSentLate,
    LeaseExpired,
    /// A reconciliation try that settled nothing.
    Reconcile,
    /// A reconciliation repeat that validity refused.
    RepeatRefused,
    /// A message validated against a version it does not speak of (a bug).
    SentAfterChange,
    /// The commitment changed while a request for an older version was in
    /// flight.
    VersionChangedInFlight,
    /// An operator acknowledged the delivery of a resend.
    AcknowledgedDelivery,
    /// A technician returned a failed intention whose attempts never
    /// reached the channel to `planned` (`state::replan_failed`).
    Replan,
    // --- channel webhooks ---
    SecondMessageId,
    DuplicateWebhook,
    /// A status webhook, stored as `webhook:<status>`.
    Webhook,
    /// WhatsApp rejected, paused or disabled the template: held in review.
    TemplateBlocked,
    /// An engine event naming this and another intention: applied to
    /// neither, parked for a technician.
    EventParked,
    /// An operator action other than a cancel (which writes
    /// [`HistorySignal::Cancel`]): the row carries the action's own word,
    /// the one `operator_actions.action` stores.
    Action(OpKind),
}

impl HistorySignal {
    /// Every signal but the operator actions' ([`HistorySignal::all`]
    /// lists those too).
    pub const PLAIN: [HistorySignal; 29] = [
        Self::Reserved,
        Self::Claim,
        Self::Release,
        Self::UnknownOutcome,
        Self::NeedsReview,
        Self::Cancel,
        Self::Accepted,
        Self::Sent,
        Self::Delivered,
        Self::Read,
        Self::Failed,
        Self::Ambiguous,
        Self::Conflict,
        Self::Retry,
        Self::Deferred,
        Self::NotSent,
        Self::NotSentLate,
        Self::LeaseExpired,
        Self::Reconcile,
        Self::RepeatRefused,
        Self::SentAfterChange,
        Self::VersionChangedInFlight,
        Self::AcknowledgedDelivery,
        Self::Replan,
        Self::SecondMessageId,
        Self::DuplicateWebhook,
        Self::Webhook,
        Self::TemplateBlocked,
        Self::EventParked,
    ];

    /// Every signal: the plain ones, then one per operator action that is
    /// not a cancel.
    pub fn all() -> impl Iterator<Item = HistorySignal> {
        let actions = OpKind::ALL.into_iter().filter(|op| *op != OpKind::Cancel);
        Self::PLAIN.into_iter().chain(actions.map(Self::Action))
    }

    /// The stored word (`webhook` is a prefix: rows read `webhook:<status>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "reserved",
            Self::Claim => "claim",
            Self::Release => "release",
            Self::UnknownOutcome => "unknown_outcome",
            Self::NeedsReview => "needs_review",
            Self::Cancel => "cancel",
            Self::Accepted => "accepted",
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
            Self::Ambiguous => "ambiguous",
            Self::Conflict => "conflict",
            Self::Retry => "retry",
            Self::Deferred => "deferred",
            Self::NotSent => "not_sent",
            Self::NotSentLate => "not_sent_late",
            Self::LeaseExpired => "lease_expired",
            Self::Reconcile => "reconcile",
            Self::RepeatRefused => "repeat_refused",
            Self::SentAfterChange => "sent_after_change",
            Self::VersionChangedInFlight => "version_changed_in_flight",
            Self::AcknowledgedDelivery => "acknowledged_delivery",
            Self::Replan => "replan",
            Self::SecondMessageId => "second_message_id",
            Self::DuplicateWebhook => "duplicate_webhook",
            Self::Webhook => "webhook",
            Self::TemplateBlocked => "template_blocked",
            Self::EventParked => "event_parked",
            Self::Action(op) => op.as_str(),
        }
    }

    /// Reads a stored signal; `webhook:<status>` is [`HistorySignal::Webhook`].
    pub fn parse(s: &str) -> Option<HistorySignal> {
        if s.starts_with("webhook:") {
            return Some(Self::Webhook);
        }
        Self::all().find(|h| *h != Self::Webhook && h.as_str() == s)
    }

    /// The row a state machine signal writes.
    pub fn of(signal: Signal) -> HistorySignal {
        match signal {
            Signal::Claim => Self::Claim,
            Signal::Release => Self::Release,
            Signal::Unknown => Self::UnknownOutcome,
            Signal::NeedsReview => Self::NeedsReview,
            Signal::Cancel(_) => Self::Cancel,
            Signal::Accepted => Self::Accepted,
            Signal::Sent => Self::Sent,
            Signal::Delivered => Self::Delivered,
            Signal::Read => Self::Read,
            Signal::Failed => Self::Failed,
        }
    }
}

impl From<Signal> for HistorySignal {
    fn from(s: Signal) -> Self {
        HistorySignal::of(s)
    }
}

impl fmt::Display for HistorySignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown history signal {0:?}")]
pub struct UnknownSignal(pub String);

impl FromStr for HistorySignal {
    type Err = UnknownSignal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| UnknownSignal(s.to_string()))
    }
}

/// What a history row says besides the states: the signal word, who, the
/// evidence it rests on, a note and the commitment version it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub signal: HistorySignal,
    pub cause: Cause,
    pub evidence: Option<String>,
    pub note: Option<String>,
    pub commitment_version: Option<i64>,
}

impl Said {
    pub fn new(signal: HistorySignal, cause: Cause) -> Said {
        Said {
            signal,
            cause,
            evidence: None,
            note: None,
            commitment_version: None,
        }
    }
    pub fn evidence(mut self, e: impl Into<String>) -> Said {
        self.evidence = Some(e.into());
        self
    }
    pub fn note(mut self, n: impl Into<String>) -> Said {
        self.note = Some(n.into());
        self
    }
    pub fn version(mut self, v: i64) -> Said {
        self.commitment_version = Some(v);
        self
    }
}

/// One history row to append and, when `applied`, the state change it
/// records: `from → to` with `reason` as the new `state_reason`. The
/// ledger applies a change only if the intention is still in `from` (a
/// compare-and-set), and leaving `dispatching` ends the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub intention_id: i64,
    pub from: Option<IntentionState>,
    pub to: IntentionState,
    pub applied: bool,
    pub reason: Option<String>,
    pub said: Said,
    pub at: DateTime<Utc>,
}

/// What `signal` does to an intention in state `from`, and the row that
/// records it (`None` when the machine refuses the signal: nothing is
/// written and the caller explains it).
pub fn on_signal(
    id: i64,
    from: IntentionState,
    signal: Signal,
    said: Said,
    at: DateTime<Utc>,
) -> (Transition, Option<Record>) {
    let t = transition(from, signal);
    let record = match t {
        Transition::Move(to) => Some(Record {
            intention_id: id,
            from: Some(from),
            to,
            applied: true,
            reason: match signal {
                Signal::Cancel(r) => Some(r.as_str().to_string()),
                _ => said.note.clone(),
            },
            said,
            at,
        }),
        Transition::Record(why) => {
            let note = match &said.note {
                Some(n) => format!("{}: {n}", why.as_str()),
                None => why.as_str().to_string(),
            };
            Some(Record {
                intention_id: id,
                from: Some(from),
                to: from,
                applied: false,
                reason: None,
                said: Said {
                    note: Some(note),
                    ..said
                },
                at,
            })
        }
        Transition::Refuse => None,
    };
    (t, record)
}

/// The row that returns a failed intention to `planned`: the one
/// exception to "failed is terminal", allowed only by
/// [`super::state::replan_failed`], whose verdict the caller passes on.
pub fn replanned(id: i64, allowed: IntentionState, said: Said, at: DateTime<Utc>) -> Record {
    Record {
        intention_id: id,
        from: Some(IntentionState::Failed),
        to: allowed,
        applied: true,
        reason: said.note.clone(),
        said,
        at,
    }
}

/// A row that changes no state (a deferral, a reconciliation note, a
/// version sequence observed in flight).
pub fn note(id: i64, state: IntentionState, said: Said, at: DateTime<Utc>) -> Record {
    Record {
        intention_id: id,
        from: Some(state),
        to: state,
        applied: false,
        reason: None,
        said,
        at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::state::{CancelReason, RecordOnly};

    #[test]
    fn every_history_signal_round_trips() {
        for h in HistorySignal::all() {
            if h == HistorySignal::Webhook {
                assert_eq!(HistorySignal::parse("webhook:delivered"), Some(h));
                assert_eq!(HistorySignal::parse("webhook"), None);
                continue;
            }
            assert_eq!(HistorySignal::parse(h.as_str()), Some(h), "{h}");
            assert_eq!(h.as_str().parse::<HistorySignal>(), Ok(h));
        }
        assert!("sending".parse::<HistorySignal>().is_err());
        let words: std::collections::HashSet<_> = HistorySignal::all().map(|h| h.as_str()).collect();
        assert_eq!(words.len(), HistorySignal::all().count(), "two signals share a word");
    }

    #[test]
    fn state_machine_signals_write_their_own_names() {
        let mut signals = Signal::KINDS.to_vec();
        signals.extend(CancelReason::ALL.map(Signal::Cancel));
        for s in signals {
            assert_eq!(HistorySignal::of(s).as_str(), s.name());
            assert_eq!(HistorySignal::from(s), HistorySignal::of(s));
        }
    }

    #[test]
    fn causes_round_trip() {
        for c in Cause::ALL {
            assert_eq!(Cause::parse(c.as_str()), Some(c));
            assert_eq!(c.to_string(), c.as_str());
        }
        assert_eq!(Cause::parse("robot"), None);
    }

    #[test]
    fn a_move_records_both_states_and_its_reason() {
        let at = Utc::now();
        let said = Said::new(HistorySignal::Claim, Cause::Dispatcher).note("w1").version(2);
        let (t, r) = on_signal(7, IntentionState::Planned, Signal::Claim, said.clone(), at);
        assert_eq!(t, Transition::Move(IntentionState::Dispatching));
        let r = r.unwrap();
        assert_eq!(
            (r.from, r.to, r.applied, r.reason.as_deref()),
            (
                Some(IntentionState::Planned),
                IntentionState::Dispatching,
                true,
                Some("w1")
            )
        );
        assert_eq!(r.said, said);
        // A cancellation's reason is its typed word, never the note.
        let said = Said::new(HistorySignal::Cancel, Cause::Planner).note("free text");
        let (_, r) = on_signal(
            7,
            IntentionState::Planned,
            Signal::Cancel(CancelReason::Superseded),
            said,
            at,
        );
        assert_eq!(r.unwrap().reason.as_deref(), Some("superseded"));
    }

    #[test]
    fn record_only_signals_keep_the_state_and_say_why() {
        let at = Utc::now();
        let said = Said::new(HistorySignal::Delivered, Cause::Webhook).note("late");
        let (t, r) = on_signal(1, IntentionState::Read, Signal::Delivered, said, at);
        assert_eq!(t, Transition::Record(RecordOnly::Lower));
        let r = r.unwrap();
        assert_eq!(
            (r.from, r.to, r.applied, r.reason),
            (Some(IntentionState::Read), IntentionState::Read, false, None)
        );
        assert_eq!(r.said.note.as_deref(), Some("lower_rank: late"));
        let (_, r) = on_signal(
            1,
            IntentionState::Read,
            Signal::Read,
            Said::new(HistorySignal::Read, Cause::Webhook),
            at,
        );
        assert_eq!(r.unwrap().said.note.as_deref(), Some("repeated"));
    }

    #[test]
    fn refused_signals_write_nothing_and_notes_never_move() {
        let at = Utc::now();
        let (t, r) = on_signal(
            1,
            IntentionState::Sent,
            Signal::Claim,
            Said::new(HistorySignal::Claim, Cause::Dispatcher),
            at,
        );
        assert_eq!((t, r), (Transition::Refuse, None));
        let n = note(
            3,
            IntentionState::Uncertain,
            Said::new(HistorySignal::Reconcile, Cause::Reconciler),
            at,
        );
        assert_eq!(
            (n.from, n.to, n.applied),
            (Some(IntentionState::Uncertain), IntentionState::Uncertain, false)
        );
    }
}
