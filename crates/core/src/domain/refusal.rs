//! Why the ledger refused an action: the typed refusal, its English text
//! (logs, the action log's detail) and its stable rule code.

use chrono::{DateTime, FixedOffset};
use serde::Serialize;

use super::state::IntentionState;

/// Why the ledger refused an action, explained to the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    /// An attempt is in flight; its outcome will arrive.
    InFlight,
    /// The outcome is unknown: the customer may already have it.
    Uncertain,
    /// The channel already took the message.
    ChannelHasIt { state: IntentionState },
    /// The customer already has it.
    Delivered { state: IntentionState },
    /// Closed already (failed or cancelled).
    Closed {
        state: IntentionState,
        reason: Option<String>,
    },
    /// Nothing left yet: there is nothing to verify or resend.
    NotSentYet { state: IntentionState },
    /// A resend of this intention is still pending: `authorized_by`
    /// authorized it at `authorized_at` (the clinic's time). Also what a
    /// supervisor who raced another one for the same case is told.
    ResendPending {
        key: String,
        authorized_by: Option<String>,
        authorized_at: DateTime<FixedOffset>,
    },
    /// An earlier message of this intention (the original or a resend)
    /// was already delivered or read, and the supervisor did not
    /// acknowledge it.
    AcknowledgeDelivery { key: String, state: IntentionState },
    /// `[policy] max_resends_per_day` resends were already authorized for
    /// this intention today.
    DailyCap { limit: u32, authorized_today: u32 },
    /// The commitment changed since this message was planned: its content is
    /// no longer the truth.
    StaleVersion { planned: i64, current: i64 },
    /// The commitment was cancelled.
    CommitmentCancelled,
    /// The message's validity ended.
    Expired,
    /// Manual contact applies to appointments only.
    NotAnAppointment,
    /// A reopen of a case nobody marked handled.
    NotHandled,
    /// The channel cannot be asked about a message (Cloud API): its status
    /// webhook will settle it.
    NoLookup,
    /// The channel itself does not know yet (engine "ambiguous").
    ChannelUnsure,
    /// The channel has no record of the message: it never arrived.
    ChannelNoRecord,
    /// No engine command id is known: asking an idempotent engine by key
    /// means repeating the send, which only the reconciler does (after the
    /// validity check).
    NoCommandId,
    /// The channel could not be asked right now.
    ChannelUnavailable { detail: String },
    // --- issue 25 §3: the front desk asks for a resend ---
    /// The front desk already asked a supervisor for a resend of this
    /// case, and nobody answered yet.
    ResendRequested { by: String },
    /// There is no open request for a resend to decline.
    NoResendRequest,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::InFlight => write!(f, "an attempt is in flight; wait for its outcome"),
            Refusal::Uncertain => write!(f, "the outcome is unknown and the customer may have it; verify first"),
            Refusal::ChannelHasIt { state } => write!(f, "the channel already took the message ({state})"),
            Refusal::Delivered { state } => write!(f, "already delivered to the customer ({state}); nothing to cancel"),
            Refusal::Closed { state, reason } => match reason {
                Some(r) => write!(f, "already closed ({state}: {r})"),
                None => write!(f, "already closed ({state})"),
            },
            Refusal::NotSentYet { state } => write!(f, "nothing was sent yet ({state})"),
            Refusal::ResendPending {
                key,
                authorized_by: Some(who),
                authorized_at: at,
            } => write!(
                f,
                "a resend is already pending: {key}, authorized by {who} at {}",
                at.to_rfc3339()
            ),
            Refusal::ResendPending { key, .. } => write!(f, "a resend is already pending: {key}"),
            Refusal::AcknowledgeDelivery { key, state } => write!(
                f,
                "the customer already has {key} ({state}); a resend needs the supervisor's explicit acknowledgement"
            ),
            Refusal::DailyCap {
                limit,
                authorized_today,
            } => write!(
                f,
                "{authorized_today} resend(s) already authorized today for this intention (policy.max_resends_per_day = {limit})"
            ),
            Refusal::StaleVersion { planned, current } => {
                write!(
                    f,
                    "the commitment changed (message for v{planned}, now v{current}); its content is outdated"
                )
            }
            Refusal::CommitmentCancelled => write!(f, "the commitment was cancelled"),
            Refusal::Expired => write!(f, "the message's validity has ended"),
            Refusal::NotAnAppointment => write!(f, "manual contact applies to appointments only"),
            Refusal::NotHandled => write!(f, "the case is not marked handled"),
            Refusal::NoLookup => write!(f, "the channel cannot be asked; its status webhook will settle it"),
            Refusal::ChannelUnsure => write!(f, "the channel itself does not know yet (ambiguous); it will report"),
            Refusal::ChannelNoRecord => write!(f, "the channel has no record of the message: it never arrived"),
            Refusal::NoCommandId => write!(
                f,
                "no engine command is known for it: asking would repeat the send; the reconciler repeats it \
                 only after checking it is still valid"
            ),
            Refusal::ChannelUnavailable { detail } => write!(f, "the channel could not be asked: {detail}"),
            Refusal::ResendRequested { by } => write!(f, "{by} already asked a supervisor for a resend"),
            Refusal::NoResendRequest => write!(f, "nobody asked for a resend of this case"),
        }
    }
}

impl Refusal {
    /// The rule that refused, as a stable code (the `refusal` tag of the
    /// JSON form): what scripts match on, whatever the console language.
    pub fn rule(&self) -> &'static str {
        match self {
            Refusal::InFlight => "in_flight",
            Refusal::Uncertain => "uncertain",
            Refusal::ChannelHasIt { .. } => "channel_has_it",
            Refusal::Delivered { .. } => "delivered",
            Refusal::Closed { .. } => "closed",
            Refusal::NotSentYet { .. } => "not_sent_yet",
            Refusal::ResendPending { .. } => "resend_pending",
            Refusal::AcknowledgeDelivery { .. } => "acknowledge_delivery",
            Refusal::DailyCap { .. } => "daily_cap",
            Refusal::StaleVersion { .. } => "stale_version",
            Refusal::CommitmentCancelled => "commitment_cancelled",
            Refusal::Expired => "expired",
            Refusal::NotAnAppointment => "not_an_appointment",
            Refusal::NotHandled => "not_handled",
            Refusal::NoLookup => "no_lookup",
            Refusal::ChannelUnsure => "channel_unsure",
            Refusal::ChannelNoRecord => "channel_no_record",
            Refusal::NoCommandId => "no_command_id",
            Refusal::ChannelUnavailable { .. } => "channel_unavailable",
            Refusal::ResendRequested { .. } => "resend_requested",
            Refusal::NoResendRequest => "no_resend_request",
        }
    }
}

impl Refusal {
    /// One refusal of every rule, for the tests that check each has its
    /// words and its code.
    pub fn examples() -> Vec<Refusal> {
        vec![
            Refusal::InFlight,
            Refusal::Uncertain,
            Refusal::ChannelHasIt {
                state: IntentionState::Sent,
            },
            Refusal::Delivered {
                state: IntentionState::Read,
            },
            Refusal::Closed {
                state: IntentionState::Failed,
                reason: None,
            },
            Refusal::NotSentYet {
                state: IntentionState::Planned,
            },
            Refusal::ResendPending {
                key: "k".into(),
                authorized_by: Some("ana".into()),
                authorized_at: chrono::Utc::now().fixed_offset(),
            },
            Refusal::AcknowledgeDelivery {
                key: "k".into(),
                state: IntentionState::Read,
            },
            Refusal::DailyCap {
                limit: 2,
                authorized_today: 2,
            },
            Refusal::StaleVersion { planned: 1, current: 2 },
            Refusal::CommitmentCancelled,
            Refusal::Expired,
            Refusal::NotAnAppointment,
            Refusal::NotHandled,
            Refusal::NoLookup,
            Refusal::ChannelUnsure,
            Refusal::ChannelNoRecord,
            Refusal::NoCommandId,
            Refusal::ChannelUnavailable { detail: "x".into() },
            Refusal::ResendRequested { by: "recepcion".into() },
            Refusal::NoResendRequest,
        ]
    }
}
