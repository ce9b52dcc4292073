//! The model's state: the ledger's rows that matter (commitment,
//! intentions, leases, open attempts, audit), the engine's commands and
//! webhooks in flight, each process's step, and the fault budget left.
//!
//! The state is `Copy`: fixed arrays and byte-sized fields, no `Vec` and
//! no `String`, so a step is a copy and hashing a state is a few dozen
//! bytes. The checker explores tens of millions of steps; an allocating
//! state made the default budget run out of memory and time.
//! [`World`] implements [`Representative`]: dispatchers are
//! interchangeable, and so are supervisors (symmetry reduction).

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, OnceLock};

use stateright::Representative;
use unavez_core::domain::key::Purpose;
use unavez_core::domain::state::IntentionState;

/// Room for the deeper bounds: 3 intentions and a resend per supervisor.
pub const MAX_ROWS: usize = 6;
pub const MAX_DISPATCHERS: usize = 4;
pub const MAX_SUPERVISORS: usize = 3;

/// How many of each actor and fault; [`Bounds::default`] is the issue's
/// default budget, run by `cargo test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub dispatchers: usize,
    /// Intentions on the one commitment (a booking notice, a reminder…).
    pub intentions: usize,
    pub crashes_per_dispatcher: u8,
    pub lost_answers: u8,
    pub duplicated_webhooks: u8,
    pub reordered_webhooks: u8,
    /// Leases that run out while their holder is alive but frozen.
    pub lease_expiries: u8,
    pub changes: u8,
    pub cancellations: u8,
    pub supervisors: usize,
    /// `[policy] max_resends_per_day`.
    pub max_resends: u32,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            dispatchers: 2,
            intentions: 2,
            crashes_per_dispatcher: 1,
            lost_answers: 1,
            duplicated_webhooks: 1,
            reordered_webhooks: 1,
            lease_expiries: 1,
            changes: 1,
            cancellations: 1,
            supervisors: 2,
            max_resends: 1,
        }
    }
}

impl Bounds {
    /// The default bounds with any of `UNAVEZ_MODEL_DISPATCHERS`,
    /// `_INTENTIONS`, `_CHANGES`, `_SUPERVISORS` set in the environment.
    pub fn from_env(base: Bounds) -> Bounds {
        let get = |name: &str| {
            std::env::var(format!("UNAVEZ_MODEL_{name}"))
                .ok()?
                .parse::<usize>()
                .ok()
        };
        Bounds {
            dispatchers: get("DISPATCHERS").unwrap_or(base.dispatchers),
            intentions: get("INTENTIONS").unwrap_or(base.intentions),
            changes: get("CHANGES").map_or(base.changes, |n| n as u8),
            supervisors: get("SUPERVISORS").unwrap_or(base.supervisors),
            ..base
        }
    }

    /// The dispatch protocol alone (no supervisor): the mutation tests'
    /// smaller space, where counterexamples are short.
    pub fn dispatch() -> Bounds {
        Bounds {
            supervisors: 0,
            ..Bounds::default()
        }
    }

    /// Two supervisors at once on 1 intention (and its resend).
    pub fn operators() -> Bounds {
        Bounds {
            intentions: 1,
            ..Bounds::default()
        }
    }

    /// The deeper run of docs/verification.md: 3 dispatchers, 3
    /// intentions, 2 changes (two supervisors, every fault).
    pub fn deep() -> Bounds {
        Bounds {
            dispatchers: 3,
            intentions: 3,
            changes: 2,
            ..Bounds::default()
        }
    }
}

/// The purposes of the intentions, by row index (a booking notice, a
/// 24-hour reminder, an update notice).
pub fn purpose(index: u8) -> Purpose {
    match index {
        0 => Purpose::Booking,
        1 => Purpose::Reminder { minutes: 1440 },
        _ => Purpose::Update,
    }
}

/// A reason a person sees, as core wrote it, interned so that a row stays
/// `Copy` (a handful of distinct reasons exist in the whole run): one text,
/// one address. Each checker thread asks its own table first, so threads
/// do not queue on the shared one.
pub fn intern(reason: String) -> &'static str {
    thread_local! {
        static LOCAL: std::cell::RefCell<HashSet<&'static str>> = Default::default();
    }
    if let Some(s) = LOCAL.with(|l| l.borrow().get(reason.as_str()).copied()) {
        return s;
    }
    static SEEN: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let s = match seen.get(reason.as_str()) {
        Some(s) => *s,
        None => {
            let s: &'static str = Box::leak(reason.into_boxed_str());
            seen.insert(s);
            s
        }
    };
    LOCAL.with(|l| l.borrow_mut().insert(s));
    s
}

/// The commitment as a request reads it (a snapshot is kept by each
/// request at the moment it *started*: its last read of the ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Commitment {
    pub version: u8,
    pub cancelled: bool,
}

/// An open attempt: the version its validity check read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    pub n: u8,
    pub version_checked: u8,
}

/// A lease on a row: its owner (a dispatcher) and whether it still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    pub owner: u8,
    pub live: bool,
}

/// One intention row. `family` is the original's index; a resend is a new
/// row (a new key) in the same family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intention {
    pub family: u8,
    /// Index for [`purpose`].
    pub purpose: u8,
    pub planned_version: u8,
    pub state: IntentionState,
    /// The reason a person sees (review, cancelled).
    pub reason: Option<&'static str>,
    pub lease: Option<Lease>,
    pub attempt: Option<Attempt>,
    /// A resend authorized while the original's outcome was unknown.
    pub blind: bool,
    /// The engine created a command for this row's key (it is idempotent
    /// per key: at most one, ever).
    pub command: bool,
    /// The command's `sent` and `delivered` webhooks still on their way.
    pub hook_sent: bool,
    pub hook_delivered: bool,
}

impl Intention {
    /// Every field but the reason, packed in one word without overlap
    /// (family, purpose, versions and states are below 16, an owner fits a
    /// byte, an attempt 17 bits), so equal words mean equal fields.
    fn packed(&self) -> u64 {
        let lease = self
            .lease
            .map_or(0, |l| 1 | u64::from(l.live) << 1 | u64::from(l.owner) << 2);
        let attempt = self
            .attempt
            .map_or(0, |a| 1 | u64::from(a.n) << 1 | u64::from(a.version_checked) << 9);
        u64::from(self.family)
            | u64::from(self.purpose) << 4
            | u64::from(self.planned_version) << 8
            | (self.state as u64) << 12
            | lease << 16
            | attempt << 28
            | u64::from(self.blind) << 48
            | u64::from(self.command) << 49
            | u64::from(self.hook_sent) << 50
            | u64::from(self.hook_delivered) << 51
    }

    fn planned(family: u8, purpose: u8, version: u8) -> Intention {
        Intention {
            family,
            purpose,
            planned_version: version,
            state: IntentionState::Planned,
            reason: None,
            lease: None,
            attempt: None,
            blind: false,
            command: false,
            hook_sent: false,
            hook_delivered: false,
        }
    }
}

/// A request the engine received: for which intention row, and the
/// commitment it started from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request {
    pub intention: u8,
    pub started: Commitment,
}

/// A dispatcher's step. A crash returns it to `Idle`: the process
/// restarts with nothing in memory (a crashed process can only restart, so
/// a separate `Crashed` step reaches no other state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dispatcher {
    Idle,
    /// Claimed `intention` under a lease and recorded its attempt (the
    /// version its validity check read is in the attempt).
    Claimed(u8),
    /// The pre-send re-check passed (or, mutated, was skipped).
    Ready(Request),
    /// The request was processed; its answer came back (accepted) or
    /// timed out (`false`).
    Answered(u8, bool),
}

/// The reconciler's step on one uncertain intention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reconciler {
    Idle,
    /// A repeat passed its validity check and pre-send re-check.
    Ready(Request),
    /// The repeat was processed; answered or timed out.
    Answered(u8, bool),
}

/// A supervisor's one action, and (mutated) the guard's verdict read in a
/// transaction of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Supervisor {
    Idle,
    /// Read the guard, not yet written (only under
    /// [`crate::Mutation::GuardOutsideTx`]).
    Read(Op, u8),
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Cancel,
    Verify,
    Resend,
}

/// A webhook's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    Sent,
    Delivered,
}

/// A state change the monotonic rule forbids, once written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backward {
    pub row: u8,
    pub from: IntentionState,
    pub to: IntentionState,
}

/// The whole world. Only the first `rows`, `dispatcher_count` and
/// `supervisor_count` entries of the arrays exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct World {
    pub commitment: Commitment,
    pub intentions: [Intention; MAX_ROWS],
    pub rows: u8,
    pub dispatchers: [Dispatcher; MAX_DISPATCHERS],
    pub crashes: [u8; MAX_DISPATCHERS],
    pub dispatcher_count: u8,
    pub reconciler: Reconciler,
    pub supervisors: [Supervisor; MAX_SUPERVISORS],
    pub supervisor_count: u8,
    /// Commands created by a request whose start already saw the change
    /// that invalidates it.
    pub stale_commands: u8,
    /// Audit rows written and operator actions that changed something.
    pub audit_rows: u8,
    pub changing_actions: u8,
    pub backward: Option<Backward>,
    pub lost_answers: u8,
    pub duplicated: u8,
    pub reordered: u8,
    pub expiries: u8,
    pub changes: u8,
    pub cancellations: u8,
    /// `[policy] max_resends_per_day` (a constant of the run): the
    /// representative needs it to tell that no new row can appear.
    pub max_resends: u8,
}

impl World {
    pub fn new(b: &Bounds) -> World {
        assert!(
            b.intentions + b.supervisors <= MAX_ROWS
                && b.dispatchers <= MAX_DISPATCHERS
                && b.supervisors <= MAX_SUPERVISORS,
            "bounds beyond the model's arrays: {b:?}"
        );
        let mut intentions = [Intention::planned(0, 0, 1); MAX_ROWS];
        for (i, row) in intentions.iter_mut().enumerate().take(b.intentions) {
            *row = Intention::planned(i as u8, i as u8, 1);
        }
        World {
            commitment: Commitment {
                version: 1,
                cancelled: false,
            },
            intentions,
            rows: b.intentions as u8,
            dispatchers: [Dispatcher::Idle; MAX_DISPATCHERS],
            crashes: [0; MAX_DISPATCHERS],
            dispatcher_count: b.dispatchers as u8,
            reconciler: Reconciler::Idle,
            supervisors: [Supervisor::Idle; MAX_SUPERVISORS],
            supervisor_count: b.supervisors as u8,
            stale_commands: 0,
            audit_rows: 0,
            changing_actions: 0,
            backward: None,
            lost_answers: 0,
            duplicated: 0,
            reordered: 0,
            expiries: 0,
            changes: 0,
            cancellations: 0,
            max_resends: b.max_resends.min(u32::from(u8::MAX)) as u8,
        }
    }

    /// The rows that exist.
    pub fn rows(&self) -> &[Intention] {
        &self.intentions[..usize::from(self.rows)]
    }

    pub fn dispatchers(&self) -> &[Dispatcher] {
        &self.dispatchers[..usize::from(self.dispatcher_count)]
    }

    pub fn supervisors(&self) -> &[Supervisor] {
        &self.supervisors[..usize::from(self.supervisor_count)]
    }

    /// A resend: a new row in `family`, planned for the current version.
    pub fn push_resend(&mut self, family: u8, blind: bool) {
        let purpose = self.intentions[usize::from(family)].purpose;
        let mut row = Intention::planned(family, purpose, self.commitment.version);
        row.blind = blind;
        self.intentions[usize::from(self.rows)] = row;
        self.rows += 1;
    }

    /// A webhook is on its way (the caller adds "no action enabled").
    pub fn in_flight(&self) -> bool {
        self.rows().iter().any(|r| r.hook_sent || r.hook_delivered)
    }
}

/// The fingerprint's input, consistent with `Eq`: equal worlds hash
/// alike. Rows are packed words, and a reason hashes by its address: every
/// reason is [`intern`]ed, so equal texts are one address. The checker
/// hashes every state it generates; field by field, with reasons' texts,
/// this was a good part of its time.
impl Hash for World {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for row in self.rows() {
            h.write_u64(row.packed());
            h.write_usize(row.reason.map_or(0, |r| r.as_ptr() as usize));
        }
        (
            self.commitment,
            self.rows,
            self.dispatchers,
            self.crashes,
            self.dispatcher_count,
            self.reconciler,
            self.supervisors,
            self.supervisor_count,
        )
            .hash(h);
        h.write(&[
            self.stale_commands,
            self.audit_rows,
            self.changing_actions,
            self.lost_answers,
            self.duplicated,
            self.reordered,
            self.expiries,
            self.changes,
            self.cancellations,
        ]);
        self.backward.hash(h);
    }
}

/// A dead lease's owner where it no longer matters (see
/// [`World::representative`]).
pub(crate) const NOBODY: u8 = u8::MAX;

/// Dispatchers are interchangeable: their index appears only in their own
/// step, their crash count and the leases they own. The representative
/// orders them by all three, so two states that differ by a renaming of
/// dispatchers have one representative; supervisors likewise. (Two
/// dispatchers with equal keys are equal in everything a renaming moves,
/// so the order among them does not matter.)
///
/// One more equivalence: the owner of a lease that ran out, once that
/// owner is no longer working on the row, is read by nothing again. Only
/// a dispatcher working on the row reads a lease's owner (its pre-send
/// re-check, its recorded answer); nobody starts working on a row but by
/// a claim, which writes a new lease; the expiries, the stealable-lease
/// mutation and the one-holder property read live leases only; the
/// reconciler, the guard and `finish` do not read the lease. So two states
/// that differ only in such an owner reach the same futures with the same
/// properties, and the representative forgets it.
///
/// No allocation: this runs for every state generated.
impl Representative for World {
    fn representative(&self) -> World {
        let n = usize::from(self.dispatcher_count);
        let rows = usize::from(self.rows);
        let mut w = *self;
        for (i, row) in w.intentions[..rows].iter_mut().enumerate() {
            if let Some(l) = &mut row.lease
                && !l.live
                && !crate::model::working_on(self.dispatchers[usize::from(l.owner)], i)
            {
                l.owner = NOBODY;
            }
        }
        crate::dead::forget(&mut w);
        let key = |d: usize| {
            let mut leases = [0u8; MAX_ROWS];
            for (slot, row) in leases.iter_mut().zip(w.rows()) {
                if let Some(l) = row.lease.filter(|l| usize::from(l.owner) == d) {
                    *slot = 1 + u8::from(l.live);
                }
            }
            (w.dispatchers[d], w.crashes[d], leases)
        };
        let mut keys = [(Dispatcher::Idle, 0u8, [0u8; MAX_ROWS]); MAX_DISPATCHERS];
        let mut order = [0usize; MAX_DISPATCHERS];
        for d in 0..n {
            keys[d] = key(d);
            order[d] = d;
        }
        order[..n].sort_unstable_by_key(|&d| keys[d]);
        let crashes = w.crashes;
        let mut renamed = [0u8; MAX_DISPATCHERS];
        for (new, &old) in order[..n].iter().enumerate() {
            w.dispatchers[new] = self.dispatchers[old];
            w.crashes[new] = crashes[old];
            renamed[old] = new as u8;
        }
        for row in &mut w.intentions[..rows] {
            if let Some(l) = &mut row.lease
                && l.owner != NOBODY
            {
                l.owner = renamed[usize::from(l.owner)];
            }
        }
        w.supervisors[..usize::from(self.supervisor_count)].sort_unstable();
        w
    }
}
