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

use super::attempt::AttemptOutcome;
use super::fault::ChannelFault;

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

    /// The message reached the customer: delivered or read.
    pub fn reached_recipient(self) -> bool {
        matches!(self, Self::Delivered | Self::Read)
    }

    /// Its outcome is still to come: not sent yet, in flight, or uncertain
    /// (a resend of a family with such a member waits for it).
    pub fn awaits_outcome(self) -> bool {
        matches!(self, Self::Planned | Self::Dispatching | Self::Uncertain)
    }

    /// The state is the channel's word on the message: one an evidence
    /// signal moves to ([`Signal::is_evidence`]).
    pub fn is_channel_outcome(self) -> bool {
        Signal::KINDS.iter().any(|s| s.evidence_state() == Some(self))
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
    pub fn evidence_state(self) -> Option<IntentionState> {
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
    pub const ALL: [RecordOnly; 4] = [
        RecordOnly::Repeated,
        RecordOnly::Lower,
        RecordOnly::AfterTerminal,
        RecordOnly::FailedAfterDelivery,
    ];

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

/// One attempt of an intention, as the exception below reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptTrace {
    pub outcome: AttemptOutcome,
    pub http_status: Option<u16>,
    pub error_code: Option<String>,
}

impl AttemptTrace {
    /// Whether the request may have reached the channel. A `failed`
    /// attempt whose failure was the channel refusing us (401, 403, Graph
    /// 190, the engine's instance words: [`ChannelFault::of_stored_failure`])
    /// did not: the channel refused the caller before it looked at the
    /// message. unavez marked such messages `failed` before it told the two
    /// apart.
    pub fn reached_channel(&self) -> bool {
        match self.outcome {
            AttemptOutcome::Failed => {
                ChannelFault::of_stored_failure(self.http_status, self.error_code.as_deref()).is_none()
            }
            o => o.may_have_reached_channel(),
        }
    }
}

/// Why a `failed` intention may not go back to `planned`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplanRefused {
    #[error("the intention is {0}, not failed")]
    NotFailed(IntentionState),
    #[error("it has no attempt: its failure did not come from sending")]
    NoAttempt,
    #[error("attempt {0} may have reached the channel: a failed message that may have gone out never goes back")]
    MayHaveReached(usize),
    #[error("the channel gave it a command or message id: it reached the channel")]
    HasChannelRefs,
}

/// **The one exception to "failed is terminal"** (docs/design.md,
/// "Reprocessing a day"): a technician may return a `failed` intention to
/// `planned` when every one of its attempts ended before anything reached
/// the channel: a channel that refused us, a request that never left. Such
/// a "failure" is the channel's, not the message's, and sending it is its
/// first delivery. Anything that may have reached the channel (an
/// acknowledgement, an uncertain outcome, a refusal of the message itself,
/// a command or message id) keeps it failed for good. [`transition`] never
/// moves a failed intention; only this rule does, and only for a person
/// (`unavez reprocess --state failed`), recorded as
/// [`super::history::HistorySignal::Replan`].
pub fn replan_failed(
    from: IntentionState,
    attempts: &[AttemptTrace],
    channel_refs: bool,
) -> Result<IntentionState, ReplanRefused> {
    if from != IntentionState::Failed {
        return Err(ReplanRefused::NotFailed(from));
    }
    if attempts.is_empty() {
        return Err(ReplanRefused::NoAttempt);
    }
    if let Some(i) = attempts.iter().position(AttemptTrace::reached_channel) {
        return Err(ReplanRefused::MayHaveReached(i + 1));
    }
    if channel_refs {
        return Err(ReplanRefused::HasChannelRefs);
    }
    Ok(IntentionState::Planned)
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
#[path = "state_tests.rs"]
mod tests;
