//! The checker can fail: each [`Mutation`] weakens one rule, and the
//! checker must find a counterexample of the property it protects, printed
//! as a readable trace. One trace is replayed step by step against the
//! real core as a deterministic test.

use stateright::{Checker, HasDiscoveries, Model};
use unavez_model::props::{AT_MOST_ONCE, MONOTONIC, NEVER_STALE, ONE_HOLDER};
use unavez_model::{Action, Bounds, Mutation, Una};

fn found(m: Mutation, bounds: Bounds, property: &'static str) -> Vec<Action> {
    let checker = Una::mutated(bounds, m)
        .checker()
        .finish_when(HasDiscoveries::AnyOf(vec![property].into_iter().collect()))
        .spawn_bfs()
        .join();
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("{m:?}: the checker found no counterexample of {property:?}"));
    println!("{m:?} breaks {property:?}:\n{}", unavez_model::trace::render(&path));
    path.into_actions()
}

#[test]
fn no_validity_check_before_a_repeat_sends_a_stale_message() {
    found(Mutation::NoValidityBeforeRepeat, Bounds::dispatch(), NEVER_STALE);
}

#[test]
fn no_recheck_before_the_request_sends_a_stale_message() {
    found(Mutation::NoPresendCheck, Bounds::dispatch(), NEVER_STALE);
}

#[test]
fn a_stealable_lease_gives_a_row_two_live_holders() {
    found(Mutation::StealableLease, Bounds::dispatch(), ONE_HOLDER);
}

#[test]
fn a_webhook_without_the_monotonic_rule_moves_evidence_back() {
    found(Mutation::WebhookNotMonotonic, Bounds::dispatch(), MONOTONIC);
}

#[test]
fn a_resend_while_the_original_is_uncertain_duplicates_it() {
    found(Mutation::ResendWhileUncertain, Bounds::operators(), AT_MOST_ONCE);
}

#[test]
fn a_guard_read_outside_the_writing_transaction_lets_two_resends_pass() {
    found(Mutation::GuardOutsideTx, Bounds::operators(), AT_MOST_ONCE);
}

/// Session 10's bug as a fixed trace: a lease expires, the booking
/// changes, the reconciler repeats. Replayed through the real core rules:
/// without the validity check the repeat creates a stale command; with it,
/// the row goes to review with the reason a person sees and no command.
#[test]
fn the_repeat_after_a_change_replays_deterministically() {
    let steps = [
        Action::Claim(1, 1),
        Action::LeaseOfFrozenExpires(1),
        Action::BookingChange,
        Action::Reconcile(1),
    ];
    let mut bad = steps.to_vec();
    bad.push(Action::ReconcilerSend(true));
    let mutated = Una::mutated(Bounds::dispatch(), Mutation::NoValidityBeforeRepeat);
    let states = unavez_model::trace::replay(&mutated, &bad).expect("every step enabled");
    assert_eq!(states.last().unwrap().stale_commands, 1);

    let states = unavez_model::trace::replay(&Una::new(Bounds::dispatch()), &steps).expect("every step enabled");
    let last = states.last().unwrap();
    let row = &last.intentions[1];
    assert_eq!(row.state, unavez_core::domain::state::IntentionState::Review);
    assert_eq!(row.reason, Some("changed_while_uncertain"));
    assert!(!row.command);
}
