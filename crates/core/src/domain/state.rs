//! The evidence-ranked intention state machine.
//!
//! States say what we *know*, not what we did: a task that finished without
//! error proves nothing. Evidence only ever moves an intention up the ranking;
//! a lower-ranked or repeated signal is kept in history and changes nothing,
//! so webhooks arriving out of order can never make a delivered message look
//! pending again. Control signals (claim, release, cancel…) come from our own
//! code and are *refused* when they do not fit, because that is a bug or a
//! race we want reported, not silently absorbed.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where an intention stands, by the evidence we hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum IntentionState {
    Planned,
    Dispatching,
    Uncertain,
    Accepted,
    Sent,
    Delivered,
    Read,
    Failed,
    Review,
    Cancelled,
}

impl IntentionState {
    pub const ALL: [IntentionState; 10] = [
        Self::Planned,
        Self::Dispatching,
        Self::Uncertain,
        Self::Accepted,
        Self::Sent,
        Self::Delivered,
        Self::Read,
        Self::Failed,
        Self::Review,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Planned => "planned",
            Self::Dispatching => "dispatching",
            Self::Uncertain => "uncertain",
            Self::Accepted => "accepted",
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
            Self::Review => "review",
            Self::Cancelled => "cancelled",
        }
    }

    /// Evidence rank; `None` for states outside the ranking (failed, review,
    /// cancelled), which are handled explicitly.
    pub fn rank(self) -> Option<u8> {
        match self {
            Self::Planned => Some(0),
            Self::Dispatching | Self::Uncertain => Some(1),
            Self::Accepted => Some(2),
            Self::Sent => Some(3),
            Self::Delivered => Some(4),
            Self::Read => Some(5),
            Self::Failed | Self::Review | Self::Cancelled => None,
        }
    }

    /// Terminal states accept no further change of state; signals are only
    /// recorded.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Failed | Self::Cancelled)
    }

    /// The channel has acknowledged the message at least once: resending it
    /// automatically would be a duplicate.
    pub fn has_channel_evidence(self) -> bool {
        matches!(self, Self::Accepted | Self::Sent | Self::Delivered | Self::Read)
    }
}

impl fmt::Display for IntentionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown intention state {0:?} (expected one of planned, dispatching, uncertain, accepted, sent, delivered, read, failed, review, cancelled)"
)]
pub struct UnknownState(pub String);

impl FromStr for IntentionState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

/// Why an intention was closed without sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    CommitmentCancelled,
    Superseded,
    AlreadyConfirmed,
    ManualContact,
    OptedOut,
    Expired,
    Operator,
    /// The engine confirmed it withdrew a queued command before it went out.
    Withdrawn,
    /// Flood guard: the commitment was already in the past when planned or
    /// claimed.
    InPast,
}

impl CancelReason {
    pub const ALL: [CancelReason; 9] = [
        Self::CommitmentCancelled,
        Self::Superseded,
        Self::AlreadyConfirmed,
        Self::ManualContact,
        Self::OptedOut,
        Self::Expired,
        Self::Operator,
        Self::Withdrawn,
        Self::InPast,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CommitmentCancelled => "commitment_cancelled",
            Self::Superseded => "superseded",
            Self::AlreadyConfirmed => "already_confirmed",
            Self::ManualContact => "manual_contact",
            Self::OptedOut => "opted_out",
            Self::Expired => "expired",
            Self::Operator => "operator",
            Self::Withdrawn => "withdrawn",
            Self::InPast => "in_past",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an intention was handed to a person (`review`), for the reviews the
/// console names in the operator's language (stored as `state_reason`;
/// other reviews keep a free-text note there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewReason {
    /// The commitment changed (rescheduled, cancelled) while we did not know
    /// whether the message went out: the repeat was not sent.
    ChangedWhileUncertain,
    /// The message stopped being pertinent for another reason (expired,
    /// opt-out, confirmed, staff called, appointment past) while we did not
    /// know whether it went out: the repeat was not sent.
    InvalidWhileUncertain,
}

impl ReviewReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ChangedWhileUncertain => "changed_while_uncertain",
            Self::InvalidWhileUncertain => "invalid_while_uncertain",
        }
    }

    /// The review a refused repeat gets, by the validity verdict that refused it.
    pub fn for_refused_repeat(reason: CancelReason) -> ReviewReason {
        match reason {
            CancelReason::CommitmentCancelled | CancelReason::Superseded => Self::ChangedWhileUncertain,
            _ => Self::InvalidWhileUncertain,
        }
    }
}

impl fmt::Display for ReviewReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something that may move an intention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    // --- control: from our own dispatcher, reconciler and operators ---
    /// The dispatcher takes a due intention under a lease.
    Claim,
    /// A try did not reach the channel (connection refused, 5xx before
    /// processing, deferral): back to planned for a later try.
    Release,
    /// The outcome of a try is unknown (timeout after sending, lease expired
    /// mid-attempt, engine says ambiguous).
    Unknown,
    /// A person must look: attempts exhausted, conflicting evidence,
    /// reconciliation window over.
    NeedsReview,
    /// Closed without sending.
    Cancel(CancelReason),
    // --- evidence: facts reported by a channel or a person ---
    Accepted,
    Sent,
    Delivered,
    Read,
    Failed,
}

impl Signal {
    pub const KINDS: [Signal; 10] = [
        Signal::Claim,
        Signal::Release,
        Signal::Unknown,
        Signal::NeedsReview,
        Signal::Cancel(CancelReason::Operator),
        Signal::Accepted,
        Signal::Sent,
        Signal::Delivered,
        Signal::Read,
        Signal::Failed,
    ];

    pub fn is_evidence(self) -> bool {
        matches!(
            self,
            Signal::Accepted | Signal::Sent | Signal::Delivered | Signal::Read | Signal::Failed
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Signal::Claim => "claim",
            Signal::Release => "release",
            Signal::Unknown => "unknown_outcome",
            Signal::NeedsReview => "needs_review",
            Signal::Cancel(_) => "cancel",
            Signal::Accepted => "accepted",
            Signal::Sent => "sent",
            Signal::Delivered => "delivered",
            Signal::Read => "read",
            Signal::Failed => "failed",
        }
    }

    /// The state an evidence signal stands for.
    fn evidence_state(self) -> Option<IntentionState> {
        Some(match self {
            Signal::Accepted => IntentionState::Accepted,
            Signal::Sent => IntentionState::Sent,
            Signal::Delivered => IntentionState::Delivered,
            Signal::Read => IntentionState::Read,
            Signal::Failed => IntentionState::Failed,
            _ => return None,
        })
    }
}

/// What applying a signal does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The state changes to this one.
    Move(IntentionState),
    /// Kept in history, the state does not change.
    Record(RecordOnly),
    /// The signal does not fit the current state; nothing is written
    /// except, for operators, an explanation.
    Refuse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOnly {
    /// Same evidence as the current state (a repeated webhook, say).
    Repeated,
    /// Evidence ranked below what we already hold (out-of-order delivery).
    Lower,
    /// The intention is closed; late evidence is kept for the record.
    AfterTerminal,
    /// `failed` after delivered/read: the message reached the customer.
    FailedAfterDelivery,
}

impl RecordOnly {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordOnly::Repeated => "repeated",
            RecordOnly::Lower => "lower_rank",
            RecordOnly::AfterTerminal => "after_terminal",
            RecordOnly::FailedAfterDelivery => "failed_after_delivery",
        }
    }
}

/// The whole state machine in one pure function.
pub fn transition(from: IntentionState, signal: Signal) -> Transition {
    use IntentionState as S;
    use Transition::{Move, Record, Refuse};

    if let Some(target) = signal.evidence_state() {
        return evidence(from, target);
    }
    match (from, signal) {
        (S::Planned, Signal::Claim) => Move(S::Dispatching),
        (S::Dispatching, Signal::Release) => Move(S::Planned),
        (S::Dispatching, Signal::Unknown) => Move(S::Uncertain),
        // The engine may still call a reconciled command ambiguous.
        (S::Uncertain, Signal::Unknown) => Record(RecordOnly::Repeated),
        (S::Planned | S::Dispatching | S::Uncertain | S::Accepted, Signal::NeedsReview) => Move(S::Review),
        (S::Review, Signal::NeedsReview) => Record(RecordOnly::Repeated),
        // Closing without sending is only honest where nothing went out, or
        // where the channel confirmed it withdrew the message.
        (S::Planned | S::Review, Signal::Cancel(_)) => Move(S::Cancelled),
        (S::Dispatching | S::Uncertain | S::Accepted, Signal::Cancel(CancelReason::Withdrawn)) => Move(S::Cancelled),
        (S::Cancelled, Signal::Cancel(_)) => Record(RecordOnly::Repeated),
        _ => Refuse,
    }
}

fn evidence(from: IntentionState, target: IntentionState) -> Transition {
    use IntentionState as S;
    use Transition::{Move, Record};
    match from {
        S::Failed | S::Cancelled => {
            if from == target {
                Record(RecordOnly::Repeated)
            } else {
                Record(RecordOnly::AfterTerminal)
            }
        }
        // Evidence is exactly what a reviewer waits for.
        S::Review => Move(target),
        _ if target == S::Failed => match from {
            S::Delivered | S::Read => Record(RecordOnly::FailedAfterDelivery),
            _ => Move(S::Failed),
        },
        _ => {
            let (have, got) = (from.rank().unwrap_or(0), target.rank().unwrap_or(0));
            if got > have {
                Move(target)
            } else if from == target {
                Record(RecordOnly::Repeated)
            } else {
                Record(RecordOnly::Lower)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use IntentionState as S;
    use RecordOnly as R;
    use Transition::{Move, Record, Refuse};

    /// Every (state, signal) pair, written out by hand so that a change to
    /// the machine has to change this table too.
    fn expected(from: S, sig: Signal) -> Transition {
        match (from, sig) {
            (S::Planned, Signal::Claim) => Move(S::Dispatching),
            (S::Planned, Signal::Release) => Refuse,
            (S::Planned, Signal::Unknown) => Refuse,
            (S::Planned, Signal::NeedsReview) => Move(S::Review),
            (S::Planned, Signal::Cancel(_)) => Move(S::Cancelled),
            (S::Planned, Signal::Accepted) => Move(S::Accepted),
            (S::Planned, Signal::Sent) => Move(S::Sent),
            (S::Planned, Signal::Delivered) => Move(S::Delivered),
            (S::Planned, Signal::Read) => Move(S::Read),
            (S::Planned, Signal::Failed) => Move(S::Failed),

            (S::Dispatching, Signal::Claim) => Refuse,
            (S::Dispatching, Signal::Release) => Move(S::Planned),
            (S::Dispatching, Signal::Unknown) => Move(S::Uncertain),
            (S::Dispatching, Signal::NeedsReview) => Move(S::Review),
            (S::Dispatching, Signal::Cancel(r)) => {
                if r == CancelReason::Withdrawn {
                    Move(S::Cancelled)
                } else {
                    Refuse
                }
            }
            (S::Dispatching, Signal::Accepted) => Move(S::Accepted),
            (S::Dispatching, Signal::Sent) => Move(S::Sent),
            (S::Dispatching, Signal::Delivered) => Move(S::Delivered),
            (S::Dispatching, Signal::Read) => Move(S::Read),
            (S::Dispatching, Signal::Failed) => Move(S::Failed),

            (S::Uncertain, Signal::Claim) => Refuse,
            (S::Uncertain, Signal::Release) => Refuse,
            (S::Uncertain, Signal::Unknown) => Record(R::Repeated),
            (S::Uncertain, Signal::NeedsReview) => Move(S::Review),
            (S::Uncertain, Signal::Cancel(r)) => {
                if r == CancelReason::Withdrawn {
                    Move(S::Cancelled)
                } else {
                    Refuse
                }
            }
            (S::Uncertain, Signal::Accepted) => Move(S::Accepted),
            (S::Uncertain, Signal::Sent) => Move(S::Sent),
            (S::Uncertain, Signal::Delivered) => Move(S::Delivered),
            (S::Uncertain, Signal::Read) => Move(S::Read),
            (S::Uncertain, Signal::Failed) => Move(S::Failed),

            (S::Accepted, Signal::Claim) => Refuse,
            (S::Accepted, Signal::Release) => Refuse,
            (S::Accepted, Signal::Unknown) => Refuse,
            (S::Accepted, Signal::NeedsReview) => Move(S::Review),
            (S::Accepted, Signal::Cancel(r)) => {
                if r == CancelReason::Withdrawn {
                    Move(S::Cancelled)
                } else {
                    Refuse
                }
            }
            (S::Accepted, Signal::Accepted) => Record(R::Repeated),
            (S::Accepted, Signal::Sent) => Move(S::Sent),
            (S::Accepted, Signal::Delivered) => Move(S::Delivered),
            (S::Accepted, Signal::Read) => Move(S::Read),
            (S::Accepted, Signal::Failed) => Move(S::Failed),

            (S::Sent, Signal::Accepted) => Record(R::Lower),
            (S::Sent, Signal::Sent) => Record(R::Repeated),
            (S::Sent, Signal::Delivered) => Move(S::Delivered),
            (S::Sent, Signal::Read) => Move(S::Read),
            (S::Sent, Signal::Failed) => Move(S::Failed),
            (S::Sent, _) => Refuse,

            (S::Delivered, Signal::Accepted | Signal::Sent) => Record(R::Lower),
            (S::Delivered, Signal::Delivered) => Record(R::Repeated),
            (S::Delivered, Signal::Read) => Move(S::Read),
            (S::Delivered, Signal::Failed) => Record(R::FailedAfterDelivery),
            (S::Delivered, _) => Refuse,

            (S::Read, Signal::Accepted | Signal::Sent | Signal::Delivered) => Record(R::Lower),
            (S::Read, Signal::Read) => Record(R::Repeated),
            (S::Read, Signal::Failed) => Record(R::FailedAfterDelivery),
            (S::Read, _) => Refuse,

            (S::Failed, Signal::Failed) => Record(R::Repeated),
            (S::Failed, s) if s.is_evidence() => Record(R::AfterTerminal),
            (S::Failed, _) => Refuse,

            (S::Review, Signal::NeedsReview) => Record(R::Repeated),
            (S::Review, Signal::Cancel(_)) => Move(S::Cancelled),
            (S::Review, Signal::Accepted) => Move(S::Accepted),
            (S::Review, Signal::Sent) => Move(S::Sent),
            (S::Review, Signal::Delivered) => Move(S::Delivered),
            (S::Review, Signal::Read) => Move(S::Read),
            (S::Review, Signal::Failed) => Move(S::Failed),
            (S::Review, _) => Refuse,

            (S::Cancelled, Signal::Cancel(_)) => Record(R::Repeated),
            (S::Cancelled, s) if s.is_evidence() => Record(R::AfterTerminal),
            (S::Cancelled, _) => Refuse,
        }
    }

    #[test]
    fn every_state_signal_pair_matches_the_table() {
        let mut signals: Vec<Signal> = Signal::KINDS.to_vec();
        signals.extend(CancelReason::ALL.map(Signal::Cancel));
        for from in S::ALL {
            for sig in &signals {
                assert_eq!(transition(from, *sig), expected(from, *sig), "{from} + {}", sig.name());
            }
        }
    }

    #[test]
    fn evidence_never_lowers_rank() {
        for from in S::ALL {
            for sig in Signal::KINDS.into_iter().filter(|s| s.is_evidence()) {
                if let Move(to) = transition(from, sig)
                    && let (Some(a), Some(b)) = (from.rank(), to.rank())
                {
                    assert!(b > a, "{from} -> {to} lowers rank");
                }
            }
        }
    }

    #[test]
    fn terminal_states_never_move() {
        let mut signals: Vec<Signal> = Signal::KINDS.to_vec();
        signals.extend(CancelReason::ALL.map(Signal::Cancel));
        for from in [S::Failed, S::Cancelled] {
            for sig in &signals {
                assert!(!matches!(transition(from, *sig), Move(_)), "{from} moved");
            }
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;
        use proptest::sample::select;

        fn any_state() -> impl Strategy<Value = S> {
            select(S::ALL.to_vec())
        }

        /// Every signal, each cancel reason included.
        fn any_signal() -> impl Strategy<Value = Signal> {
            let mut all: Vec<Signal> = Signal::KINDS.to_vec();
            all.extend(CancelReason::ALL.map(Signal::Cancel));
            select(all)
        }

        /// Evidence that a message went out, in any amount and order.
        fn positive_evidence() -> impl Strategy<Value = Vec<Signal>> {
            prop::collection::vec(
                select(vec![Signal::Accepted, Signal::Sent, Signal::Delivered, Signal::Read]),
                1..12,
            )
        }

        fn run(from: S, signals: &[Signal]) -> Vec<(S, Signal, S)> {
            let mut state = from;
            let mut steps = Vec::new();
            for &sig in signals {
                let next = match transition(state, sig) {
                    Move(to) => to,
                    Record(_) | Refuse => state,
                };
                steps.push((state, sig, next));
                state = next;
            }
            steps
        }

        proptest! {
            /// Whatever arrives, in whatever order: evidence never lowers
            /// the rank, a delivered message never looks undelivered again,
            /// and a closed intention stays closed.
            #[test]
            fn state_changes_are_monotonic_by_evidence_rank(
                from in any_state(),
                signals in prop::collection::vec(any_signal(), 0..40),
            ) {
                for (before, sig, after) in run(from, &signals) {
                    if sig.is_evidence() && before != after
                        && let (Some(a), Some(b)) = (before.rank(), after.rank())
                    {
                        prop_assert!(b > a, "{before} + {} -> {after} lowers the rank", sig.name());
                    }
                    if matches!(before, S::Delivered | S::Read) {
                        prop_assert!(
                            after == before || after == S::Read,
                            "{before} + {} -> {after}: a delivered message went back", sig.name()
                        );
                    }
                    if before.is_terminal() {
                        prop_assert_eq!(after, before, "{} moved a closed intention", sig.name());
                    }
                }
            }

            /// Webhooks out of order: any order of the same evidence ends in
            /// the highest-ranked state reported.
            #[test]
            fn the_order_of_evidence_does_not_matter(
                from in select(vec![S::Planned, S::Dispatching, S::Uncertain, S::Accepted, S::Review]),
                (signals, shuffled) in positive_evidence()
                    .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
            ) {
                let end = |sigs: &[Signal]| run(from, sigs).last().map(|s| s.2).unwrap_or(from);
                let highest = signals
                    .iter()
                    .filter_map(|s| s.evidence_state())
                    .chain(from.rank().filter(|r| *r >= 2).map(|_| from))
                    .max_by_key(|s| s.rank())
                    .unwrap();
                prop_assert_eq!(end(&signals), highest);
                prop_assert_eq!(end(&shuffled), highest);
            }
        }
    }

    #[test]
    fn state_names_round_trip() {
        for s in S::ALL {
            assert_eq!(s.as_str().parse::<S>(), Ok(s));
        }
        assert!("sending".parse::<S>().is_err());
        for r in CancelReason::ALL {
            assert_eq!(CancelReason::parse(r.as_str()), Some(r));
        }
    }
}
