//! Values that nothing can read again, reset to one canonical value so
//! that states differing only in them are one state for the checker
//! (docs/verification.md, "Dead values"). Two kinds:
//!
//! - [`forget`], in the symmetry representative: a field that no future
//!   step (its enabling, its effect, a call into core) and no property
//!   reads again. Two states that differ only in such fields have the same
//!   futures step for step and the same property values (a step that
//!   writes only dead fields leads to the same class), so the checker may
//!   keep one of them;
//! - [`hooks_due_now`], in the transition itself: a webhook that can no
//!   longer change its row, or whose row nothing else reads again, is
//!   delivered at once.

use unavez_core::domain::state::IntentionState;

use crate::model::working_on;
use crate::world::{Op, Reconciler, Supervisor, World};

/// A row no step of the model moves any more: delivered (the engine
/// reports nothing above it; a cancel, a review or a timeout are refused
/// from it by core's state machine), or terminal. `read` is listed for
/// completeness: the engine never reports it.
pub fn settled_for_good(s: IntentionState) -> bool {
    matches!(
        s,
        IntentionState::Delivered | IntentionState::Read | IntentionState::Failed | IntentionState::Cancelled
    )
}

/// Whether a dispatcher or the reconciler is working on row `i` (the only
/// processes that read a row's attempt and may record an answer for it).
fn worked_on(w: &World, i: usize) -> bool {
    let reconciler = match w.reconciler {
        Reconciler::Idle => false,
        Reconciler::Ready(r) => usize::from(r.intention) == i,
        Reconciler::Answered(j, _) => usize::from(j) == i,
    };
    reconciler || w.dispatchers().iter().any(|&pc| working_on(pc, i))
}

/// Resets what nothing reads again (see the module's header and
/// docs/verification.md for why each one is dead). Allocates nothing: it
/// runs for every state generated.
pub fn forget(w: &mut World) {
    let idle_supervisor = w.supervisors().contains(&Supervisor::Idle);
    for i in 0..usize::from(w.rows) {
        let busy = worked_on(w, i);
        let row = &mut w.intentions[i];
        // A lease that ran out, its owner already forgotten (not working
        // on the row): read by no one, like no lease at all.
        if row.lease.is_some_and(|l| !l.live && l.owner == crate::world::NOBODY) {
            row.lease = None;
        }
        // An attempt is read by the pre-send re-check and the recorded
        // answer of a process working on the row, and by the expiry of a
        // live lease; a claim or a repeat writes a new one, and only a
        // planned or uncertain row is claimed or repeated.
        let open = matches!(
            row.state,
            IntentionState::Planned | IntentionState::Dispatching | IntentionState::Uncertain
        );
        if !open && !busy && !row.lease.is_some_and(|l| l.live) {
            row.attempt = None;
        }
        // A reason is read by "nothing silently lost" (a row in review)
        // and by the guard (a supervisor still to act on the first
        // family); a row settled for good never enters review again.
        if settled_for_good(row.state) && !busy && (row.family != 0 || !idle_supervisor) {
            row.reason = None;
        }
    }
    // The audit property compares the two counts, and both only ever grow
    // together or apart by a step: their difference is all that is read.
    let common = w.audit_rows.min(w.changing_actions);
    w.audit_rows -= common;
    w.changing_actions -= common;
    if endgame(w, idle_supervisor) {
        // No process works again: no crash, no lost answer, no frozen
        // lease (it needs a working holder) can happen any more.
        w.crashes = [0; crate::world::MAX_DISPATCHERS];
        w.lost_answers = 0;
        w.expiries = 0;
        // No command is created any more: with no webhook on its way, the
        // webhook faults cannot happen either.
        if !w.in_flight() {
            w.duplicated = 0;
            w.reordered = 0;
        }
        // The commitment is read by claims, re-checks, repeats, recorded
        // answers (none any more) and the guard (no supervisor left).
        if !idle_supervisor {
            w.commitment = crate::world::Commitment {
                version: 1,
                cancelled: false,
            };
            w.changes = 0;
            w.cancellations = 0;
        }
    }
}

/// No process can ever work again: every dispatcher and the reconciler
/// idle, no row planned, dispatching or uncertain (core's state machine
/// never returns a row there from anywhere else: a claim needs `planned`,
/// a repeat `uncertain`), and no new row can appear (a resend is the only
/// new row: none being written, and either no supervisor left to ask or
/// the day's cap reached, which core's guard refuses past).
fn endgame(w: &World, idle_supervisor: bool) -> bool {
    let open = w.rows().iter().any(|r| {
        matches!(
            r.state,
            IntentionState::Planned | IntentionState::Dispatching | IntentionState::Uncertain
        )
    });
    if open
        || w.reconciler != Reconciler::Idle
        || w.dispatchers().iter().any(|&pc| pc != crate::world::Dispatcher::Idle)
    {
        return false;
    }
    let writing_resend = w
        .supervisors()
        .iter()
        .any(|s| matches!(s, Supervisor::Read(Op::Resend, _)));
    let resends = w
        .rows()
        .iter()
        .enumerate()
        .filter(|(i, r)| usize::from(r.family) != *i)
        .count();
    !writing_resend && (!idle_supervisor || resends >= usize::from(w.max_resends))
}

/// A pending `sent` webhook can no longer change a row that is `sent` or
/// beyond for good, a `delivered` one a row `delivered` or beyond: core
/// records it as lower, repeated or after a terminal state, and no step
/// of the model moves such a row below it again (tested against core in
/// `tests::hooks_on_such_rows_change_nothing`).
pub fn sent_is_dead(s: IntentionState) -> bool {
    s == IntentionState::Sent || settled_for_good(s)
}

/// Whether nothing but its own webhooks can read or move row `i` again:
/// no process works on it and none can start (it is not planned,
/// dispatching or uncertain, the states a claim, a lease expiry or a
/// repeat act on; no live lease), and no supervisor can still act on it
/// (the guard reads the first family only).
pub fn unwatched(w: &World, i: usize) -> bool {
    let row = &w.intentions[i];
    let open = matches!(
        row.state,
        IntentionState::Planned | IntentionState::Dispatching | IntentionState::Uncertain
    );
    let supervised = row.family == 0 && w.supervisors().iter().any(|s| *s != Supervisor::Done);
    !open && !supervised && !row.lease.is_some_and(|l| l.live) && !worked_on(w, i)
}

/// The webhooks of row `i` that [`crate::step`] delivers at once, in
/// their order (`sent`, then `delivered`): every one if the row is
/// [`unwatched`], else those that can no longer change it. Either way
/// the skipped interleavings reach only states that a state kept here
/// dominates (docs/verification.md, "Dead values").
pub fn hooks_due_now(w: &World, i: usize) -> (bool, bool) {
    let row = &w.intentions[i];
    if !row.hook_sent && !row.hook_delivered {
        return (false, false);
    }
    if unwatched(w, i) {
        return (row.hook_sent, row.hook_delivered);
    }
    (
        row.hook_sent && sent_is_dead(row.state),
        row.hook_delivered && settled_for_good(row.state),
    )
}

#[cfg(test)]
mod tests {
    use unavez_core::domain::state::Signal;

    use super::*;
    use crate::rules::apply;

    /// The premises of [`hooks_due_now`] and of the reason
    /// forgotten on a settled row, asked of core: every signal the model
    /// sends leaves a row `sent` or beyond where it is, or moves it up to
    /// `delivered`; a row settled for good never moves; and the hooks it
    /// forgets change nothing.
    #[test]
    fn hooks_on_such_rows_change_nothing() {
        // The signals the model's steps send: every kind but `read` and
        // `failed`.
        let signals = Signal::KINDS
            .into_iter()
            .filter(|s| !matches!(s, Signal::Read | Signal::Failed));
        for from in IntentionState::ALL.into_iter().filter(|s| sent_is_dead(*s)) {
            assert_eq!(apply(from, Signal::Sent), None, "{from}");
            for signal in signals.clone() {
                match apply(from, signal) {
                    None => {}
                    Some(to) => assert!(
                        !settled_for_good(from) && to == IntentionState::Delivered,
                        "{from} --{signal:?}--> {to}"
                    ),
                }
            }
            if settled_for_good(from) {
                assert_eq!(apply(from, Signal::Delivered), None, "{from}");
            }
            // A late answer recorded by a process still working on it,
            // and a lease that runs out over it.
            let mut w = World::new(&crate::Bounds::default());
            for version in 1..=2 {
                w.commitment.version = version;
                let row = &mut w.intentions[0];
                row.state = from;
                for attempt in [
                    None,
                    Some(crate::world::Attempt {
                        n: 1,
                        version_checked: 1,
                    }),
                ] {
                    w.intentions[0].attempt = attempt;
                    assert!(!crate::rules::expire(0, &w.intentions[0]), "{from}");
                    for (reconciler, held, accepted) in (0..8).map(|b| (b & 1 == 1, b & 2 == 2, b & 4 == 4)) {
                        let (to, _) = crate::rules::finish(&w, 0, reconciler, held, accepted);
                        assert!(
                            to.is_none() || (!settled_for_good(from) && to == Some(IntentionState::Delivered)),
                            "{from} -> {to:?}"
                        );
                    }
                }
            }
        }
    }
}
