//! The reductions lose nothing (docs/verification.md, "Dead values"):
//! at small bounds with every fault, the model searched with them (webhooks
//! delivered at once where they can change nothing or nothing else
//! observes them, states merged by the representative that forgets dead
//! values) and without them (every webhook in every order, every state
//! kept as it is, no symmetry) reach the same quiescent outcomes, every
//! state the reduced search reaches is one the full search reaches, and no
//! property fails in either.

use std::collections::{BTreeSet, HashSet};

use stateright::{Model, Representative};
use unavez_model::world::World;
use unavez_model::{Bounds, Mutation, Una, props};

/// What a property can read of a state: its representative, without the
/// webhooks still on their way and the webhook faults spent (the
/// reductions keep states that dominate in those).
fn outcome(w: &World) -> World {
    let mut r = w.representative();
    for row in &mut r.intentions {
        row.hook_sent = false;
        row.hook_delivered = false;
    }
    r.duplicated = 0;
    r.reordered = 0;
    r
}

struct Search {
    states: usize,
    /// The properties that fail somewhere.
    violated: BTreeSet<&'static str>,
    /// Every state's outcome, and the quiescent states' outcomes.
    reached: HashSet<World>,
    quiescent: HashSet<World>,
}

/// Depth-first over every reachable state; with `merge`, states with one
/// representative are one state (as the checker's symmetry does).
fn search(m: &Una, merge: bool) -> Search {
    let props = m.properties();
    let hasher = ahash::RandomState::with_seeds(1, 2, 3, 4);
    let key = |w: &World| {
        if merge {
            hasher.hash_one(w.representative())
        } else {
            hasher.hash_one(w)
        }
    };
    let init = m.init_states();
    let mut seen: HashSet<u64> = init.iter().map(key).collect();
    let mut stack = init;
    let mut out = Search {
        states: 0,
        violated: BTreeSet::new(),
        reached: HashSet::new(),
        quiescent: HashSet::new(),
    };
    let mut actions = Vec::new();
    while let Some(w) = stack.pop() {
        out.states += 1;
        for p in &props {
            if !(p.condition)(m, &w) {
                out.violated.insert(p.name);
            }
        }
        out.reached.insert(outcome(&w));
        if props::quiescent(m, &w) {
            out.quiescent.insert(outcome(&w));
        }
        m.actions(&w, &mut actions);
        for a in actions.drain(..) {
            if let Some(next) = m.next_state(&w, a)
                && seen.insert(key(&next))
            {
                stack.push(next);
            }
        }
    }
    out
}

fn compare(full: Una, reduced: Una) -> BTreeSet<&'static str> {
    let what = (reduced.bounds, reduced.mutation);
    let (full, reduced) = (search(&full, false), search(&reduced, true));
    println!(
        "{what:?}: {} states in full, {} reduced; {} quiescent outcomes; violated {:?}",
        full.states,
        reduced.states,
        full.quiescent.len(),
        full.violated
    );
    assert!(
        reduced.reached.is_subset(&full.reached),
        "the reduced search invented a state"
    );
    assert_eq!(reduced.quiescent, full.quiescent, "a quiescent outcome differs");
    assert_eq!(reduced.violated, full.violated, "the properties violated differ");
    full.violated
}

/// Two dispatchers on two families, every fault, no supervisor.
#[test]
fn two_families_reach_the_same_outcomes() {
    let b = Bounds::dispatch();
    assert!(compare(Una::unreduced(b), Una::new(b)).is_empty());
}

/// One family and its resend under two supervisors, every fault.
#[test]
fn two_supervisors_reach_the_same_outcomes() {
    let b = Bounds::operators();
    assert!(compare(Una::unreduced(b), Una::new(b)).is_empty());
}

/// Each rule of the dispatch protocol weakened: the same properties fail
/// with and without the reductions, and the same quiescent outcomes are
/// reached (2 dispatchers × 2 intentions, one row for the stealable
/// lease). Minutes of CPU: on demand. The two operator mutations are not
/// compared: their full searches ran past six minutes of CPU.
#[test]
#[ignore = "minutes: run on demand (docs/verification.md)"]
fn every_dispatch_mutation_breaks_the_same_properties_with_and_without_reductions() {
    for m in [
        Mutation::NoValidityBeforeRepeat,
        Mutation::NoPresendCheck,
        Mutation::StealableLease,
        Mutation::WebhookNotMonotonic,
    ] {
        let b = match m {
            // Two dispatchers on one row suffice, and the full search of
            // two rows is 48 million states.
            Mutation::StealableLease => Bounds {
                intentions: 1,
                ..Bounds::dispatch()
            },
            _ => Bounds::dispatch(),
        };
        let full = Una {
            eager_hooks: false,
            ..Una::mutated(b, m)
        };
        assert!(!compare(full, Una::mutated(b, m)).is_empty(), "{m:?} broke nothing");
    }
}
