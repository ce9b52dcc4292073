//! The model at `cargo test`'s bounds: every property holds over every
//! interleaving of the whole default budget, in one check; the
//! deeper bounds run on demand. Prints the states explored, the wall time
//! and the CPU time.
//!
//! Depth-first with symmetry reduction: stateright 0.31's breadth-first
//! checker ignores `symmetry()` and keeps its whole frontier of states in
//! memory; the depth-first one keeps a fingerprint per state.

use std::io::Write;
use std::time::{Duration, Instant};

use stateright::{Checker, Model};
use unavez_model::{Bounds, Una};

/// The CPU time this process used so far (Linux; `None` elsewhere): on a
/// machine shared with other work, the wall time says little.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces): utime and
    // stime are the 12th and 13th, in clock ticks (100 per second).
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let ticks: u64 = fields.next()?.parse::<u64>().ok()? + fields.next()?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Checks `bounds` within `limit`; whether the check finished.
fn check(what: &str, bounds: Bounds, limit: Duration) -> bool {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    let cpu_start = cpu_time();
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
    let cpu = match (cpu_start, cpu_time()) {
        (Some(a), Some(b)) => format!(" ({:.1?} of CPU in this process)", b.saturating_sub(a)),
        _ => String::new(),
    };
    // Written to the process's stderr itself, which the test harness does
    // not capture: `cargo test` shows the figures without `--nocapture`.
    let _ = writeln!(
        std::io::stderr(),
        "model, {what} {bounds:?}: {} states, {} unique after symmetry and dead values, depth {}, {elapsed:.1?} \
         on {threads} threads{cpu}{}",
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

/// `cargo test`'s limit: the check must finish well within two minutes
/// on an idle 2-core machine; the limit only turns a runaway model into a
/// failure instead of a hung CI job (a loaded machine stretches the wall
/// time, hence the margin; the CPU time is printed).
const CI_LIMIT: Duration = Duration::from_secs(600);

/// The whole default budget in one check: 2 dispatchers, 2
/// intentions (a booking notice and a reminder, each with its resend),
/// the reconciler, the engine, a change and a cancellation, 2 supervisors
/// at once, every fault.
#[test]
fn the_whole_default_budget_holds_every_property() {
    assert!(
        check("default", Bounds::default(), CI_LIMIT),
        "not finished in {CI_LIMIT:?}"
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
