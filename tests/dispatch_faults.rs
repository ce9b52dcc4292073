//! Issue 3, tests 2 and 3: sends that time out after being processed, and
//! a simulator that is down for a while.

mod dispatch_support;

use std::time::Duration;

use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez::sim::PauseMode;
use unavez_testkit::{Backend, on_both};

/// Test 2: 30% of sends are processed but their response is lost. Zero
/// duplicates, and every one of them reconciled (same key, same command)
/// to the engine's real state.
fn timeouts_after_processing_are_reconciled_without_duplicates(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "timeout_after=0.3,hold_ms=1500,latency_ms=1..5", 2);
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()));
    let events: Vec<String> = (0..150).map(|n| scheduled(&format!("cita-t{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let mut serve = env.spawn(&["serve"]);
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "not settled: {:?}",
        env.state_counts()
    );
    serve.terminate();

    assert!(sim.stats().faults.timeout_after > 0, "the fault never fired");
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 150));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    let sent = sent_counts(log.path());
    let mut were_uncertain = 0;
    for i in env.intentions() {
        assert!(i.state.has_channel_evidence(), "{} is {}", i.key, i.state);
        assert_eq!(
            sent.get(&i.key),
            Some(&1),
            "{} went out {:?} times",
            i.key,
            sent.get(&i.key)
        );
        let h = env.history(i.id);
        if h.iter().any(|r| r.to_state == "uncertain" && r.applied) {
            were_uncertain += 1;
            // Reconciled to the engine's own command for that key.
            let cmd = sim.command_by_key(INSTANCE, &i.key).expect("the engine knows the key");
            assert_eq!(
                i.provider_command_id.as_deref(),
                Some(cmd.command_id.as_str()),
                "{}",
                i.key
            );
            let resolved = h.iter().rev().find(|r| r.applied).unwrap();
            assert_eq!(resolved.cause, "reconciler", "{}: {resolved:?}", i.key);
        }
    }
    assert!(
        were_uncertain > 10,
        "expected many uncertain outcomes, got {were_uncertain}"
    );
    rt.block_on(sim.shutdown());
}

/// Test 3: the engine refuses connections for a while. Nothing is lost
/// (every intention goes out once it is back) and nothing is duplicated.
fn simulator_down_for_a_while_loses_and_duplicates_nothing(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "latency_ms=20..60", 3);
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()));
    let morning: Vec<String> = (0..60).map(|n| scheduled(&format!("cita-o{n}"), n)).collect();
    env.import("manana.jsonl", &morning);

    let mut serve = env.spawn(&["serve"]);
    // Let part of the day go out, then take the engine down (connections
    // refused, open ones dropped mid-request).
    assert!(wait_until(Duration::from_secs(30), || sent_keys(log.path()).len() >= 20));
    sim.pause(PauseMode::Refuse, None);
    // Bookings keep arriving while it is down.
    let afternoon: Vec<String> = (60..200).map(|n| scheduled(&format!("cita-o{n}"), n)).collect();
    env.import("tarde.jsonl", &afternoon);
    // Their sends fail before processing and back off, back to planned.
    assert!(wait_until(Duration::from_secs(30), || {
        env.intentions()
            .iter()
            .any(|i| i.state == IntentionState::Planned && i.attempt_count > 0)
    }));
    std::thread::sleep(Duration::from_secs(2));
    let during = env.state_counts();
    sim.resume();
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "not settled after the engine came back: {:?} (during the outage: {during:?})",
        env.state_counts()
    );
    serve.terminate();

    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 200));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    let sent = sent_counts(log.path());
    for i in env.intentions() {
        assert!(i.state.has_channel_evidence(), "{} is {}", i.key, i.state);
        assert_eq!(sent.get(&i.key), Some(&1), "{}", i.key);
    }
    rt.block_on(sim.shutdown());
}

/// An engine-reported ambiguous command is never repeated: the reconciler
/// reads the command (its id came with the ambiguous answer) until the
/// engine resolves it, and the final state matches the engine's.
fn ambiguous_commands_are_read_until_resolved_never_repeated(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let timing = unavez::sim::SimTiming {
        resolve_ms: 4000,
        ..Default::default()
    };
    let opts = unavez::sim::SimOptions {
        log: Some(log.path().to_path_buf()),
        faults: unavez::sim::FaultSpec::parse("timeout_after=0.5,ambiguous=1.0,hold_ms=1000").unwrap(),
        seed: 11,
        timing,
        ..Default::default()
    };
    let sim = rt.block_on(unavez::sim::spawn(opts)).unwrap();
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()));
    let events: Vec<String> = (0..40).map(|n| scheduled(&format!("cita-a{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let mut serve = env.spawn(&["serve"]);
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "not settled: {:?}",
        env.state_counts()
    );
    serve.terminate();
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    let sent = sent_counts(log.path());
    let mut ambiguous = 0;
    for i in env.intentions() {
        let attempts = env.store().read(|tx| tx.attempts(i.id)).unwrap();
        let Some(pos) = attempts.iter().position(|a| a.outcome.as_str() == "ambiguous") else {
            continue;
        };
        ambiguous += 1;
        assert_eq!(
            pos,
            attempts.len() - 1,
            "{} was repeated after the engine called it ambiguous",
            i.key
        );
        let h = env.history(i.id);
        assert!(
            h.iter().any(|r| r.applied
                && r.note
                    .as_deref()
                    .unwrap_or("")
                    .starts_with("lookup: the channel reports")),
            "{} not resolved by reading the command: {h:#?}",
            i.key
        );
        let cmd = sim.command_by_key(INSTANCE, &i.key).unwrap();
        if cmd.estado == "fallido" {
            assert_eq!(i.state, IntentionState::Failed, "{}", i.key);
            assert!(!sent.contains_key(&i.key));
        } else {
            assert!(
                i.state.has_channel_evidence(),
                "{} is {} but the engine says {}",
                i.key,
                i.state,
                cmd.estado
            );
            assert_eq!(sent.get(&i.key), Some(&1));
        }
    }
    assert!(ambiguous > 0, "no repeat landed while a command was ambiguous");
    rt.block_on(sim.shutdown());
}

on_both!(
    timeouts_after_processing_are_reconciled_without_duplicates,
    simulator_down_for_a_while_loses_and_duplicates_nothing,
    ambiguous_commands_are_read_until_resolved_never_repeated,
);
