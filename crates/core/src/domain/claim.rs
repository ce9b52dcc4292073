//! The claim's rule: which due candidates a dispatcher takes, in one
//! batch. The app reads each candidate's facts in one set-based query and
//! writes what [`decide_batch`] decides; the model checker (crates/model)
//! calls the same rule.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::validity::{self, CommitmentFacts, ContactFacts, IntentionFacts, Rules, Validity};

/// One due candidate, as the claim reads it (borrowed from the ledger's
/// row, so a batch copies nothing).
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub intention: &'a IntentionFacts,
    pub commitment: &'a CommitmentFacts,
    pub contact: Option<&'a ContactFacts>,
    /// Who the message goes to: the daily cap counts per recipient.
    pub recipient: &'a str,
    /// An earlier attempt was acknowledged by the channel.
    pub acknowledged: bool,
    /// Other intentions to the same recipient with an attempt that may have
    /// reached the channel today (0 without a cap).
    pub sent_today: u32,
    /// This intention itself has such an attempt today (a repeat does not
    /// count twice against the cap).
    pub counted_today: bool,
}

/// The verdict for one candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An earlier attempt was acknowledged: never sent again, to review.
    Guard,
    Validity(Validity),
}

/// Validity of one candidate; `extra_today` adds messages to the same
/// recipient claimed earlier in the same batch.
pub fn validity_of(c: &Candidate<'_>, extra_today: u32, rules: &Rules, now: DateTime<Utc>) -> Validity {
    validity::check(
        c.intention,
        c.commitment,
        c.contact,
        c.sent_today + extra_today,
        rules,
        now,
    )
}

/// The verdicts for a batch, in order. A candidate claimed earlier in the
/// batch counts against the daily cap of the later ones to the same
/// recipient, exactly as if they had been claimed one by one.
pub fn decide_batch(batch: &[Candidate<'_>], rules: &Rules, now: DateTime<Utc>) -> Vec<Verdict> {
    let mut claimed_to: HashMap<&str, u32> = HashMap::new();
    batch
        .iter()
        .map(|c| {
            // Belt and braces: an earlier attempt the channel acknowledged
            // means the message may be out; a new send could only duplicate it.
            if c.acknowledged {
                return Verdict::Guard;
            }
            let v = validity_of(c, claimed_to.get(c.recipient).copied().unwrap_or(0), rules, now);
            if v == Validity::Valid && !c.counted_today {
                *claimed_to.entry(c.recipient).or_default() += 1;
            }
            Verdict::Validity(v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::commitment::CommitmentKind;
    use crate::domain::key::Purpose;
    use crate::domain::state::CancelReason;
    use crate::templates::Category;
    use chrono_tz::America::Lima;

    fn now() -> DateTime<Utc> {
        // 2026-11-28 15:00 UTC, 10:00 in Lima: no quiet hours.
        DateTime::from_timestamp(1_795_878_000, 0).unwrap()
    }

    fn intention() -> IntentionFacts {
        IntentionFacts {
            commitment_version: 1,
            purpose: Purpose::Booking,
            category: Category::Transactional,
            asks_confirmation: false,
            expires_at: None,
            created_at: now() - chrono::Duration::hours(1),
        }
    }

    fn commitment(cancelled: bool) -> CommitmentFacts {
        CommitmentFacts {
            kind: CommitmentKind::Appointment,
            cancelled,
            version: 1,
            starts_at: Some(now() + chrono::Duration::days(2)),
            confirmed_at: None,
            manual_contact_at: None,
        }
    }

    fn rules(daily_cap: u32) -> Rules {
        Rules {
            quiet_hours: None,
            daily_cap,
            tz: Lima,
        }
    }

    fn candidate<'a>(i: &'a IntentionFacts, c: &'a CommitmentFacts, to: &'a str) -> Candidate<'a> {
        Candidate {
            intention: i,
            commitment: c,
            contact: None,
            recipient: to,
            acknowledged: false,
            sent_today: 0,
            counted_today: false,
        }
    }

    fn deferred(v: &Verdict) -> bool {
        matches!(v, Verdict::Validity(Validity::Defer { .. }))
    }

    #[test]
    fn an_acknowledged_earlier_attempt_is_guarded_whatever_validity_says() {
        let (i, c) = (intention(), commitment(true));
        let batch = [Candidate {
            acknowledged: true,
            ..candidate(&i, &c, "+51")
        }];
        assert_eq!(decide_batch(&batch, &rules(0), now()), vec![Verdict::Guard]);
    }

    #[test]
    fn each_candidate_gets_validity_on_its_own_facts() {
        let (i, open, cancelled) = (intention(), commitment(false), commitment(true));
        let batch = [candidate(&i, &open, "+51"), candidate(&i, &cancelled, "+52")];
        let v = decide_batch(&batch, &rules(0), now());
        assert_eq!(v[0], Verdict::Validity(Validity::Valid));
        assert!(matches!(
            &v[1],
            Verdict::Validity(Validity::Cancel {
                reason: CancelReason::CommitmentCancelled,
                ..
            })
        ));
    }

    #[test]
    fn a_claim_earlier_in_the_batch_counts_against_the_cap_of_later_ones() {
        let (i, c) = (intention(), commitment(false));
        let batch = [
            candidate(&i, &c, "+51"),
            candidate(&i, &c, "+51"),
            candidate(&i, &c, "+52"),
        ];
        let v = decide_batch(&batch, &rules(1), now());
        assert_eq!(v[0], Verdict::Validity(Validity::Valid));
        assert!(deferred(&v[1]), "{v:?}");
        assert_eq!(v[2], Verdict::Validity(Validity::Valid), "another recipient");
        // Without a cap nothing is deferred.
        assert!(
            decide_batch(&batch, &rules(0), now())
                .iter()
                .all(|v| *v == Verdict::Validity(Validity::Valid))
        );
    }

    #[test]
    fn a_repeat_already_counted_today_does_not_count_twice() {
        let (i, c) = (intention(), commitment(false));
        let batch = [
            Candidate {
                counted_today: true,
                ..candidate(&i, &c, "+51")
            },
            candidate(&i, &c, "+51"),
        ];
        let v = decide_batch(&batch, &rules(1), now());
        assert_eq!(v, vec![Verdict::Validity(Validity::Valid); 2]);
        // What the ledger already counted does.
        let sent = [Candidate {
            sent_today: 1,
            ..candidate(&i, &c, "+51")
        }];
        assert!(deferred(&decide_batch(&sent, &rules(1), now())[0]));
    }
}
