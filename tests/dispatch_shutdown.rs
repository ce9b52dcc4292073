//! Graceful shutdown of `unavez serve`: stop claiming, wait for sends in
//! flight up to the grace period, record the still-unknown as `uncertain`
//! (never `planned`), and let reconciliation settle them without a second
//! message.

mod dispatch_support;

use std::time::Duration;

use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez_testkit::{Backend, on_both};

fn sigterm_with_sends_in_flight_leaves_them_uncertain_and_reconciliation_settles_them(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    // Each send spends 4 s in the engine; the grace period is 0.5 s.
    let sim = start_sim(&rt, log.path(), "latency_ms=4000", 9);
    let mut cfg = Cfg::motor(&sim.base_url()).with_motor_timeout(20_000);
    cfg.shutdown_grace_ms = 500;
    cfg.lease_seconds = 60;
    cfg.concurrency = 3;
    cfg.batch_size = 3;
    let env = Env::with(backend, &cfg);
    let events: Vec<String> = (0..6).map(|n| scheduled(&format!("cita-s{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let mut serve = env.spawn(&["serve", "--json"]);
    assert!(wait_until(Duration::from_secs(20), || {
        env.intentions()
            .iter()
            .filter(|i| i.state == IntentionState::Dispatching)
            .count()
            == 3
    }));
    let out = serve.terminate();
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["dispatch"]["abandoned"], 3, "{report}");

    let rows = env.intentions();
    let uncertain: Vec<_> = rows.iter().filter(|i| i.state == IntentionState::Uncertain).collect();
    assert_eq!(uncertain.len(), 3, "{:?}", env.state_counts());
    // The other three were never claimed: still planned, never attempted.
    assert_eq!(
        rows.iter()
            .filter(|i| i.state == IntentionState::Planned && i.attempt_count == 0)
            .count(),
        3
    );
    for i in &uncertain {
        let h = env.history(i.id);
        let last = h.last().unwrap();
        assert_eq!(last.to_state, "uncertain");
        assert!(last.note.as_deref().unwrap_or("").contains("shutdown"), "{last:?}");
    }

    // Whether the engine processed the abandoned requests or not, the
    // reconciler's repeat with the same key settles them: one message each.
    sim.set_faults(unavez::sim::FaultSpec::default());
    assert!(wait_until(Duration::from_secs(30), || {
        env.ok(&["dispatch", "--until-idle"]);
        env.settled()
    }));
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 6));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    for i in env.intentions() {
        assert!(i.state.has_channel_evidence(), "{} is {}", i.key, i.state);
    }
    rt.block_on(sim.shutdown());
}

on_both!(sigterm_with_sends_in_flight_leaves_them_uncertain_and_reconciliation_settles_them,);
