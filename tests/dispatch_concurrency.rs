//! Issue 3, tests 1 and 6: the same intentions presented concurrently from
//! two processes, and two dispatcher processes on one database.

mod dispatch_support;

use std::collections::HashMap;
use std::time::Duration;

use dispatch_support::*;
use unavez_testkit::{Backend, on_both};

/// Test 1: two processes import the same file at the same moment and then
/// two dispatcher processes run at the same moment → one record per
/// intention and one message per key in the simulator's log.
fn same_intentions_presented_concurrently_from_two_processes_send_one_message_each(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "latency_ms=1..10", 1);
    // A long lease: these tests are about claims, not about crash recovery.
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()).with_lease(30));
    let events: Vec<String> = (0..40).map(|n| scheduled(&format!("cita-c{n}"), n)).collect();
    let file = env.write_events("agenda.jsonl", &events);
    let file = file.to_str().unwrap();

    let mut i1 = env.spawn(&["import", file]);
    let mut i2 = env.spawn(&["import", file]);
    for p in [&mut i1, &mut i2] {
        let st = p.0.take().unwrap().wait_with_output().unwrap();
        assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    }
    assert_eq!(env.intentions().len(), 40);

    let mut d1 = env.spawn(&["dispatch", "--until-idle"]);
    let mut d2 = env.spawn(&["dispatch", "--until-idle"]);
    for p in [&mut d1, &mut d2] {
        let out = p.0.take().unwrap().wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(wait_until(Duration::from_secs(20), || sent_keys(log.path()).len() >= 40));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    let sent = sent_counts(log.path());
    for i in env.intentions() {
        assert!(i.state.has_channel_evidence(), "{} is {}", i.key, i.state);
        assert_eq!(sent.get(&i.key), Some(&1), "{}", i.key);
    }
    rt.block_on(sim.shutdown());
}

/// Test 6: two `serve` processes on one ledger never claim the same
/// intention: one claim, one attempt and one message per intention, and
/// both processes did part of the work.
fn two_dispatcher_processes_on_one_database_never_double_claim(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "latency_ms=10..30", 6);
    let mut cfg = Cfg::motor(&sim.base_url()).with_lease(30);
    cfg.batch_size = 4;
    cfg.concurrency = 4;
    let env = Env::with(backend, &cfg);
    let events: Vec<String> = (0..400).map(|n| scheduled(&format!("cita-d{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let mut s1 = env.spawn(&["serve"]);
    let mut s2 = env.spawn(&["serve"]);
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "not settled: {:?}",
        env.state_counts()
    );
    s1.terminate();
    s2.terminate();

    let mut owners: HashMap<String, usize> = HashMap::new();
    for i in env.intentions() {
        assert!(i.state.has_channel_evidence(), "{} is {}", i.key, i.state);
        let h = env.history(i.id);
        let claims: Vec<_> = h.iter().filter(|r| r.signal == "claim").collect();
        assert_eq!(claims.len(), 1, "{} claimed {} times", i.key, claims.len());
        *owners.entry(claims[0].note.clone().unwrap_or_default()).or_insert(0) += 1;
        let attempts = env.store().read(|tx| tx.attempts(i.id)).unwrap();
        assert_eq!(attempts.len(), 1, "{}", i.key);
    }
    assert_eq!(owners.len(), 2, "both processes should have claimed some: {owners:?}");
    assert!(wait_until(Duration::from_secs(20), || sent_keys(log.path()).len() >= 400));
    assert_no_duplicates(log.path());
    rt.block_on(sim.shutdown());
}

on_both!(
    same_intentions_presented_concurrently_from_two_processes_send_one_message_each,
    two_dispatcher_processes_on_one_database_never_double_claim,
);
