//! The [`stateright::Model`]: which actions each actor may take in a
//! state. The effects are in [`crate::step`].

use stateright::{Model, Property};
use unavez_core::domain::state::IntentionState;

use crate::props;
use crate::world::{Bounds, Dispatcher, Hook, Op, Reconciler, Supervisor, World};

/// One rule weakened on purpose: the checker must then find a
/// counterexample (docs/verification.md, "The checker can fail").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The reconciler repeats without the validity check (session 10's bug).
    NoValidityBeforeRepeat,
    /// The request leaves without the pre-send re-check.
    NoPresendCheck,
    /// A claim takes a lease still held by a live, unfrozen dispatcher.
    StealableLease,
    /// A status webhook writes its state without the monotonic rule.
    WebhookNotMonotonic,
    /// A resend is authorized while the original is in flight or uncertain.
    ResendWhileUncertain,
    /// An operator reads the guard in one transaction and writes in another.
    GuardOutsideTx,
}

impl Mutation {
    pub const ALL: [Mutation; 6] = [
        Mutation::NoValidityBeforeRepeat,
        Mutation::NoPresendCheck,
        Mutation::StealableLease,
        Mutation::WebhookNotMonotonic,
        Mutation::ResendWhileUncertain,
        Mutation::GuardOutsideTx,
    ];
}

/// The protocol at some bounds, with at most one rule weakened.
#[derive(Debug, Clone)]
pub struct Una {
    pub bounds: Bounds,
    pub mutation: Option<Mutation>,
    /// Webhooks that can change nothing, or that nothing else observes,
    /// are delivered at once ([`crate::dead::hooks_due_now`]). Off only in
    /// `tests/reductions.rs`, which compares the two.
    pub eager_hooks: bool,
}

impl Una {
    pub fn new(bounds: Bounds) -> Una {
        Una {
            bounds,
            mutation: None,
            eager_hooks: true,
        }
    }

    pub fn mutated(bounds: Bounds, m: Mutation) -> Una {
        Una {
            mutation: Some(m),
            ..Una::new(bounds)
        }
    }

    /// The model with every webhook delivered in every order: what the
    /// reductions are checked against.
    pub fn unreduced(bounds: Bounds) -> Una {
        Una {
            eager_hooks: false,
            ..Una::new(bounds)
        }
    }

    pub fn is(&self, m: Mutation) -> bool {
        self.mutation == Some(m)
    }
}

/// Every step an actor can take; `usize` fields are a dispatcher,
/// supervisor or intention row (by position).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// Dispatcher claims a row under a lease (validity checked).
    Claim(usize, usize),
    /// Dispatcher's pre-send re-check.
    Recheck(usize),
    /// Dispatcher's request reaches the engine; `lost`: its answer is lost.
    Send(usize, bool),
    /// Dispatcher records the answer (or the timeout).
    Record(usize),
    /// Dispatcher crashes and restarts with nothing in memory.
    Crash(usize),
    /// The lease of a dead holder runs out (time passing, no fault).
    LeaseOfDeadExpires(usize),
    /// The lease of a live, frozen holder runs out (a fault).
    LeaseOfFrozenExpires(usize),
    /// The reconciler looks up an uncertain row, and repeats it or hands it
    /// to review.
    Reconcile(usize),
    ReconcilerSend(bool),
    ReconcilerRecord,
    /// The engine's webhook for a row arrives; `dup`: it arrives again
    /// later. `Delivered` before `Sent` is the reordered one.
    Webhook(usize, Hook, bool),
    BookingChange,
    BookingCancel,
    /// Supervisor acts on a row (one serialized transaction, unless
    /// mutated); `Write` is the second half under the mutation.
    Operator(usize, Op, usize),
    OperatorWrite(usize),
}

/// Whether a dispatcher's step is on row `i` (a process that crashed, or
/// moved on, no longer renews its lease).
pub fn working_on(pc: Dispatcher, i: usize) -> bool {
    match pc {
        Dispatcher::Claimed(j) | Dispatcher::Answered(j, _) => usize::from(j) == i,
        Dispatcher::Ready(r) => usize::from(r.intention) == i,
        Dispatcher::Idle => false,
    }
}

impl Model for Una {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        vec![World::new(&self.bounds)]
    }

    fn actions(&self, w: &World, out: &mut Vec<Action>) {
        self.dispatcher_actions(w, out);
        self.engine_actions(w, out);
        let b = &self.bounds;
        if w.changes < b.changes && !w.commitment.cancelled {
            out.push(Action::BookingChange);
        }
        if w.cancellations < b.cancellations && !w.commitment.cancelled {
            out.push(Action::BookingCancel);
        }
        for (s, pc) in w.supervisors().iter().enumerate() {
            match *pc {
                Supervisor::Idle => {
                    // On the first family (its original and resend): two
                    // people on one case is the race that matters.
                    for (i, row) in w.rows().iter().enumerate().filter(|(_, r)| r.family == 0) {
                        out.push(Action::Operator(s, Op::Cancel, i));
                        out.push(Action::Operator(s, Op::Verify, i));
                        if usize::from(row.family) == i {
                            out.push(Action::Operator(s, Op::Resend, i));
                        }
                    }
                }
                Supervisor::Read(..) => out.push(Action::OperatorWrite(s)),
                Supervisor::Done => {}
            }
        }
    }

    fn next_state(&self, w: &World, a: Action) -> Option<World> {
        crate::step::next(self, w, a)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        props::all()
    }
}

impl Una {
    fn dispatcher_actions(&self, w: &World, out: &mut Vec<Action>) {
        let b = &self.bounds;
        for (d, pc) in w.dispatchers().iter().enumerate() {
            match *pc {
                Dispatcher::Idle => {
                    for (i, row) in w.rows().iter().enumerate() {
                        let stealable = self.is(Mutation::StealableLease)
                            && row.state == IntentionState::Dispatching
                            && matches!(row.lease, Some(l) if l.live
                                && usize::from(l.owner) != d
                                && working_on(w.dispatchers[usize::from(l.owner)], i));
                        if row.state == IntentionState::Planned || stealable {
                            out.push(Action::Claim(d, i));
                        }
                    }
                }
                Dispatcher::Claimed(..) => out.push(Action::Recheck(d)),
                Dispatcher::Ready(_) => {
                    out.push(Action::Send(d, false));
                    if w.lost_answers < b.lost_answers {
                        out.push(Action::Send(d, true));
                    }
                }
                Dispatcher::Answered(..) => out.push(Action::Record(d)),
            }
            if *pc != Dispatcher::Idle && w.crashes[d] < b.crashes_per_dispatcher {
                out.push(Action::Crash(d));
            }
        }
        for (i, row) in w.rows().iter().enumerate() {
            match row.lease {
                Some(l) if l.live && !working_on(w.dispatchers[usize::from(l.owner)], i) => {
                    out.push(Action::LeaseOfDeadExpires(i))
                }
                Some(l) if l.live && w.expiries < b.lease_expiries => out.push(Action::LeaseOfFrozenExpires(i)),
                _ => {}
            }
        }
    }

    /// The reconciler and the engine's webhooks.
    fn engine_actions(&self, w: &World, out: &mut Vec<Action>) {
        let b = &self.bounds;
        match w.reconciler {
            Reconciler::Idle => {
                for (i, row) in w.rows().iter().enumerate() {
                    if row.state == IntentionState::Uncertain {
                        out.push(Action::Reconcile(i));
                    }
                }
            }
            Reconciler::Ready(_) => {
                out.push(Action::ReconcilerSend(false));
                if w.lost_answers < b.lost_answers {
                    out.push(Action::ReconcilerSend(true));
                }
            }
            Reconciler::Answered(..) => out.push(Action::ReconcilerRecord),
        }
        let dup = w.duplicated < b.duplicated_webhooks;
        for (i, row) in w.rows().iter().enumerate() {
            // Each command's webhooks leave in order (`sent`, then
            // `delivered`); the delivered one may overtake (reordered).
            let delivered = row.hook_delivered && (!row.hook_sent || w.reordered < b.reordered_webhooks);
            for (pending, hook) in [(row.hook_sent, Hook::Sent), (delivered, Hook::Delivered)] {
                if pending {
                    out.push(Action::Webhook(i, hook, false));
                    if dup {
                        out.push(Action::Webhook(i, hook, true));
                    }
                }
            }
        }
    }
}
