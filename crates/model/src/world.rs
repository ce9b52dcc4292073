//! The model's state: the ledger's rows that matter (commitment,
//! intentions, leases, open attempts, audit), the engine's commands and
//! webhooks in flight, each process's step, and the fault budget left.

use unavez_core::domain::key::Purpose;
use unavez_core::domain::state::IntentionState;

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
    /// `_INTENTIONS`, `_CHANGES`, `_SUPERVISORS` set in the environment
    /// (the deeper run of docs/verification.md).
    pub fn from_env() -> Bounds {
        let get = |name: &str| {
            std::env::var(format!("UNAVEZ_MODEL_{name}"))
                .ok()?
                .parse::<usize>()
                .ok()
        };
        let d = Bounds::default();
        Bounds {
            dispatchers: get("DISPATCHERS").unwrap_or(d.dispatchers),
            intentions: get("INTENTIONS").unwrap_or(d.intentions),
            changes: get("CHANGES").map_or(d.changes, |n| n as u8),
            supervisors: get("SUPERVISORS").unwrap_or(d.supervisors),
            ..d
        }
    }

    /// `cargo test`'s run of the dispatch protocol: 2 dispatchers, 2
    /// intentions, every fault of the default budget, no supervisor.
    pub fn dispatch() -> Bounds {
        Bounds {
            supervisors: 0,
            ..Bounds::default()
        }
    }

    /// `cargo test`'s run of the operators: 2 supervisors at once with 2
    /// dispatchers, on 1 intention (and its resend), every fault.
    pub fn operators() -> Bounds {
        Bounds {
            intentions: 1,
            ..Bounds::default()
        }
    }

    /// The deeper run of docs/verification.md: 3 dispatchers, 3
    /// intentions, 2 changes.
    pub fn deep() -> Bounds {
        Bounds {
            dispatchers: 3,
            intentions: 3,
            changes: 2,
            ..Bounds::default()
        }
    }
}

/// The commitment as a request reads it (a snapshot is kept by each
/// request at the moment it *started*: its last read of the ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Commitment {
    pub version: i64,
    pub cancelled: bool,
}

/// An open attempt: the version its validity check read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    pub n: i64,
    pub version_checked: i64,
}

/// One intention row. `family` is the original's index; a resend is a new
/// row (a new key) in the same family.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Intention {
    pub family: usize,
    pub purpose: Purpose,
    pub planned_version: i64,
    pub state: IntentionState,
    /// The reason a person sees (review, cancelled).
    pub reason: Option<String>,
    /// Lease owner (dispatcher index) and whether it is still running.
    pub lease: Option<(usize, bool)>,
    pub attempt: Option<Attempt>,
    /// A resend authorized while the original's outcome was unknown.
    pub blind: bool,
}

/// A request the engine received: who sent it, for which intention row,
/// and the commitment it started from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Request {
    pub intention: usize,
    pub started: Commitment,
}

/// A dispatcher's step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dispatcher {
    Idle,
    /// Claimed `intention` under a lease and recorded its attempt; the
    /// commitment as the claim's validity check read it.
    Claimed(usize, Commitment),
    /// The pre-send re-check passed (or, mutated, was skipped).
    Ready(Request),
    /// The request was processed; its answer came back (accepted) or
    /// timed out (`false`).
    Answered(usize, bool),
    Crashed,
}

/// The reconciler's step on one uncertain intention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reconciler {
    Idle,
    /// A repeat passed its validity check and pre-send re-check.
    Ready(Request),
    /// The repeat was processed; answered or timed out.
    Answered(usize, bool),
}

/// A supervisor's one action, and (mutated) the guard's verdict read in a
/// transaction of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Supervisor {
    Idle,
    /// Read the guard, not yet written (only under
    /// [`crate::Mutation::GuardOutsideTx`]).
    Read(Op, usize),
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Cancel,
    Verify,
    Resend,
}

/// A status webhook on its way, for an intention row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Webhook {
    pub intention: usize,
    pub delivered: bool,
}

/// The whole world.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World {
    pub commitment: Commitment,
    pub intentions: Vec<Intention>,
    pub dispatchers: Vec<Dispatcher>,
    pub reconciler: Reconciler,
    pub supervisors: Vec<Supervisor>,
    /// Commands the engine created, by intention row (its key): how many
    /// times, and whether the request that created it was stale.
    pub commands: Vec<u8>,
    pub stale_commands: u8,
    pub webhooks: Vec<Webhook>,
    /// Audit rows written and operator actions that changed something.
    pub audit_rows: u8,
    pub changing_actions: u8,
    /// A state change the monotonic rule forbids was written.
    pub backward: Option<String>,
    pub crashes: Vec<u8>,
    pub lost_answers: u8,
    pub duplicated: u8,
    pub reordered: u8,
    pub expiries: u8,
    pub changes: u8,
    pub cancellations: u8,
}

impl World {
    pub fn new(b: &Bounds) -> World {
        let purposes = [Purpose::Booking, Purpose::Reminder { minutes: 1440 }, Purpose::Update];
        World {
            commitment: Commitment {
                version: 1,
                cancelled: false,
            },
            intentions: (0..b.intentions)
                .map(|i| Intention {
                    family: i,
                    purpose: purposes[i % purposes.len()].clone(),
                    planned_version: 1,
                    state: IntentionState::Planned,
                    reason: None,
                    lease: None,
                    attempt: None,
                    blind: false,
                })
                .collect(),
            dispatchers: vec![Dispatcher::Idle; b.dispatchers],
            reconciler: Reconciler::Idle,
            supervisors: vec![Supervisor::Idle; b.supervisors],
            commands: vec![0; b.intentions],
            stale_commands: 0,
            webhooks: Vec::new(),
            audit_rows: 0,
            changing_actions: 0,
            backward: None,
            crashes: vec![0; b.dispatchers],
            lost_answers: 0,
            duplicated: 0,
            reordered: 0,
            expiries: 0,
            changes: 0,
            cancellations: 0,
        }
    }

    /// No process can act and no message is in flight (the caller adds
    /// "no action enabled").
    pub fn in_flight(&self) -> bool {
        !self.webhooks.is_empty()
    }
}
