//! Why reprocessing does what it does with one intention, as typed facts
//! (issue 25 §6): the console and the CLI say it in the configured
//! language and the clinic's local time; [`Because`]'s `Display` is the
//! English line of logs and of `--json`'s `why`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::state::{CancelReason, IntentionState, ReplanRefused};

/// Why a reprocess item gets its action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "because", rename_all = "snake_case")]
pub enum Because {
    /// Planned, not due yet.
    NotDue {
        at: DateTime<Utc>,
    },
    /// Planned, waiting for its next try (backoff or deferral).
    NextTry {
        at: DateTime<Utc>,
    },
    /// An earlier attempt was acknowledged by the channel.
    Acknowledged,
    /// Due and still valid: dispatched now.
    Valid,
    /// The validity check closes it without sending.
    Closes {
        reason: CancelReason,
        explanation: String,
    },
    /// The validity check defers it (quiet hours, the recipient's cap).
    Deferred {
        until: DateTime<Utc>,
        why: String,
    },
    /// Claimed by a dispatcher.
    InFlight {
        owner: Option<String>,
        until: Option<DateTime<Utc>>,
    },
    /// Its outcome is unknown: reconciled with the channel.
    Uncertain,
    /// The channel already reported it: it keeps its evidence.
    Reported {
        state: IntentionState,
    },
    Cancelled {
        reason: Option<String>,
    },
    /// Failed or in review: a person decides.
    ForPerson {
        state: IntentionState,
        reason: Option<String>,
    },
    /// Failed before reaching the channel on each of its attempts.
    Replan {
        attempts: usize,
    },
    /// Failed, and it may have reached the channel (or has no attempt).
    FailedStays {
        refused: ReplanRefusal,
    },
}

/// [`ReplanRefused`], as a reprocess item keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplanRefusal {
    NotFailed,
    NoAttempt,
    /// Attempt `n` may have reached the channel.
    MayHaveReached(usize),
    HasChannelRefs,
}

impl From<&ReplanRefused> for ReplanRefusal {
    fn from(r: &ReplanRefused) -> Self {
        match r {
            ReplanRefused::NotFailed(_) => ReplanRefusal::NotFailed,
            ReplanRefused::NoAttempt => ReplanRefusal::NoAttempt,
            ReplanRefused::MayHaveReached(n) => ReplanRefusal::MayHaveReached(*n),
            ReplanRefused::HasChannelRefs => ReplanRefusal::HasChannelRefs,
        }
    }
}

impl Because {
    /// The code of this kind of reason (the `because` tag): what the
    /// console's word tables are keyed by.
    pub fn code(&self) -> &'static str {
        match self {
            Because::NotDue { .. } => "not_due",
            Because::NextTry { .. } => "next_try",
            Because::Acknowledged => "acknowledged",
            Because::Valid => "valid",
            Because::Closes { .. } => "closes",
            Because::Deferred { .. } => "deferred",
            Because::InFlight { .. } => "in_flight",
            Because::Uncertain => "uncertain",
            Because::Reported { .. } => "reported",
            Because::Cancelled { .. } => "cancelled",
            Because::ForPerson { .. } => "for_person",
            Because::Replan { .. } => "replan",
            Because::FailedStays { .. } => "failed_stays",
        }
    }

    /// One example of each kind, for the tests that check each has its
    /// words in every language.
    pub fn examples() -> Vec<Because> {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        vec![
            Because::NotDue { at },
            Because::NextTry { at },
            Because::Acknowledged,
            Because::Valid,
            Because::Closes {
                reason: CancelReason::Expired,
                explanation: "x".into(),
            },
            Because::Deferred {
                until: at,
                why: "x".into(),
            },
            Because::InFlight {
                owner: Some("w".into()),
                until: Some(at),
            },
            Because::Uncertain,
            Because::Reported {
                state: IntentionState::Read,
            },
            Because::Cancelled { reason: None },
            Because::ForPerson {
                state: IntentionState::Review,
                reason: None,
            },
            Because::Replan { attempts: 1 },
            Because::FailedStays {
                refused: ReplanRefusal::NoAttempt,
            },
        ]
    }
}

impl std::fmt::Display for ReplanRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplanRefusal::NotFailed => write!(f, "it is not failed"),
            ReplanRefusal::NoAttempt => write!(f, "it has no attempt: its failure did not come from sending"),
            ReplanRefusal::MayHaveReached(n) => write!(
                f,
                "attempt {n} may have reached the channel: a failed message that may have gone out never goes back"
            ),
            ReplanRefusal::HasChannelRefs => {
                write!(f, "the channel gave it a command or message id: it reached the channel")
            }
        }
    }
}

impl std::fmt::Display for Because {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let paren = |r: &Option<String>| r.as_deref().map(|x| format!(" ({x})")).unwrap_or_default();
        match self {
            Because::NotDue { at } => write!(f, "not due until {}", at.to_rfc3339()),
            Because::NextTry { at } => write!(
                f,
                "waiting for its next try at {} (backoff or deferral)",
                at.to_rfc3339()
            ),
            Because::Acknowledged => write!(
                f,
                "an earlier attempt was acknowledged by the channel: to review, never resent"
            ),
            Because::Valid => write!(f, "due and still valid: dispatch now"),
            Because::Closes { reason, explanation } => write!(f, "{}: {explanation}", reason.as_str()),
            Because::Deferred { until, why } => write!(f, "{why} (until {})", until.to_rfc3339()),
            Because::InFlight { owner, until } => write!(
                f,
                "claimed by {} until {}",
                owner.as_deref().unwrap_or("?"),
                until.map(|t| t.to_rfc3339()).unwrap_or_default()
            ),
            Because::Uncertain => write!(f, "outcome unknown: reconcile with the channel (no blind resend)"),
            Because::Reported { state } => write!(f, "the channel already reported {state}: keeps its evidence"),
            Because::Cancelled { reason } => {
                write!(f, "cancelled ({})", reason.as_deref().unwrap_or("no reason"))
            }
            Because::ForPerson { state, reason } => write!(f, "{state}: waits for a person{}", paren(reason)),
            Because::Replan { attempts } => write!(
                f,
                "failed, but none of its {attempts} attempt(s) reached the channel (it refused us or the request \
                 never left): back to planned"
            ),
            Because::FailedStays { refused } => write!(f, "failed: waits for a person ({refused})"),
        }
    }
}
