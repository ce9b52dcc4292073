//! The model at `cargo test`'s bounds: every property holds over every
//! interleaving (docs/verification.md). Prints the states explored and the
//! time. `UNAVEZ_MODEL_DEEP=1` adds the run at the bounds read from the
//! environment (`Bounds::from_env`).

use std::time::Instant;

use stateright::{Checker, Model};
use unavez_model::{Bounds, Una};

fn check(what: &str, bounds: Bounds) {
    let start = Instant::now();
    let checker = Una::new(bounds).checker().spawn_bfs().join();
    println!(
        "model, {what} {bounds:?}: {} states ({} unique), depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        start.elapsed()
    );
    for (name, path) in checker.discoveries() {
        println!("{name} violated:\n{}", unavez_model::trace::render(&path));
    }
    checker.assert_properties();
}

#[test]
fn the_dispatch_protocol_holds_every_property() {
    check("dispatch", Bounds::dispatch());
}

#[test]
fn two_supervisors_at_once_hold_every_property() {
    check("operators", Bounds::operators());
}

#[test]
fn the_deeper_bounds_on_demand() {
    if std::env::var_os("UNAVEZ_MODEL_DEEP").is_none() {
        println!(
            "set UNAVEZ_MODEL_DEEP=1 (and UNAVEZ_MODEL_DISPATCHERS, _INTENTIONS, _CHANGES, _SUPERVISORS) for the deeper run"
        );
        return;
    }
    check("deep", Bounds::from_env());
}
