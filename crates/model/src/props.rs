//! The properties, each an `always` over every reachable state.
//! "Nothing silently lost" is an `always` over quiescent states rather
//! than an `eventually` (stateright evaluates `eventually` only at
//! terminal states and its BFS can miss cycles).

use stateright::{Model, Property};
use unavez_core::domain::state::IntentionState;

use crate::model::Una;
use crate::model::working_on;
use crate::world::World;

pub const AT_MOST_ONCE: &str = "at most once";
pub const NEVER_STALE: &str = "never stale";
pub const MONOTONIC: &str = "monotonic evidence";
pub const ONE_HOLDER: &str = "one live lease holder";
pub const NOTHING_LOST: &str = "nothing silently lost";
pub const AUDIT: &str = "audit";

pub fn all() -> Vec<Property<Una>> {
    vec![
        Property::always(AT_MOST_ONCE, at_most_once),
        Property::always(NEVER_STALE, |_: &Una, w: &World| w.stale_commands == 0),
        Property::always(MONOTONIC, |_: &Una, w: &World| w.backward.is_none()),
        Property::always(ONE_HOLDER, |_: &Una, w: &World| one_holder(w)),
        Property::always(NOTHING_LOST, |m: &Una, w: &World| !quiescent(m, w) || settled(w)),
        Property::always(AUDIT, |_: &Una, w: &World| w.audit_rows == w.changing_actions),
    ]
}

/// One command per key (the engine's idempotency); a family's second
/// message only by an authorized resend, within the day's cap, and never
/// one authorized while the original's outcome was unknown (that would be
/// a blind duplicate).
pub fn at_most_once(m: &Una, w: &World) -> bool {
    (0..m.bounds.intentions as u8).all(|f| {
        let family = || w.rows().iter().filter(move |r| r.family == f);
        let resends = family().count() - 1;
        let sent = family().filter(|r| r.command).count();
        let blind = family().any(|r| r.blind);
        resends as u32 <= m.bounds.max_resends && !(blind && sent > 1)
    })
}

/// No two dispatchers work on a row whose lease is live.
pub fn one_holder(w: &World) -> bool {
    w.rows().iter().enumerate().all(|(i, row)| {
        let live = row.lease.is_some_and(|l| l.live);
        let working = w.dispatchers().iter().filter(|&&pc| working_on(pc, i)).count();
        !live || working <= 1
    })
}

/// No process can act and no message is in flight. Supervisors do not
/// count: a person acting is not something the protocol waits for.
pub fn quiescent(m: &Una, w: &World) -> bool {
    if w.in_flight() {
        return false;
    }
    // Evaluated in every state: one buffer per checker thread.
    thread_local! {
        static ACTIONS: std::cell::RefCell<Vec<crate::Action>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    ACTIONS.with_borrow_mut(|actions| {
        actions.clear();
        m.actions(w, actions);
        actions.iter().all(|a| {
            matches!(
                a,
                crate::Action::Operator(..)
                    | crate::Action::BookingChange
                    | crate::Action::BookingCancel
                    | crate::Action::Crash(_)
                    | crate::Action::LeaseOfFrozenExpires(_)
            )
        })
    })
}

/// Every row is terminal, acknowledged by the channel, or in review with
/// a reason a person sees.
pub fn settled(w: &World) -> bool {
    w.rows().iter().all(|r| match r.state {
        IntentionState::Review => r.reason.is_some(),
        s => s.is_terminal() || s.has_channel_evidence(),
    })
}
