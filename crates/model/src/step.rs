//! The effect of each [`Action`]: the model moves messages and crashes
//! processes; every decision is a call into [`crate::rules`] (core).

use unavez_core::domain::presend::Holder;
use unavez_core::domain::state::{CancelReason, IntentionState, Signal};
use unavez_core::domain::validity::Validity;

use crate::model::{Action, Mutation, Una};
use crate::rules;
use crate::world::{Attempt, Dispatcher, Intention, Op, Reconciler, Request, Supervisor, Webhook, World};

pub fn next(m: &Una, w: &World, a: Action) -> Option<World> {
    let mut w = w.clone();
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
            let Dispatcher::Answered(i, _) = w.dispatchers[d] else {
                return None;
            };
            let accepted = matches!(w.dispatchers[d], Dispatcher::Answered(_, true));
            record(&mut w, i, Some(d), accepted);
            w.dispatchers[d] = Dispatcher::Idle;
        }
        Action::Crash(d) => {
            w.crashes[d] += 1;
            w.dispatchers[d] = Dispatcher::Crashed;
        }
        Action::Restart(d) => w.dispatchers[d] = Dispatcher::Idle,
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
            let Reconciler::Answered(i, _) = w.reconciler else {
                return None;
            };
            let accepted = matches!(w.reconciler, Reconciler::Answered(_, true));
            record(&mut w, i, None, accepted);
            w.reconciler = Reconciler::Idle;
        }
        Action::Webhook(k, dup) => webhook(m, &mut w, k, dup),
        Action::BookingChange => {
            w.changes += 1;
            w.commitment.version += 1;
        }
        Action::BookingCancel => {
            w.cancellations += 1;
            w.commitment.cancelled = true;
        }
        Action::Operator(s, op, i) => operator(m, &mut w, s, op, i),
        Action::OperatorWrite(s) => {
            let Supervisor::Read(op, i) = w.supervisors[s] else {
                return None;
            };
            write(m, &mut w, op, i);
            w.supervisors[s] = Supervisor::Done;
        }
    }
    Some(w)
}

/// Writes a state change, noting any the monotonic rule forbids.
fn set(w: &mut World, i: usize, to: IntentionState, why: &str) {
    let from = w.intentions[i].state;
    if rules::backward(from, to) && w.backward.is_none() {
        w.backward = Some(format!("row {i}: {from} -> {to} ({why})"));
    }
    w.intentions[i].state = to;
}

/// Applies `signal` to row `i` through core's state machine; whether it
/// moved.
fn signal(w: &mut World, i: usize, signal: Signal, why: &str) -> bool {
    match rules::apply(w.intentions[i].state, signal) {
        Some(to) => {
            set(w, i, to, why);
            true
        }
        None => false,
    }
}

fn claim(m: &Una, w: &mut World, d: usize, i: usize) {
    let snapshot = w.commitment;
    match rules::validity(&w.intentions[i], snapshot) {
        Validity::Valid => {
            let stolen = m.is(Mutation::StealableLease) && w.intentions[i].state == IntentionState::Dispatching;
            if !stolen && !signal(w, i, Signal::Claim, "claim") {
                return;
            }
            let row = &mut w.intentions[i];
            row.lease = Some((d, true));
            row.attempt = Some(Attempt {
                n: 1,
                version_checked: snapshot.version,
            });
            w.dispatchers[d] = Dispatcher::Claimed(i, snapshot);
        }
        Validity::Cancel { reason, explanation } => {
            if signal(w, i, Signal::Cancel(reason), "claim's validity") {
                w.intentions[i].reason = Some(format!("{}: {explanation}", reason.as_str()));
            }
        }
        // No deferral at the model's instant (no quiet hours, no cap).
        Validity::Defer { .. } => {}
    }
}

fn recheck(m: &Una, w: &mut World, d: usize) {
    let Dispatcher::Claimed(i, _) = w.dispatchers[d] else {
        return;
    };
    if m.is(Mutation::NoPresendCheck) {
        // Nothing reads the ledger right before the request: it starts
        // now, from whatever the commitment is now.
        w.dispatchers[d] = Dispatcher::Ready(Request {
            intention: i,
            started: w.commitment,
        });
        return;
    }
    match rules::presend(w, i, &Holder::Lease(rules::owner_name(d))) {
        None => {
            w.dispatchers[d] = Dispatcher::Ready(Request {
                intention: i,
                started: w.commitment,
            })
        }
        Some(_) => {
            // Nothing left: release if we still hold it, the next claim
            // decides again.
            if w.intentions[i].lease.is_some_and(|(o, _)| o == d) && signal(w, i, Signal::Release, "stop") {
                w.intentions[i].lease = None;
                w.intentions[i].attempt = None;
            }
            w.dispatchers[d] = Dispatcher::Idle;
        }
    }
}

/// The engine, idempotent per key: creates the command once, answers the
/// stored one after; a created command's status webhooks start on their
/// way.
fn engine(w: &mut World, req: Request, _lost: bool) {
    let i = req.intention;
    if w.commands[i] > 0 {
        return;
    }
    w.commands[i] += 1;
    if rules::validity(&w.intentions[i], req.started) != Validity::Valid {
        w.stale_commands += 1;
    }
    for delivered in [false, true] {
        w.webhooks.push(Webhook {
            intention: i,
            delivered,
        });
    }
}

/// A process records its answer: evidence whoever holds the row now; a
/// timeout is `unknown` only for the holder whose attempt it was.
fn record(w: &mut World, i: usize, holder: Option<usize>, accepted: bool) {
    let held = match holder {
        Some(d) => w.intentions[i].lease.is_some_and(|(o, _)| o == d),
        None => true,
    };
    if accepted {
        signal(w, i, Signal::Accepted, "answer");
    } else if held && holder.is_some() {
        signal(w, i, Signal::Unknown, "timeout");
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
        set(w, i, IntentionState::Uncertain, "lease expired");
    }
    if let Some((d, _)) = w.intentions[i].lease {
        w.intentions[i].lease = Some((d, false));
    }
    w.intentions[i].attempt = None;
}

fn reconcile(m: &Una, w: &mut World, i: usize) {
    if w.commands[i] > 0 {
        // The lookup finds the command: the channel has it.
        signal(w, i, Signal::Accepted, "lookup");
        return;
    }
    let verdict = rules::validity(&w.intentions[i], w.commitment);
    if verdict != Validity::Valid && !m.is(Mutation::NoValidityBeforeRepeat) {
        if let Some(reason) = rules::refused_repeat(i, &w.intentions[i], &verdict, w.commitment.version) {
            set(w, i, IntentionState::Review, "refused repeat");
            w.intentions[i].reason = Some(reason);
        }
        return;
    }
    let row = &mut w.intentions[i];
    row.attempt = Some(Attempt {
        n: 1,
        version_checked: w.commitment.version,
    });
    if rules::presend(w, i, &Holder::Reconciler).is_none() {
        w.reconciler = Reconciler::Ready(Request {
            intention: i,
            started: w.commitment,
        });
    }
}

fn webhook(m: &Una, w: &mut World, k: usize, dup: bool) {
    if k > 0 {
        w.reordered += 1;
    }
    let h = if dup {
        w.duplicated += 1;
        w.webhooks[k]
    } else {
        w.webhooks.remove(k)
    };
    let s = if h.delivered { Signal::Delivered } else { Signal::Sent };
    if m.is(Mutation::WebhookNotMonotonic) {
        let to = if h.delivered {
            IntentionState::Delivered
        } else {
            IntentionState::Sent
        };
        if !w.intentions[h.intention].state.is_terminal() {
            set(w, h.intention, to, "webhook");
        }
    } else {
        signal(w, h.intention, s, "webhook");
    }
}

fn operator(m: &Una, w: &mut World, s: usize, op: Op, i: usize) {
    let f = rules::guard_facts(w, i, m.bounds.max_resends);
    let verdict = match op {
        Op::Cancel => rules::cancel(&f, false),
        Op::Verify => rules::verify(&f),
        Op::Resend => {
            let v = rules::authorize_resend(&f);
            let unknown = matches!(
                f.resend.original,
                IntentionState::Dispatching | IntentionState::Uncertain
            );
            if m.is(Mutation::ResendWhileUncertain) && unknown {
                Ok(())
            } else {
                v
            }
        }
    };
    if verdict.is_err() {
        w.supervisors[s] = Supervisor::Done;
        return;
    }
    if m.is(Mutation::GuardOutsideTx) {
        w.supervisors[s] = Supervisor::Read(op, i);
        return;
    }
    write(m, w, op, i);
    w.supervisors[s] = Supervisor::Done;
}

/// The operator's write, and its one audit row when it changed something.
fn write(m: &Una, w: &mut World, op: Op, i: usize) {
    let changed = match op {
        Op::Cancel => {
            let moved = signal(w, i, Signal::Cancel(CancelReason::Operator), "operator cancel");
            if moved {
                w.intentions[i].reason = Some(CancelReason::Operator.as_str().into());
            }
            moved
        }
        Op::Verify => w.commands[i] > 0 && signal(w, i, Signal::Accepted, "verify"),
        Op::Resend => {
            let original = &w.intentions[i];
            let blind = matches!(
                original.state,
                IntentionState::Planned | IntentionState::Dispatching | IntentionState::Uncertain
            );
            let resend = Intention {
                family: i,
                purpose: original.purpose.clone(),
                planned_version: w.commitment.version,
                state: IntentionState::Planned,
                reason: None,
                lease: None,
                attempt: None,
                blind,
            };
            w.intentions.push(resend);
            w.commands.push(0);
            let _ = m;
            true
        }
    };
    if changed {
        w.changing_actions += 1;
        w.audit_rows += 1;
    }
}
