//! Fencing on one host: a dispatcher process frozen (SIGSTOP) past its
//! lease, while the appointments it had claimed are rescheduled, is thawed
//! (SIGCONT). Whatever it sends after the change must be for the new
//! version: the pre-send re-check (lease owner, lease time, commitment
//! version) stops what it no longer owns. The engine simulator's log of
//! what went out is the ground truth, not the ledger's own states.

mod dispatch_support;

use std::process::Command;
use std::time::Duration;

use chrono::Utc;
use dispatch_support::*;
use unavez::domain::state::IntentionState;

/// Whether another process could write the ledger now (a process frozen
/// inside a write transaction would hold SQLite's write lock: that is a
/// different test).
fn writable(db: &std::path::Path) -> bool {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_millis(300)).unwrap();
    c.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_ok()
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill").arg(sig).arg(pid.to_string()).status().unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

#[test]
fn a_dispatcher_frozen_past_its_lease_sends_nothing_the_change_retired() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "latency_ms=60..120", 17);
    let mut cfg = Cfg::motor(&sim.base_url()).with_lease(2);
    cfg.batch_size = 8;
    cfg.concurrency = 2;
    let env = Env::new(&cfg);
    let total = 160;
    let starts = Utc::now() + chrono::Duration::days(3);
    let refs: Vec<String> = (0..total).map(|n| format!("cita-f{n}")).collect();
    let events: Vec<String> = refs
        .iter()
        .enumerate()
        .map(|(n, r)| scheduled_at(r, n, starts, 1))
        .collect();
    env.import("agenda.jsonl", &events);

    let mut dispatcher = env.spawn(&["serve"]);
    assert!(
        wait_until(Duration::from_secs(30), || sent_keys(log.path()).len() >= 10),
        "the dispatcher sent nothing"
    );
    // Freeze it while it holds claims.
    let mut held = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            signal(dispatcher.pid(), "-STOP");
            held = env
                .intentions()
                .into_iter()
                .filter(|i| i.state == IntentionState::Dispatching)
                .map(|i| i.key)
                .collect();
            let caught = !held.is_empty() && writable(&env.db);
            if !caught {
                signal(dispatcher.pid(), "-CONT");
                std::thread::sleep(Duration::from_millis(37));
            }
            caught
        }),
        "never caught the dispatcher holding a claim"
    );
    // Past the lease, every appointment moves: the held claims are for a
    // version that no longer exists.
    std::thread::sleep(Duration::from_millis(3_000));
    let moved: Vec<String> = refs
        .iter()
        .map(|r| rescheduled(r, starts + chrono::Duration::hours(2), 2))
        .collect();
    env.import("cambios.jsonl", &moved);
    let before_change = sent_keys(log.path()).len();

    signal(dispatcher.pid(), "-CONT");
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "not settled after the thaw: {:?}",
        env.state_counts()
    );
    dispatcher.terminate();
    std::thread::sleep(Duration::from_millis(200));

    let sent = sent_keys(log.path());
    let after: Vec<&String> = sent[before_change..].iter().collect();
    // Nothing for version 1 went out once version 2 existed.
    let stale: Vec<&&String> = after.iter().filter(|k| k.contains(":v1")).collect();
    assert!(
        stale.is_empty(),
        "sent for a retired version after the change: {stale:?} (held while frozen: {held:?})"
    );
    for k in &held {
        assert!(
            !after.contains(&k),
            "{k} was held by the frozen dispatcher and went out after the change"
        );
    }
    // The change was announced, once per appointment still ahead.
    assert_no_duplicates(log.path());
    assert!(
        after.iter().any(|k| k.contains(":v2")),
        "no update notice went out: {after:?}"
    );
    // And the ledger agrees with the engine: every held claim ended
    // without a message.
    let rows = env.by_key();
    eprintln!(
        "held while frozen: {}; ended: {:?}",
        held.len(),
        held.iter()
            .map(|k| (rows[k].state, rows[k].state_reason.clone()))
            .collect::<Vec<_>>()
    );
    for k in &held {
        let row = &rows[k];
        assert!(
            !row.state.has_channel_evidence() || sent[..before_change].contains(k),
            "{k} is {} in the ledger",
            row.state
        );
    }
}
