//! Counterexamples as a person reads them: one line per step (actor,
//! step, the state after it), and the steps as data so a test can replay
//! them against the real core ([`replay`]).

use std::fmt::Write;

use stateright::{Model, Path};

use crate::model::{Action, Una};
use crate::world::World;

/// Who took a step.
pub fn actor(a: &Action) -> String {
    match a {
        Action::Claim(d, _) | Action::Recheck(d) | Action::Send(d, _) | Action::Record(d) | Action::Crash(d) => {
            format!("dispatcher {d}")
        }
        Action::LeaseOfDeadExpires(_) | Action::LeaseOfFrozenExpires(_) => "clock".into(),
        Action::Reconcile(_) | Action::ReconcilerSend(_) | Action::ReconcilerRecord => "reconciler".into(),
        Action::Webhook(..) => "engine".into(),
        Action::BookingChange | Action::BookingCancel => "booking source".into(),
        Action::Operator(s, ..) | Action::OperatorWrite(s) => format!("supervisor {s}"),
    }
}

/// The state in one line: commitment, each row, the engine's commands.
pub fn summary(w: &World) -> String {
    let mut s = format!(
        "commitment v{}{}",
        w.commitment.version,
        if w.commitment.cancelled { " cancelled" } else { "" }
    );
    for (i, r) in w.rows().iter().enumerate() {
        let _ = write!(s, " | row {i} (family {}) {}", r.family, r.state);
        if let Some(l) = r.lease {
            let _ = write!(s, " lease d{}{}", l.owner, if l.live { "" } else { " expired" });
        }
        if let Some(reason) = r.reason {
            let _ = write!(s, " [{reason}]");
        }
        if r.command {
            let _ = write!(s, " command");
        }
    }
    if w.stale_commands > 0 {
        let _ = write!(s, " | stale commands {}", w.stale_commands);
    }
    if let Some(b) = w.backward {
        let _ = write!(s, " | backward: row {} {} -> {}", b.row, b.from, b.to);
    }
    s
}

/// A counterexample, numbered steps from the initial state.
pub fn render(path: &Path<World, Action>) -> String {
    let mut out = String::new();
    for (n, (state, action)) in path.clone().into_vec().into_iter().enumerate() {
        match action {
            // The action recorded with a state is the one taken from it.
            Some(a) => {
                let _ = writeln!(out, "{n:>3}. {}  then {}: {a:?}", summary(&state), actor(&a));
            }
            None => {
                let _ = writeln!(out, "{n:>3}. {}  (end)", summary(&state));
            }
        }
    }
    out
}

/// Replays `steps` from the initial state through the model's transitions
/// (the real core rules); `None` if a step is not enabled where it is
/// taken.
pub fn replay(m: &Una, steps: &[Action]) -> Option<Vec<World>> {
    let mut w = m.init_states().pop()?;
    let mut states = vec![w];
    for a in steps {
        let mut enabled = Vec::new();
        m.actions(&w, &mut enabled);
        if !enabled.contains(a) {
            return None;
        }
        w = m.next_state(&w, a.clone())?;
        states.push(w);
    }
    Some(states)
}
