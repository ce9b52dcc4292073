//! Attempts: how one try at sending ended (as stored in
//! `attempts.outcome`), what the channel answered, what finishing it did to
//! the intention, and the retry policy with the one backoff every part of
//! unavez uses (result retries and reconciliation alike).

use std::fmt;
use std::str::FromStr;

use chrono::Duration;
use serde::{Deserialize, Serialize};

use super::fault::ChannelFault;
use super::state::Signal;

/// How an attempt ended, as stored in `attempts.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Recorded before the request; not finished (yet).
    Started,
    Accepted,
    /// The channel took it but cannot say where it is (engine "ambiguo").
    Ambiguous,
    Failed,
    /// Never reached processing; tried again later.
    Retry,
    /// May have been processed; nobody knows.
    Uncertain,
    Conflict,
    /// The pre-send check stopped it: the request never left. Not an
    /// acknowledgement and not a message handed to the channel today.
    NotSent,
}

impl AttemptOutcome {
    pub const ALL: [AttemptOutcome; 8] = [
        Self::Started,
        Self::Accepted,
        Self::Ambiguous,
        Self::Failed,
        Self::Retry,
        Self::Uncertain,
        Self::Conflict,
        Self::NotSent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Accepted => "accepted",
            Self::Ambiguous => "ambiguous",
            Self::Failed => "failed",
            Self::Retry => "retry",
            Self::Uncertain => "uncertain",
            Self::Conflict => "conflict",
            Self::NotSent => "not_sent",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Whether the request may have reached the channel: every outcome but
    /// `retry` and `not_sent`, which prove it never got there. Such an
    /// attempt counts as a message handed over (daily cap) and may have
    /// produced the message the customer holds.
    pub fn may_have_reached_channel(self) -> bool {
        !matches!(self, Self::Retry | Self::NotSent)
    }

    /// The channel acknowledged the request: sending again could only
    /// duplicate it.
    pub fn acknowledged(self) -> bool {
        matches!(self, Self::Accepted | Self::Ambiguous)
    }

    /// The attempt ended in an error a technician reads (the Tablero's
    /// last error): refused, retried, uncertain or conflicting. A stopped
    /// request (`not_sent`) is the pre-send check doing its job.
    pub fn is_error(self) -> bool {
        matches!(self, Self::Failed | Self::Retry | Self::Uncertain | Self::Conflict)
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown attempt outcome {0:?} (expected one of started, accepted, ambiguous, failed, retry, uncertain, conflict, not_sent)"
)]
pub struct UnknownOutcome(pub String);

impl FromStr for AttemptOutcome {
    type Err = UnknownOutcome;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| UnknownOutcome(s.to_string()))
    }
}

/// The outcome of one attempt, as the dispatcher records it. Mirrors the
/// channel's classification without depending on the channel module.
#[derive(Debug, Clone)]
pub enum AttemptResult<'a> {
    /// The channel acknowledged it; `evidence` is the highest state it
    /// reported (`Accepted`, `Sent`, `Delivered`, `Read`, `Failed`) or
    /// `None` when it calls the command ambiguous.
    Acknowledged {
        evidence: Option<Signal>,
        command_id: Option<&'a str>,
        message_id: Option<&'a str>,
        http_status: Option<u16>,
        detail: Option<&'a str>,
    },
    Failed {
        code: &'a str,
        detail: &'a str,
        http_status: Option<u16>,
    },
    Retry {
        detail: &'a str,
        http_status: Option<u16>,
        retry_after_secs: Option<u64>,
    },
    Uncertain {
        detail: &'a str,
    },
    Conflict {
        detail: &'a str,
        http_status: Option<u16>,
    },
    /// The channel refused us, not the message (docs/design.md, "A
    /// channel that refuses us"): nothing reached it. Closed `not_sent`,
    /// the intention waits planned, and the attempt counts against nothing.
    ChannelDown {
        fault: ChannelFault,
        detail: &'a str,
        http_status: Option<u16>,
    },
}

impl AttemptResult<'_> {
    /// The stored outcome of the attempt this result finishes.
    pub fn outcome(&self) -> AttemptOutcome {
        match self {
            Self::Acknowledged { evidence: Some(_), .. } => AttemptOutcome::Accepted,
            Self::Acknowledged { evidence: None, .. } => AttemptOutcome::Ambiguous,
            Self::Failed { .. } => AttemptOutcome::Failed,
            Self::Retry { .. } => AttemptOutcome::Retry,
            Self::Uncertain { .. } => AttemptOutcome::Uncertain,
            Self::Conflict { .. } => AttemptOutcome::Conflict,
            Self::ChannelDown { .. } => AttemptOutcome::NotSent,
        }
    }

    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::Acknowledged { http_status, .. }
            | Self::Failed { http_status, .. }
            | Self::Retry { http_status, .. }
            | Self::Conflict { http_status, .. }
            | Self::ChannelDown { http_status, .. } => *http_status,
            Self::Uncertain { .. } => None,
        }
    }

    /// The channel's references: `(command_id, message_id)`.
    pub fn refs(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Self::Acknowledged {
                command_id, message_id, ..
            } => (*command_id, *message_id),
            _ => (None, None),
        }
    }

    /// The stored `error_code`: the channel's code, `ambiguo` for an
    /// ambiguous acknowledgement, `conflict` for a key conflict.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            Self::Acknowledged { evidence: None, .. } => Some("ambiguo"),
            Self::Failed { code, .. } => Some(code),
            Self::Conflict { .. } => Some("conflict"),
            Self::ChannelDown { fault, .. } => Some(fault.as_str()),
            _ => None,
        }
    }

    pub fn detail(&self) -> Option<&str> {
        match self {
            Self::Acknowledged { detail, .. } => *detail,
            Self::Failed { detail, .. }
            | Self::Retry { detail, .. }
            | Self::Uncertain { detail }
            | Self::Conflict { detail, .. }
            | Self::ChannelDown { detail, .. } => Some(detail),
        }
    }
}

/// What finishing an attempt did to the intention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finished {
    Accepted,
    Sent,
    Delivered,
    Read,
    Failed,
    Withdrawn,
    Uncertain,
    Retry,
    Review,
    /// The result arrived after the intention had moved on (lease expired
    /// and another worker or the reconciler took over): recorded only.
    Late,
    /// The pre-send check abandoned it: nothing was sent.
    NotSent,
}

/// Waits between tries, by try number: the `[policy] backoff_seconds` list,
/// its last entry repeating once the list runs out. The one backoff of
/// unavez: result retries and reconciliation tries both read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff(Vec<u64>);

const MAX_WAIT_SECS: i64 = 10 * 366 * 86_400;

/// A wait of `secs` seconds. A wait is added to a date: ten years is longer
/// than any policy or channel means, and keeps that sum far from overflowing.
pub fn wait_secs(secs: u64) -> Duration {
    Duration::seconds(i64::try_from(secs).unwrap_or(MAX_WAIT_SECS).min(MAX_WAIT_SECS))
}

impl Backoff {
    /// An empty list means one second between tries.
    pub fn new(seconds: Vec<u64>) -> Backoff {
        if seconds.is_empty() {
            Backoff(vec![1])
        } else {
            Backoff(seconds)
        }
    }

    /// The wait before try `index` + 1 (0-based: `wait(0)` follows the
    /// first try).
    pub fn wait(&self, index: usize) -> Duration {
        wait_secs(self.0[index.min(self.0.len() - 1)])
    }

    pub fn seconds(&self) -> &[u64] {
        &self.0
    }
}

/// When a try that never reached processing is tried again, and when a
/// person takes over instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub backoff: Backoff,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_round_trip_and_unknown_words_are_refused() {
        for o in AttemptOutcome::ALL {
            assert_eq!(AttemptOutcome::parse(o.as_str()), Some(o));
            assert_eq!(o.as_str().parse::<AttemptOutcome>(), Ok(o));
            assert_eq!(o.to_string(), o.as_str());
            assert_eq!(serde_json::to_string(&o).unwrap(), format!("\"{}\"", o.as_str()));
        }
        assert!("sending".parse::<AttemptOutcome>().is_err());
    }

    #[test]
    fn only_retry_and_not_sent_prove_the_request_never_arrived() {
        for o in AttemptOutcome::ALL {
            let never = matches!(o, AttemptOutcome::Retry | AttemptOutcome::NotSent);
            assert_eq!(o.may_have_reached_channel(), !never, "{o}");
            let ack = matches!(o, AttemptOutcome::Accepted | AttemptOutcome::Ambiguous);
            assert_eq!(o.acknowledged(), ack, "{o}");
        }
    }

    #[test]
    fn results_name_their_stored_outcome_code_and_refs() {
        let ack = AttemptResult::Acknowledged {
            evidence: Some(Signal::Accepted),
            command_id: Some("c1"),
            message_id: None,
            http_status: Some(202),
            detail: None,
        };
        assert_eq!(ack.outcome(), AttemptOutcome::Accepted);
        assert_eq!(
            (ack.refs(), ack.error_code(), ack.http_status()),
            ((Some("c1"), None), None, Some(202))
        );
        let amb = AttemptResult::Acknowledged {
            evidence: None,
            command_id: None,
            message_id: None,
            http_status: None,
            detail: Some("x"),
        };
        assert_eq!(
            (amb.outcome(), amb.error_code(), amb.detail()),
            (AttemptOutcome::Ambiguous, Some("ambiguo"), Some("x"))
        );
        let failed = AttemptResult::Failed {
            code: "E1",
            detail: "bad",
            http_status: Some(400),
        };
        assert_eq!(
            (failed.outcome(), failed.error_code()),
            (AttemptOutcome::Failed, Some("E1"))
        );
        let retry = AttemptResult::Retry {
            detail: "503",
            http_status: Some(503),
            retry_after_secs: None,
        };
        assert_eq!(
            (retry.outcome(), retry.error_code(), retry.refs()),
            (AttemptOutcome::Retry, None, (None, None))
        );
        let unknown = AttemptResult::Uncertain { detail: "timeout" };
        assert_eq!(
            (unknown.outcome(), unknown.http_status()),
            (AttemptOutcome::Uncertain, None)
        );
        let conflict = AttemptResult::Conflict {
            detail: "409",
            http_status: Some(409),
        };
        assert_eq!(
            (conflict.outcome(), conflict.error_code()),
            (AttemptOutcome::Conflict, Some("conflict"))
        );
        let down = AttemptResult::ChannelDown {
            fault: ChannelFault::CredentialRejected,
            detail: "HTTP 401",
            http_status: Some(401),
        };
        assert_eq!(
            (down.outcome(), down.error_code(), down.http_status()),
            (AttemptOutcome::NotSent, Some("credential_rejected"), Some(401))
        );
        assert!(!down.outcome().may_have_reached_channel());
    }

    #[test]
    fn the_backoff_repeats_its_last_wait_and_defaults_to_one_second() {
        let b = Backoff::new(vec![5, 60]);
        assert_eq!(b.wait(0), Duration::seconds(5));
        assert_eq!(b.wait(1), Duration::seconds(60));
        assert_eq!(b.wait(7), Duration::seconds(60));
        assert_eq!(Backoff::new(vec![]).wait(3), Duration::seconds(1));
        assert_eq!(Backoff::new(vec![u64::MAX]).wait(0), Duration::seconds(MAX_WAIT_SECS));
    }
}
