//! The model's calls into `unavez-core`: every decision the actors take is
//! one of these, with the ledger's rows turned into core's facts.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::thread::LocalKey;

use chrono::{DateTime, Duration, Utc};
use unavez_core::domain::attempt::{AttemptResult, Backoff, RetryPolicy};
use unavez_core::domain::claim::{self, Candidate, Verdict};
use unavez_core::domain::commitment::CommitmentKind;
use unavez_core::domain::finish::{self, FinishFacts};
use unavez_core::domain::guard::{self, CommitmentState, Facts, PendingResend, ResendAsk, ResendFacts};
use unavez_core::domain::history::Cause;
use unavez_core::domain::operator::Role;
use unavez_core::domain::presend::{self, Holder, PresendFacts};
use unavez_core::domain::reconcile::{self, Step};
use unavez_core::domain::recovery::{self, LeaseFacts, ToReview};
use unavez_core::domain::state::{IntentionState, ReviewReason, Signal, Transition, transition};
use unavez_core::domain::validity::{self, CommitmentFacts, IntentionFacts, Rules, Validity};
use unavez_core::templates::Category;

use crate::world::{Attempt, Commitment, Intention, Lease, Op, World, intern, purpose};

/// The model's one instant: time does not pass in the model, leases run
/// out by an explicit event instead.
pub fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).expect("a fixed instant")
}

/// Core's answer for `key`, remembered per thread. `compute` is a plain
/// `fn` (it captures nothing), so core's facts are built from `key` alone
/// and the answer is a function of the key: core is pure (no clock, no
/// I/O), and remembering a pure function's answers changes no decision.
/// The checker asks core the same few hundred questions millions of times;
/// building the facts (strings, vectors) and deciding again each time was
/// most of its time.
fn remembered<K: Hash + Eq, V: Clone>(cache: &'static LocalKey<Cache<K, V>>, key: K, compute: fn(&K) -> V) -> V {
    cache.with(|c| {
        if let Some(v) = c.borrow().get(&key) {
            return v.clone();
        }
        let v = compute(&key);
        c.borrow_mut().insert(key, v.clone());
        v
    })
}

type Cache<K, V> = RefCell<HashMap<K, V, ahash::RandomState>>;

/// A reason in a cache key, compared and hashed by address: reasons are
/// [`intern`]ed, so one text is one address (and two addresses at worst
/// ask core twice, never give a wrong answer).
#[derive(Debug, Clone, Copy)]
struct Text(&'static str);

impl PartialEq for Text {
    fn eq(&self, o: &Text) -> bool {
        std::ptr::eq(self.0, o.0)
    }
}

impl Eq for Text {}

impl Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.0.as_ptr() as usize).hash(h);
    }
}

thread_local! {
    static VALIDITY: Cache<ValidityKey, Validity> = RefCell::default();
    static CLAIM: Cache<ValidityKey, Verdict> = RefCell::default();
    static PRESEND: Cache<PresendKey, Option<String>> = RefCell::default();
    static FINISH: Cache<FinishKey, (Option<IntentionState>, Option<&'static str>)> = RefCell::default();
    static EXPIRE: Cache<ExpireKey, bool> = RefCell::default();
    static GUARD: Cache<GuardKey, bool> = RefCell::default();
}

/// What validity reads of a row and the commitment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ValidityKey {
    planned_version: u8,
    purpose: u8,
    commitment: Commitment,
}

impl ValidityKey {
    fn of(i: &Intention, c: Commitment) -> ValidityKey {
        ValidityKey {
            planned_version: i.planned_version,
            purpose: i.purpose,
            commitment: c,
        }
    }

    /// Core's facts.
    fn facts(&self) -> (IntentionFacts, CommitmentFacts) {
        (
            IntentionFacts {
                commitment_version: self.planned_version.into(),
                purpose: purpose(self.purpose),
                category: Category::Transactional,
                asks_confirmation: false,
                expires_at: None,
                created_at: now() - Duration::hours(1),
            },
            CommitmentFacts {
                kind: CommitmentKind::Appointment,
                cancelled: self.commitment.cancelled,
                version: self.commitment.version.into(),
                starts_at: Some(now() + Duration::days(2)),
                confirmed_at: None,
                manual_contact_at: None,
            },
        )
    }
}

/// No quiet hours and no daily cap at the model's instant.
const RULES: Rules = Rules {
    quiet_hours: None,
    daily_cap: 0,
    tz: chrono_tz::UTC,
};

/// Core's validity verdict for `i` against the commitment `c`.
pub fn validity(i: &Intention, c: Commitment) -> Validity {
    remembered(&VALIDITY, ValidityKey::of(i, c), |k| {
        let (intention, commitment) = k.facts();
        validity::check(&intention, &commitment, None, 0, &RULES, now())
    })
}

/// Core's claim rule (`claim::decide_batch`) on a batch of one row: the
/// model's dispatchers claim one row at a time.
pub fn claim(i: &Intention, c: Commitment) -> Verdict {
    remembered(&CLAIM, ValidityKey::of(i, c), |k| {
        let (intention, commitment) = k.facts();
        let candidate = Candidate {
            intention: &intention,
            commitment: &commitment,
            contact: None,
            recipient: "+51987654321",
            // The model claims `planned` rows: an attempt the channel
            // acknowledged would have moved its row to `accepted` or beyond.
            acknowledged: false,
            sent_today: 0,
            counted_today: false,
        };
        let mut verdicts = claim::decide_batch(&[candidate], &RULES, now());
        verdicts.pop().expect("one verdict per candidate")
    })
}

/// Core's reconciler choice (`reconcile::decide`) for an uncertain row,
/// with the engine's capabilities. The model's uncertain rows never carry
/// a command id (an answer that names the command is evidence: the row is
/// `accepted`), the engine never answers `ambiguous`, time does not pass,
/// and the fault budget bounds the tries far below the policy's 20.
pub fn reconcile_step() -> Step {
    let facts = reconcile::Facts {
        idempotent_keys: true,
        command_lookup: true,
        command_known: false,
        ambiguous: false,
        since: now(),
        tries: 0,
    };
    let limits = reconcile::Limits {
        uncertain_review: Duration::minutes(30),
        max_tries: 20,
    };
    reconcile::decide(&facts, &limits, now())
}

/// What the pre-send re-check reads of a row, the commitment, and who
/// sends (a dispatcher, or `None`: the reconciler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PresendKey {
    attempt: Option<Attempt>,
    lease: Option<Lease>,
    state: IntentionState,
    purpose: u8,
    commitment: Commitment,
    holder: Option<u8>,
}

/// Core's pre-send re-check of row `i` for dispatcher `holder` (`None`:
/// the reconciler).
pub fn presend(w: &World, i: usize, holder: Option<usize>) -> Option<String> {
    let row = &w.intentions[i];
    let key = PresendKey {
        attempt: row.attempt,
        lease: row.lease,
        state: row.state,
        purpose: row.purpose,
        commitment: w.commitment,
        holder: holder.map(|d| d as u8),
    };
    remembered(&PRESEND, key, |k| {
        let Some(attempt) = k.attempt else {
            return Some("no open attempt".into());
        };
        let (owner, until) = match k.lease {
            Some(l) => (
                Some(owner_name(l.owner.into())),
                Some(if l.live { now() + Duration::seconds(30) } else { now() }),
            ),
            None => (None, None),
        };
        let holder = match k.holder {
            Some(d) => Holder::Lease(owner_name(d.into())),
            None => Holder::Reconciler,
        };
        presend::moved(
            &PresendFacts {
                n: attempt.n.into(),
                attempt_open: true,
                version_checked: attempt.version_checked.into(),
                state: k.state,
                lease_owner: owner,
                lease_until: until,
                purpose: purpose(k.purpose),
                commitment_version: k.commitment.version.into(),
                commitment_cancelled: k.commitment.cancelled,
            },
            &holder,
            now(),
        )
    })
}

pub fn owner_name(d: usize) -> String {
    format!("dispatcher-{d}")
}

/// What `finish::decide` reads of a recorded answer and its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FinishKey {
    row: u8,
    attempt: Option<Attempt>,
    state: IntentionState,
    planned_version: u8,
    current_version: u8,
    reconciler: bool,
    held: bool,
    accepted: bool,
}

/// Core's decision on a recorded answer (`finish::decide`): an accepted
/// answer is evidence, a timeout makes a row in flight uncertain; a late
/// answer for a row that moved on changes nothing it must not. The state
/// it leaves the row in, when it moved, and the reason it gives.
pub fn finish(
    w: &World,
    i: usize,
    reconciler: bool,
    held: bool,
    accepted: bool,
) -> (Option<IntentionState>, Option<&'static str>) {
    let row = &w.intentions[i];
    let key = FinishKey {
        row: i as u8,
        attempt: row.attempt,
        state: row.state,
        planned_version: row.planned_version,
        current_version: w.commitment.version,
        reconciler,
        held,
        accepted,
    };
    remembered(&FINISH, key, |k| {
        let facts = FinishFacts {
            attempt_id: k.row.into(),
            intention_id: k.row.into(),
            n: k.attempt.map_or(1, |a| a.n.into()),
            version_checked: k.attempt.map_or(k.planned_version, |a| a.version_checked).into(),
            // A lease that ran out closed the attempt: this answer is late.
            attempt_ended: !k.held || k.attempt.is_none(),
            state: k.state,
            attempt_count: 1,
            unsent: 0,
            intention_version: k.planned_version.into(),
            current_version: k.current_version.into(),
        };
        let result = if k.accepted {
            AttemptResult::Acknowledged {
                evidence: Some(Signal::Accepted),
                command_id: Some("command"),
                message_id: None,
                http_status: Some(202),
                detail: None,
            }
        } else {
            AttemptResult::Uncertain { detail: "timeout" }
        };
        let cause = if k.reconciler {
            Cause::Reconciler
        } else {
            Cause::Dispatcher
        };
        let retry = RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::new(vec![60]),
        };
        let plan = finish::decide(&facts, &result, cause, &retry, now());
        match plan.record {
            Some(r) if r.applied && r.to != k.state => (Some(r.to), r.reason.map(intern)),
            _ => (None, None),
        }
    })
}

/// Core's transition, as the state machine applies it.
pub fn apply(from: IntentionState, signal: Signal) -> Option<IntentionState> {
    match transition(from, signal) {
        Transition::Move(to) => Some(to),
        Transition::Record(_) | Transition::Refuse => None,
    }
}

/// What lease recovery reads of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ExpireKey {
    row: u8,
    state: IntentionState,
    lease: Option<Lease>,
    attempt: Option<Attempt>,
}

/// Core's lease recovery: whether an expired lease makes row `i` uncertain.
pub fn expire(i: usize, row: &Intention) -> bool {
    let key = ExpireKey {
        row: i as u8,
        state: row.state,
        lease: row.lease,
        attempt: row.attempt,
    };
    remembered(&EXPIRE, key, |k| {
        let id = i64::from(k.row);
        let facts = LeaseFacts {
            intention_id: id,
            state: k.state,
            owner: k.lease.map(|l| owner_name(l.owner.into())),
            open_attempts: k.attempt.map(|a| i64::from(a.n)).into_iter().collect(),
        };
        recovery::expire_leases(&[facts], now()).moved().contains(&id)
    })
}

/// Core's review row for a repeat the validity rule refused: the reason
/// a person sees, when the machine takes it.
pub fn refused_repeat(i: usize, row: &Intention, verdict: &Validity, version: u8) -> Option<&'static str> {
    let Validity::Cancel { reason, explanation } = verdict else {
        return None;
    };
    let why = ToReview::RefusedRepeat {
        reason: ReviewReason::for_refused_repeat(*reason),
        version: version.into(),
    };
    let r = recovery::reconcile_review(i as i64, row.state, why, explanation, now())?;
    r.applied
        .then(|| intern(r.reason.unwrap_or_else(|| "needs_review".into())))
}

/// What the guard reads of a row, its family and the commitment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct GuardKey {
    op: Op,
    family: u8,
    state: IntentionState,
    reason: Option<Text>,
    cancelled: bool,
    original: IntentionState,
    original_version: u8,
    current_version: u8,
    pending: bool,
    resends: u8,
    max_per_day: u32,
}

impl GuardKey {
    fn of(w: &World, i: usize, op: Op, max_per_day: u32) -> GuardKey {
        let row = &w.intentions[i];
        let family = || w.rows().iter().filter(|r| r.family == row.family);
        let original = &w.intentions[usize::from(row.family)];
        GuardKey {
            op,
            family: row.family,
            state: row.state,
            reason: row.reason.map(Text),
            cancelled: w.commitment.cancelled,
            original: original.state,
            original_version: original.planned_version,
            current_version: w.commitment.version,
            pending: family().skip(1).any(|r| {
                matches!(
                    r.state,
                    IntentionState::Planned | IntentionState::Dispatching | IntentionState::Uncertain
                )
            }),
            resends: (family().count() - 1) as u8,
            max_per_day,
        }
    }

    /// Core's facts.
    fn facts(&self) -> Facts {
        Facts {
            role: Role::Supervisor,
            state: self.state,
            state_reason: self.reason.map(|r| r.0.to_string()),
            commitment: if self.cancelled {
                CommitmentState::Cancelled
            } else {
                CommitmentState::Open
            },
            appointment: true,
            resend: ResendFacts {
                original: self.original,
                planned_version: self.original_version.into(),
                current_version: self.current_version.into(),
                expired: false,
                pending: self.pending.then(|| PendingResend {
                    key: format!("{}:reenvio:1", self.family),
                    authorized_by: Some("supervisor".into()),
                    authorized_at: now().fixed_offset(),
                }),
                authorized_today: self.resends.into(),
                max_per_day: self.max_per_day,
            },
            ask: ResendAsk::None,
        }
    }
}

/// Whether the guard lets a supervisor take `op` on row `i`
/// (`guard::{cancel, verify, authorize_resend}`).
pub fn guard(w: &World, i: usize, op: Op, max_per_day: u32) -> bool {
    remembered(&GUARD, GuardKey::of(w, i, op, max_per_day), |k| {
        let f = k.facts();
        match k.op {
            Op::Cancel => guard::cancel(&f, false),
            Op::Verify => guard::verify(&f),
            Op::Resend => guard::authorize_resend(&f),
        }
        .is_ok()
    })
}

/// The monotonic rule's check on a written change: evidence never moves
/// backwards. The explicit exceptions in core: a release (nothing reached
/// the channel) returns `dispatching` to `planned`;
/// [`unavez_core::domain::state::replan_failed`] and reopening a handled
/// case are operator actions the model does not take.
pub fn backward(from: IntentionState, to: IntentionState) -> bool {
    use IntentionState as S;
    if from == to {
        return false;
    }
    if from.is_terminal() {
        return true;
    }
    if (from, to) == (S::Dispatching, S::Planned) {
        return false;
    }
    matches!((from.rank(), to.rank()), (Some(a), Some(b)) if b < a)
}
