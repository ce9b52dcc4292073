//! The effect of each [`Action`]: the model moves messages and crashes
//! processes; every decision is a call into [`crate::rules`] (core).

use unavez_core::domain::claim::Verdict;
use unavez_core::domain::reconcile::Step;
use unavez_core::domain::state::{CancelReason, IntentionState, Signal};
use unavez_core::domain::validity::Validity;

use crate::model::{Action, Mutation, Una};
use crate::rules;
use crate::world::{Attempt, Backward, Dispatcher, Hook, Lease, Op, Reconciler, Request, Supervisor, World, intern};

pub fn next(m: &Una, w: &World, a: Action) -> Option<World> {
    let mut w = *w;
    match a {
        Action::Claim(d, i) => claim(m, &mut w, d, i),
        Action::Recheck(d) => recheck(m, &mut w, d),
        Action::Send(d, lost) => {
            let Dispatcher::Ready(req) = w.dispatchers[d] else {
                return None;
            };
            engine(&mut w, req, lost);
            w.dispatchers[d] = Dispatcher::Answered(req.intention, !lost);
        }
        Action::Record(d) => {
            let Dispatcher::Answered(i, accepted) = w.dispatchers[d] else {
                return None;
            };
            record(&mut w, usize::from(i), Some(d), accepted);
            w.dispatchers[d] = Dispatcher::Idle;
        }
        Action::Crash(d) => {
            w.crashes[d] += 1;
            w.dispatchers[d] = Dispatcher::Idle;
        }
        Action::LeaseOfDeadExpires(i) => expire(&mut w, i),
        Action::LeaseOfFrozenExpires(i) => {
            w.expiries += 1;
            expire(&mut w, i);
        }
        Action::Reconcile(i) => reconcile(m, &mut w, i),
        Action::ReconcilerSend(lost) => {
            let Reconciler::Ready(req) = w.reconciler else {
                return None;
            };
            engine(&mut w, req, lost);
            w.reconciler = Reconciler::Answered(req.intention, !lost);
        }
        Action::ReconcilerRecord => {
            let Reconciler::Answered(i, accepted) = w.reconciler else {
                return None;
            };
            record(&mut w, usize::from(i), None, accepted);
            w.reconciler = Reconciler::Idle;
        }
        Action::Webhook(i, hook, dup) => webhook(m, &mut w, i, hook, dup),
        Action::BookingChange => {
            w.changes += 1;
            w.commitment.version += 1;
        }
        Action::BookingCancel => {
            w.cancellations += 1;
            w.commitment.cancelled = true;
        }
        // A refused or idle action leaves the ledger as it was: the
        // supervisor is still free to act (a no-op is not a step).
        Action::Operator(s, op, i) => {
            if !operator(m, &mut w, s, op, i) {
                return None;
            }
        }
        Action::OperatorWrite(s) => {
            let Supervisor::Read(op, i) = w.supervisors[s] else {
                return None;
            };
            write(&mut w, op, usize::from(i));
            w.supervisors[s] = Supervisor::Done;
        }
    }
    // Mutated, a webhook's write is the bug under test: every order of
    // delivery is explored.
    if m.eager_hooks && m.mutation != Some(Mutation::WebhookNotMonotonic) {
        deliver_due_hooks(&mut w);
    }
    Some(w)
}

/// Delivers, through core's state machine, the webhooks that
/// [`crate::dead::hooks_due_now`] says may go at once: in their order, so
/// no fault is spent.
fn deliver_due_hooks(w: &mut World) {
    for i in 0..usize::from(w.rows) {
        let (sent, delivered) = crate::dead::hooks_due_now(w, i);
        if sent {
            w.intentions[i].hook_sent = false;
            signal(w, i, Signal::Sent);
        }
        if delivered {
            w.intentions[i].hook_delivered = false;
            signal(w, i, Signal::Delivered);
        }
    }
}

/// Writes a state change, noting any the monotonic rule forbids.
fn set(w: &mut World, i: usize, to: IntentionState) {
    let from = w.intentions[i].state;
    if rules::backward(from, to) && w.backward.is_none() {
        w.backward = Some(Backward { row: i as u8, from, to });
    }
    w.intentions[i].state = to;
}

/// Applies `signal` to row `i` through core's state machine; whether it
/// moved.
fn signal(w: &mut World, i: usize, signal: Signal) -> bool {
    match rules::apply(w.intentions[i].state, signal) {
        Some(to) => {
            set(w, i, to);
            true
        }
        None => false,
    }
}

fn claim(m: &Una, w: &mut World, d: usize, i: usize) {
    let snapshot = w.commitment;
    let verdict = match rules::claim(&w.intentions[i], snapshot) {
        Verdict::Validity(v) => v,
        // Unreachable in the model (`rules::claim`): the app sends such a
        // row to review instead of claiming it.
        Verdict::Guard => return,
    };
    match verdict {
        Validity::Valid => {
            let stolen = m.is(Mutation::StealableLease) && w.intentions[i].state == IntentionState::Dispatching;
            if !stolen && !signal(w, i, Signal::Claim) {
                return;
            }
            let row = &mut w.intentions[i];
            row.lease = Some(Lease {
                owner: d as u8,
                live: true,
            });
            row.attempt = Some(Attempt {
                n: 1,
                version_checked: snapshot.version,
            });
            w.dispatchers[d] = Dispatcher::Claimed(i as u8);
        }
        Validity::Cancel { reason, explanation } => {
            if signal(w, i, Signal::Cancel(reason)) {
                w.intentions[i].reason = Some(intern(format!("{}: {explanation}", reason.as_str())));
            }
        }
        // No deferral at the model's instant (no quiet hours, no cap).
        Validity::Defer { .. } => {}
    }
}

fn recheck(m: &Una, w: &mut World, d: usize) {
    let Dispatcher::Claimed(i) = w.dispatchers[d] else {
        return;
    };
    let ready = Dispatcher::Ready(Request {
        intention: i,
        started: w.commitment,
    });
    let i = usize::from(i);
    // Mutated, nothing reads the ledger right before the request: it
    // starts now, from whatever the commitment is now.
    if m.is(Mutation::NoPresendCheck) || rules::presend(w, i, Some(d)).is_none() {
        w.dispatchers[d] = ready;
        return;
    }
    // Nothing left: release if we still hold it, the next claim decides
    // again.
    if w.intentions[i].lease.is_some_and(|l| usize::from(l.owner) == d) && signal(w, i, Signal::Release) {
        w.intentions[i].lease = None;
        w.intentions[i].attempt = None;
    }
    w.dispatchers[d] = Dispatcher::Idle;
}

/// The engine, idempotent per key: creates the command once, answers the
/// stored one after; a created command's status webhooks start on their
/// way.
fn engine(w: &mut World, req: Request, _lost: bool) {
    let i = usize::from(req.intention);
    if w.intentions[i].command {
        return;
    }
    if rules::validity(&w.intentions[i], req.started) != Validity::Valid {
        w.stale_commands += 1;
    }
    let row = &mut w.intentions[i];
    row.command = true;
    row.hook_sent = true;
    row.hook_delivered = true;
}

/// A process records its answer through core's `finish::decide`: evidence
/// whoever holds the row now; a timeout moves only a row still in flight.
fn record(w: &mut World, i: usize, holder: Option<usize>, accepted: bool) {
    let held = match holder {
        Some(d) => w.intentions[i].lease.is_some_and(|l| usize::from(l.owner) == d),
        None => true,
    };
    let (to, reason) = rules::finish(w, i, holder.is_none(), held, accepted);
    if let Some(to) = to {
        set(w, i, to);
        if let Some(r) = reason {
            w.intentions[i].reason = Some(r);
        }
    }
    if held {
        let row = &mut w.intentions[i];
        if row.state != IntentionState::Dispatching {
            row.lease = None;
            row.attempt = None;
        }
    }
}

fn expire(w: &mut World, i: usize) {
    if rules::expire(i, &w.intentions[i]) {
        set(w, i, IntentionState::Uncertain);
    }
    if let Some(l) = &mut w.intentions[i].lease {
        l.live = false;
    }
    w.intentions[i].attempt = None;
}

fn reconcile(m: &Una, w: &mut World, i: usize) {
    match rules::reconcile_step() {
        Step::Repeat => {}
        // A lookup finds a command the engine created (evidence); one it
        // does not find is repeated with the same key, as the app does.
        Step::Lookup if w.intentions[i].command => {
            signal(w, i, Signal::Accepted);
            return;
        }
        Step::Lookup => {}
        Step::Review(reason) => {
            if signal(w, i, Signal::NeedsReview) {
                w.intentions[i].reason = Some(intern(reason));
            }
            return;
        }
        Step::Wait(_) => return,
    }
    let verdict = rules::validity(&w.intentions[i], w.commitment);
    if verdict != Validity::Valid && !m.is(Mutation::NoValidityBeforeRepeat) {
        if let Some(reason) = rules::refused_repeat(i, &w.intentions[i], &verdict, w.commitment.version) {
            set(w, i, IntentionState::Review);
            w.intentions[i].reason = Some(reason);
        }
        return;
    }
    w.intentions[i].attempt = Some(Attempt {
        n: 1,
        version_checked: w.commitment.version,
    });
    if rules::presend(w, i, None).is_none() {
        w.reconciler = Reconciler::Ready(Request {
            intention: i as u8,
            started: w.commitment,
        });
    }
}

fn webhook(m: &Una, w: &mut World, i: usize, hook: Hook, dup: bool) {
    let row = &mut w.intentions[i];
    if hook == Hook::Delivered && row.hook_sent {
        w.reordered += 1;
    }
    if dup {
        w.duplicated += 1;
    } else if hook == Hook::Sent {
        row.hook_sent = false;
    } else {
        row.hook_delivered = false;
    }
    let (s, to) = match hook {
        Hook::Sent => (Signal::Sent, IntentionState::Sent),
        Hook::Delivered => (Signal::Delivered, IntentionState::Delivered),
    };
    if m.is(Mutation::WebhookNotMonotonic) {
        if !w.intentions[i].state.is_terminal() {
            set(w, i, to);
        }
    } else {
        signal(w, i, s);
    }
}

/// An operator's action through the guard; whether it took a step.
fn operator(m: &Una, w: &mut World, s: usize, op: Op, i: usize) -> bool {
    let unknown = matches!(
        w.intentions[usize::from(w.intentions[i].family)].state,
        IntentionState::Dispatching | IntentionState::Uncertain
    );
    let allowed = rules::guard(w, i, op, m.bounds.max_resends)
        || (op == Op::Resend && unknown && m.is(Mutation::ResendWhileUncertain));
    if !allowed {
        return false;
    }
    if m.is(Mutation::GuardOutsideTx) {
        w.supervisors[s] = Supervisor::Read(op, i as u8);
        return true;
    }
    w.supervisors[s] = Supervisor::Done;
    write(w, op, i)
}

/// The operator's write, and its one audit row when it changed something;
/// whether it did.
fn write(w: &mut World, op: Op, i: usize) -> bool {
    let changed = match op {
        Op::Cancel => {
            let moved = signal(w, i, Signal::Cancel(CancelReason::Operator));
            if moved {
                w.intentions[i].reason = Some(intern(CancelReason::Operator.as_str().to_string()));
            }
            moved
        }
        Op::Verify => w.intentions[i].command && signal(w, i, Signal::Accepted),
        Op::Resend => {
            let blind = matches!(
                w.intentions[i].state,
                IntentionState::Planned | IntentionState::Dispatching | IntentionState::Uncertain
            );
            w.push_resend(i as u8, blind);
            true
        }
    };
    if changed {
        w.changing_actions += 1;
        w.audit_rows += 1;
    }
    changed
}
