//! Claiming: which due intentions this dispatcher takes. The ledger returns
//! the due rows with every fact validity reads, in one set-based read;
//! this module decides each one — guarded (an earlier attempt was
//! acknowledged: never resent), cancelled, deferred or claimed — and hands
//! the ledger the rows to write, all in the caller's single
//! `BEGIN IMMEDIATE` transaction, so a batch costs one fsync and two
//! processes can never claim the same intention.

use chrono::{DateTime, Duration, Utc};

use crate::domain::claim::{self, Candidate};
use crate::domain::history::{self, Cause, HistorySignal, Record, Said};
use crate::domain::state::{IntentionState, Signal};
use crate::domain::validity::{self, ContactFacts, IntentionFacts, Rules, Validity};
use crate::store::{ClaimFacts, ClaimScope, ContactRow, IntentionRow, LedgerTx, NewAttempt, StoreError};
use unavez_ledger::api::NewClaim;

/// An intention this worker now holds, with its attempt already on disk.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub intention: IntentionRow,
    pub attempt_id: i64,
    pub attempt_n: i64,
    /// The commitment version validity was checked against.
    pub version_checked: i64,
    pub contact: Option<ContactRow>,
}

/// What a claim did with one candidate.
#[derive(Debug, Clone)]
pub enum ClaimDecision {
    Claimed(Box<Claimed>),
    Cancelled {
        id: i64,
        key: String,
        reason: String,
        explanation: String,
    },
    Deferred {
        id: i64,
        key: String,
        until: DateTime<Utc>,
        why: String,
    },
    /// The intention already has channel evidence on an earlier attempt:
    /// sending again would be a duplicate. Sent to review instead.
    Guarded {
        id: i64,
        key: String,
    },
}

/// Who claims, and under which rules.
#[derive(Debug, Clone, Copy)]
pub struct Claimant<'a> {
    pub owner: &'a str,
    pub channel: &'a str,
    pub lease: Duration,
    pub rules: &'a Rules,
}

pub use crate::domain::claim::Verdict;

/// The day start from which the daily cap counts, when there is a cap.
pub fn day_start(rules: &Rules, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    (rules.daily_cap > 0).then(|| validity::local_midnight(rules.tz, now))
}

/// What core's claim rule reads of one row, owned: the row's fields as
/// validity's facts.
struct Read {
    intention: IntentionFacts,
    contact: Option<ContactFacts>,
}

impl Read {
    fn of(f: &ClaimFacts) -> Read {
        let i = &f.intention;
        Read {
            intention: IntentionFacts {
                commitment_version: i.commitment_version,
                purpose: i.purpose(),
                category: i.category(),
                asks_confirmation: i.asks_confirmation,
                expires_at: i.expires_at,
                created_at: i.created_at,
            },
            contact: f.contact.as_ref().map(contact_facts),
        }
    }

    fn candidate<'a>(&'a self, f: &'a ClaimFacts) -> Candidate<'a> {
        Candidate {
            intention: &self.intention,
            commitment: &f.commitment,
            contact: self.contact.as_ref(),
            recipient: &f.intention.recipient,
            acknowledged: f.acknowledged,
            sent_today: f.sent_today,
            counted_today: f.counted_today,
        }
    }
}

fn contact_facts(k: &ContactRow) -> ContactFacts {
    ContactFacts {
        consent_marketing: k.consent_marketing,
        opt_out_marketing_at: k.opt_out_marketing_at,
        opt_out_transactional_at: k.opt_out_transactional_at,
    }
}

/// Validity of one intention from its facts, by core's rule
/// ([`crate::domain::claim::validity_of`]).
pub fn validity_of(f: &ClaimFacts, rules: &Rules, now: DateTime<Utc>) -> Validity {
    let read = Read::of(f);
    claim::validity_of(&read.candidate(f), 0, rules, now)
}

/// The verdicts for a batch, in order, by core's rule
/// ([`crate::domain::claim::decide_batch`]).
pub fn decide_batch(facts: &[ClaimFacts], rules: &Rules, now: DateTime<Utc>) -> Vec<Verdict> {
    let reads: Vec<Read> = facts.iter().map(Read::of).collect();
    let batch: Vec<Candidate<'_>> = reads.iter().zip(facts).map(|(r, f)| r.candidate(f)).collect();
    claim::decide_batch(&batch, rules, now)
}

/// Claims up to `limit` due intentions in `scope` for `who`.
pub fn claim_batch<L: LedgerTx + ?Sized>(
    tx: &L,
    scope: &ClaimScope,
    who: Claimant<'_>,
    limit: u32,
    now: DateTime<Utc>,
) -> Result<Vec<ClaimDecision>, StoreError> {
    // Due times and the lease on the ledger's clock (a shared ledger's
    // database decides, not this host).
    let now = tx.clock(now)?;
    let ids = tx.due_ids(scope, limit, now)?;
    let facts = tx.claim_facts(&ids, day_start(who.rules, now))?;
    let verdicts = decide_batch(&facts, who.rules, now);
    apply(tx, facts, verdicts, who, now)
}

/// Writes what the verdicts decided: the history rows (and state changes)
/// of the refusals in one call, the deferrals, then every claim — its
/// move, history row and attempt — in one set-based call.
fn apply<L: LedgerTx + ?Sized>(
    tx: &L,
    facts: Vec<ClaimFacts>,
    verdicts: Vec<Verdict>,
    who: Claimant<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<ClaimDecision>, StoreError> {
    let mut records: Vec<Record> = Vec::new();
    let mut deferrals = Vec::new();
    let mut decisions = Vec::with_capacity(facts.len());
    let mut claims = Vec::new();
    let mut held = Vec::new();
    for (f, v) in facts.into_iter().zip(verdicts) {
        match v {
            Verdict::Validity(Validity::Valid) => {
                claims.push(claim_of(&f, who, now)?);
                held.push((decisions.len(), f));
                // Replaced below, once the attempt has its id.
                decisions.push(ClaimDecision::Guarded {
                    id: 0,
                    key: String::new(),
                });
            }
            refused => {
                let (record, deferral, decision) = refusal(&f, refused, now);
                records.extend(record);
                deferrals.extend(deferral);
                decisions.push(decision);
            }
        }
    }
    tx.apply_records(&records)?;
    tx.set_next_attempt(&deferrals, now)?;
    let attempt_ids = tx.start_claims(&claims)?;
    for ((slot, f), (claim, attempt_id)) in held.into_iter().zip(claims.into_iter().zip(attempt_ids)) {
        decisions[slot] = ClaimDecision::Claimed(Box::new(claimed(f, &claim, attempt_id, who, now)));
    }
    Ok(decisions)
}

/// A deferred intention and when it is due again.
type Deferral = (i64, Option<DateTime<Utc>>);

/// The history row (none when the state machine refuses the signal), the
/// deferral and the decision of a candidate that is not claimed (guarded,
/// cancelled or deferred).
fn refusal(f: &ClaimFacts, v: Verdict, now: DateTime<Utc>) -> (Option<Record>, Option<Deferral>, ClaimDecision) {
    let (id, version) = (f.intention.id, f.commitment.version);
    let key = f.intention.key.clone();
    let said = |s: HistorySignal| Said::new(s, Cause::Dispatcher);
    let move_to = |signal, said| history::on_signal(id, IntentionState::Planned, signal, said, now).1;
    match v {
        Verdict::Guard => {
            let note = "planned again but an earlier attempt was acknowledged by the channel: not resending";
            let r = move_to(Signal::NeedsReview, said(HistorySignal::NeedsReview).note(note));
            (r, None, ClaimDecision::Guarded { id, key })
        }
        Verdict::Validity(Validity::Cancel { reason, explanation }) => {
            let s = said(HistorySignal::Cancel)
                .evidence("validity_at_claim")
                .note(explanation.clone())
                .version(version);
            let r = move_to(Signal::Cancel(reason), s);
            let reason = reason.as_str().to_string();
            let d = ClaimDecision::Cancelled {
                id,
                key,
                reason,
                explanation,
            };
            (r, None, d)
        }
        Verdict::Validity(Validity::Defer { until, why }) => {
            let note = format!("{why} (until {})", until.to_rfc3339());
            let s = said(HistorySignal::Deferred)
                .evidence("validity_at_claim")
                .note(note)
                .version(version);
            // Deferred again to the very instant it was already deferred
            // to: the same deferral, already in the history (a clock
            // that does not move forward must not write a row per poll).
            let again = f.intention.next_attempt_at == Some(until);
            let r = (!again).then(|| history::note(id, IntentionState::Planned, s, now));
            (
                r,
                Some((id, Some(until))),
                ClaimDecision::Deferred { id, key, until, why },
            )
        }
        Verdict::Validity(Validity::Valid) => unreachable!("a valid candidate is claimed, not refused"),
    }
}

/// The claim of a valid candidate: planned → dispatching under this
/// claimant's lease, with its attempt.
fn claim_of(f: &ClaimFacts, who: Claimant<'_>, now: DateTime<Utc>) -> Result<NewClaim, StoreError> {
    let (id, version) = (f.intention.id, f.commitment.version);
    let said = Said::new(HistorySignal::Claim, Cause::Dispatcher)
        .note(who.owner)
        .version(version);
    let record = history::on_signal(id, IntentionState::Planned, Signal::Claim, said, now)
        .1
        .filter(|r| r.applied)
        // Only a planned intention is selected, inside this same
        // transaction; anything else is a bug worth surfacing.
        .ok_or_else(|| StoreError::Corrupt {
            table: "intentions",
            detail: format!("#{id} could not be claimed from {}", f.intention.state),
        })?;
    let n = f.intention.attempt_count + 1;
    Ok(NewClaim {
        record,
        attempt: NewAttempt {
            intention_id: id,
            n,
            worker: who.owner.to_string(),
            channel: who.channel.to_string(),
            version_checked: version,
            lease: Some((who.owner.to_string(), now + who.lease)),
            at: now,
        },
    })
}

/// The claimed intention as the claim's writes left its row, without
/// reading it again.
fn claimed(f: ClaimFacts, claim: &NewClaim, attempt_id: i64, who: Claimant<'_>, now: DateTime<Utc>) -> Claimed {
    let mut intention = f.intention;
    let n = claim.attempt.n;
    intention.state = IntentionState::Dispatching;
    intention.state_reason = Some(who.owner.to_string());
    intention.state_changed_at = now;
    intention.lease_owner = Some(who.owner.to_string());
    intention.lease_until = claim.attempt.lease.as_ref().map(|l| l.1);
    intention.attempt_count = n;
    intention.next_attempt_at = None;
    Claimed {
        intention,
        attempt_id,
        attempt_n: n,
        version_checked: f.commitment.version,
        contact: f.contact,
    }
}

/// Validity of `i` against the commitment and contact as stored now,
/// without writing anything (the reprocess dry run, a repeat, a released
/// claim). Returns the verdict, the commitment version evaluated and the
/// contact.
pub fn evaluate<L: LedgerTx + ?Sized>(
    tx: &L,
    i: &IntentionRow,
    rules: &Rules,
    now: DateTime<Utc>,
) -> Result<(Validity, i64, Option<ContactRow>), StoreError> {
    let f = tx
        .claim_facts(&[i.id], day_start(rules, now))?
        .pop()
        .ok_or_else(|| StoreError::NoIntention(format!("#{}", i.id)))?;
    Ok((validity_of(&f, rules, now), f.commitment.version, f.contact))
}

#[cfg(test)]
#[path = "claim_tests.rs"]
pub(crate) mod tests;
