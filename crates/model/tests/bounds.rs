//! The model at `cargo test`'s bounds, the whole default budget in
//! one check: every property holds over every interleaving
//! (docs/verification.md). Prints the states explored and the time.
//!
//! Depth-first with symmetry reduction: stateright 0.31's breadth-first
//! checker ignores `symmetry()` and keeps its whole frontier of states in
//! memory; the depth-first one keeps a fingerprint per state.

use std::time::{Duration, Instant};

use stateright::{Checker, Model};
use unavez_model::{Bounds, Una};

/// Checks `bounds` within `limit`; whether the check finished.
fn check(what: &str, bounds: Bounds, limit: Duration) -> bool {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    let checker = Una::new(bounds)
        .checker()
        .symmetry()
        .threads(threads)
        .timeout(limit)
        .spawn_dfs();
    // Progress every half minute, so a long run shows where it is.
    let mut next = Duration::from_secs(30);
    while !checker.is_done() {
        std::thread::sleep(Duration::from_millis(200));
        if start.elapsed() >= next {
            println!(
                "  {what}: {:.0?}, {} states, {} unique",
                start.elapsed(),
                checker.state_count(),
                checker.unique_state_count()
            );
            next += Duration::from_secs(30);
        }
    }
    let checker = checker.join();
    let elapsed = start.elapsed();
    let finished = elapsed < limit;
    println!(
        "model, {what} {bounds:?}: {} states, {} unique after symmetry, depth {}, {elapsed:.1?} on {threads} \
         threads{}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        if finished { "" } else { ", STOPPED at the time limit" }
    );
    for (name, path) in checker.discoveries() {
        println!("{name} violated:\n{}", unavez_model::trace::render(&path));
    }
    checker.assert_properties();
    finished
}

#[test]
fn the_default_budget_holds_every_property() {
    let limit = Duration::from_secs(600);
    assert!(
        check("default", Bounds::default(), limit),
        "the default bounds did not finish in {limit:?}"
    );
}

/// The deeper run of docs/verification.md: 3 dispatchers, 3 intentions,
/// 2 changes, 2 supervisors (any of them overridden by
/// `UNAVEZ_MODEL_DISPATCHERS`, `_INTENTIONS`, `_CHANGES`, `_SUPERVISORS`),
/// stopped after `UNAVEZ_MODEL_MINUTES` (20). A stopped run still checked
/// every property on every state it reached.
#[test]
#[ignore = "minutes to hours: run on demand (docs/verification.md)"]
fn the_deeper_bounds() {
    let minutes = std::env::var("UNAVEZ_MODEL_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(20);
    check(
        "deep",
        Bounds::from_env(Bounds::deep()),
        Duration::from_secs(60 * minutes),
    );
}
