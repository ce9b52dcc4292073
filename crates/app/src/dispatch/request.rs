//! The request handed to a channel, built only from what the ledger stored
//! for the intention: the same key, body, expiry and correlation id on every
//! attempt, so an idempotent channel recognises a repeat as the same command.

use chrono::{DateTime, Duration, Utc};

use crate::channel::{ChannelState, SendOutcome, SendRequest};
use crate::domain::state::{CancelReason, Signal};
use crate::store::{AttemptResult, ContactRow, IntentionRow};

/// The customer wrote to us less than 24 hours ago: free text is allowed on
/// the Cloud API; outside the window only approved templates are.
pub fn in_service_window(contact: Option<&ContactRow>, now: DateTime<Utc>) -> bool {
    contact
        .and_then(|c| c.last_inbound_at)
        .is_some_and(|t| t <= now && now - t < Duration::hours(24))
}

pub fn send_request(i: &IntentionRow, contact: Option<&ContactRow>, now: DateTime<Utc>) -> SendRequest {
    SendRequest {
        key: i.key.clone(),
        recipient: i.recipient.clone(),
        body: i.body.clone(),
        template: i.template.clone(),
        language: i.language.clone(),
        parameters: i.parameters.clone(),
        expires_at: i.expires_at,
        correlation_id: i.correlation_id.clone(),
        in_service_window: in_service_window(contact, now),
    }
}

/// The evidence signal for a channel state (`None`: ambiguous, no evidence).
pub fn evidence_for(state: ChannelState) -> Option<Signal> {
    match state {
        ChannelState::Queued => Some(Signal::Accepted),
        ChannelState::Sent => Some(Signal::Sent),
        ChannelState::Delivered => Some(Signal::Delivered),
        ChannelState::Read => Some(Signal::Read),
        ChannelState::Failed => Some(Signal::Failed),
        ChannelState::Cancelled => Some(Signal::Cancel(CancelReason::Withdrawn)),
        ChannelState::Ambiguous => None,
    }
}

/// The channel's classification in the store's terms.
pub fn attempt_result(o: &SendOutcome) -> AttemptResult<'_> {
    match o {
        SendOutcome::Accepted {
            command_id,
            message_id,
            state,
            http_status,
        } => AttemptResult::Acknowledged {
            evidence: evidence_for(*state),
            command_id: command_id.as_deref(),
            message_id: message_id.as_deref(),
            http_status: *http_status,
            detail: None,
        },
        SendOutcome::Failed {
            code,
            detail,
            http_status,
        } => AttemptResult::Failed {
            code,
            detail,
            http_status: *http_status,
        },
        SendOutcome::Retry {
            detail,
            http_status,
            retry_after_secs,
        } => AttemptResult::Retry {
            detail,
            http_status: *http_status,
            retry_after_secs: *retry_after_secs,
        },
        SendOutcome::Uncertain { detail } => AttemptResult::Uncertain { detail },
        SendOutcome::Conflict { detail, http_status } => AttemptResult::Conflict {
            detail,
            http_status: *http_status,
        },
        SendOutcome::ChannelDown {
            fault,
            detail,
            http_status,
        } => AttemptResult::ChannelDown {
            fault: *fault,
            detail,
            http_status: *http_status,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_window_is_24_hours_after_the_last_inbound_message() {
        let now = Utc::now();
        let c = |t: Option<DateTime<Utc>>| ContactRow {
            id: 1,
            phone: "+51987654321".into(),
            name: None,
            language: None,
            consent_marketing: false,
            opt_out_marketing_at: None,
            opt_out_transactional_at: None,
            last_inbound_at: t,
        };
        assert!(!in_service_window(None, now));
        assert!(!in_service_window(Some(&c(None)), now));
        assert!(in_service_window(Some(&c(Some(now - Duration::hours(23)))), now));
        assert!(!in_service_window(Some(&c(Some(now - Duration::hours(24)))), now));
    }

    #[test]
    fn channel_states_map_to_evidence() {
        assert_eq!(evidence_for(ChannelState::Queued), Some(Signal::Accepted));
        assert_eq!(evidence_for(ChannelState::Read), Some(Signal::Read));
        assert_eq!(
            evidence_for(ChannelState::Cancelled),
            Some(Signal::Cancel(CancelReason::Withdrawn))
        );
        assert_eq!(evidence_for(ChannelState::Ambiguous), None);
    }
}
