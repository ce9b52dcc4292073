//! The pre-send re-check's rule: the last look at the ledger immediately
//! before a request leaves for the channel. Validity was checked when the
//! attempt was recorded, but a claimed message can wait for the runtime, a
//! slow store or a free connection; meanwhile the appointment may move or
//! the lease may pass to someone else. [`moved`] compares what the ledger
//! holds now with what the attempt was checked against (the fencing token
//! of a send). The app reads the facts; the model checker (crates/model)
//! calls the same rule.

use chrono::{DateTime, Utc};

use super::key::Purpose;
use super::state::IntentionState;

/// Who holds an attempt that is about to be sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Holder {
    /// A dispatcher's claim: the intention is `dispatching` under this
    /// lease owner, and the lease has not run out.
    Lease(String),
    /// A reconciliation repeat: the intention is still `uncertain`.
    Reconciler,
}

/// What the pre-send check reads, as of right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresendFacts {
    /// The attempt's number (for the explanation).
    pub n: i64,
    pub attempt_open: bool,
    /// The commitment version the attempt's validity check read.
    pub version_checked: i64,
    pub state: IntentionState,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub purpose: Purpose,
    pub commitment_version: i64,
    pub commitment_cancelled: bool,
}

/// Why the request must not leave, or `None` when nothing moved since its
/// validity check: the commitment's version and cancellation, and the
/// holder's own claim on the intention and the attempt.
pub fn moved(f: &PresendFacts, holder: &Holder, now: DateTime<Utc>) -> Option<String> {
    if !f.attempt_open {
        return Some(format!("attempt {} was closed meanwhile", f.n));
    }
    match holder {
        Holder::Lease(owner) => {
            if f.state != IntentionState::Dispatching {
                return Some(format!("the intention is {} now, no longer dispatching", f.state));
            }
            if f.lease_owner.as_deref() != Some(owner.as_str()) {
                return Some(format!(
                    "the lease is held by {} now",
                    f.lease_owner.as_deref().unwrap_or("nobody")
                ));
            }
            if f.lease_until.is_none_or(|t| t <= now) {
                return Some("the lease ran out before the request could leave".into());
            }
        }
        Holder::Reconciler => {
            if f.state != IntentionState::Uncertain {
                return Some(format!("the intention is {} now, no longer uncertain", f.state));
            }
        }
    }
    if f.commitment_version != f.version_checked {
        return Some(format!(
            "the commitment moved from v{} to v{} after the validity check",
            f.version_checked, f.commitment_version
        ));
    }
    if f.commitment_cancelled && f.purpose != Purpose::Cancellation {
        return Some("the commitment was cancelled after the validity check".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use IntentionState as S;
    use chrono::Duration;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn facts() -> PresendFacts {
        PresendFacts {
            n: 1,
            attempt_open: true,
            version_checked: 2,
            state: S::Dispatching,
            lease_owner: Some("w1".into()),
            lease_until: Some(now() + Duration::seconds(30)),
            purpose: Purpose::Booking,
            commitment_version: 2,
            commitment_cancelled: false,
        }
    }

    fn lease() -> Holder {
        Holder::Lease("w1".into())
    }

    #[track_caller]
    fn stops(f: PresendFacts, holder: Holder, what: &str) {
        match moved(&f, &holder, now()) {
            Some(why) => assert!(why.contains(what), "{why:?} should mention {what:?}"),
            None => panic!("expected a stop mentioning {what:?}"),
        }
    }

    #[test]
    fn a_claim_whose_world_did_not_move_goes() {
        assert_eq!(moved(&facts(), &lease(), now()), None);
    }

    #[test]
    fn a_moved_commitment_or_a_lost_lease_stops_the_send() {
        let f = facts;
        stops(
            PresendFacts {
                commitment_version: 3,
                ..f()
            },
            lease(),
            "moved from v2 to v3",
        );
        stops(
            PresendFacts {
                commitment_cancelled: true,
                ..f()
            },
            lease(),
            "cancelled",
        );
        stops(
            PresendFacts {
                lease_owner: Some("w2".into()),
                ..f()
            },
            lease(),
            "held by w2",
        );
        stops(
            PresendFacts {
                lease_owner: None,
                ..f()
            },
            lease(),
            "held by nobody",
        );
        stops(
            PresendFacts {
                lease_until: Some(now()),
                ..f()
            },
            lease(),
            "lease ran out",
        );
        stops(
            PresendFacts {
                lease_until: None,
                ..f()
            },
            lease(),
            "lease ran out",
        );
        stops(
            PresendFacts {
                attempt_open: false,
                ..f()
            },
            lease(),
            "closed meanwhile",
        );
    }

    #[test]
    fn a_lease_holds_only_while_dispatching() {
        for s in S::ALL.into_iter().filter(|s| *s != S::Dispatching) {
            stops(PresendFacts { state: s, ..facts() }, lease(), "no longer dispatching");
        }
    }

    #[test]
    fn a_cancellation_notice_still_goes_once_the_commitment_is_cancelled() {
        let f = PresendFacts {
            commitment_cancelled: true,
            purpose: Purpose::Cancellation,
            ..facts()
        };
        assert_eq!(moved(&f, &lease(), now()), None);
        // A new version still stops it: its text describes the old one.
        stops(
            PresendFacts {
                commitment_version: 3,
                ..f
            },
            lease(),
            "moved from v2 to v3",
        );
    }

    #[test]
    fn a_repeat_needs_the_intention_still_uncertain() {
        let f = PresendFacts {
            state: S::Uncertain,
            lease_owner: None,
            lease_until: None,
            ..facts()
        };
        assert_eq!(moved(&f, &Holder::Reconciler, now()), None);
        for s in S::ALL.into_iter().filter(|s| *s != S::Uncertain) {
            stops(
                PresendFacts { state: s, ..f.clone() },
                Holder::Reconciler,
                "no longer uncertain",
            );
        }
        stops(
            PresendFacts {
                commitment_version: 3,
                ..f.clone()
            },
            Holder::Reconciler,
            "moved",
        );
        stops(
            PresendFacts {
                attempt_open: false,
                ..f
            },
            Holder::Reconciler,
            "closed meanwhile",
        );
    }
}
