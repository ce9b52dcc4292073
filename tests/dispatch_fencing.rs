//! Fencing, on both backends from one definition: two `serve` dispatchers
//! on one ledger (a SQLite file on one host, or the shared PostgreSQL
//! ledger); one of them is frozen (SIGSTOP) while it holds claims; the
//! appointments it holds are rescheduled at once, it stays frozen past its
//! lease, every other appointment is rescheduled too, and it is thawed
//! (SIGCONT). The other keeps dispatching meanwhile. Nothing for
//! the retired version may reach the engine after the change: the
//! pre-send re-check (lease owner, lease time, commitment version) stops
//! what the thawed one no longer owns, and validity stops the other's
//! repeats. The engine simulator's records are the ground truth, not the
//! ledger's own states: its log of what went out, and its journal of when
//! it first received each key, against the moment the change was committed
//! — the chaos harness's strict rule, with its grace for a request already
//! on its way when the change committed (the race the design accepts: the
//! other dispatcher keeps sending while the change is imported).
//!
//! It is frozen outside every transaction: frozen inside one it would hold
//! the write lock (SQLite) or row locks (PostgreSQL) that the rescheduling
//! import would wait for until the thaw. The claims it holds are its
//! leases, not locks, and the other dispatcher works on regardless.

mod dispatch_support;

use std::process::Command;
use std::time::Duration;

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez_testkit::{Backend, on_both};

/// Whether another process could write the ledger now: on SQLite, nobody
/// holds the write lock; on PostgreSQL, every connection of `app` (the
/// frozen dispatcher's) is outside a transaction.
fn outside_transactions(env: &Env, app: Option<&str>) -> bool {
    match app {
        None => {
            let c = rusqlite::Connection::open(&env.db).unwrap();
            c.busy_timeout(Duration::from_millis(300)).unwrap();
            c.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_ok()
        }
        Some(app) => {
            let row = admin()
                .query_one(
                    "SELECT count(*) FILTER (WHERE state IS DISTINCT FROM 'idle'), count(*)
                     FROM pg_stat_activity WHERE application_name = $1",
                    &[&app],
                )
                .unwrap();
            let (busy, all): (i64, i64) = (row.get(0), row.get(1));
            busy == 0 && all > 0
        }
    }
}

fn admin() -> postgres::Client {
    let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| unavez_testkit::DEFAULT_PG.to_string());
    postgres::Client::connect(&base, postgres::NoTls).unwrap()
}

/// Connections of `app` the server still has (a frozen process keeps them).
fn connections(app: &str) -> i64 {
    admin()
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0)
}

/// How long after the change's commit a first receipt still counts as a
/// request already on its way (the chaos checker's `IN_FLIGHT_GRACE_MS`).
const GRACE_MS: i64 = 500;

/// Key → when the engine first received it (ms), from its state journal.
fn first_receipts(journal: &Path) -> HashMap<String, i64> {
    let mut out: HashMap<String, i64> = HashMap::new();
    for line in std::fs::read_to_string(journal).unwrap_or_default().lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let cmd = &v["command"];
        let (Some(key), Some(at)) = (cmd["idempotency_key"].as_str(), cmd["created_at"].as_str()) else {
            continue;
        };
        let at = DateTime::parse_from_rfc3339(at).unwrap().timestamp_millis();
        out.entry(key.to_string())
            .and_modify(|t| *t = (*t).min(at))
            .or_insert(at);
    }
    out
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill").arg(sig).arg(pid.to_string()).status().unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

/// Keys the process `pid` holds: `dispatching` under its lease.
fn held_by(env: &Env, pid: u32) -> Vec<String> {
    let owner = format!("dispatcher-{pid}-");
    env.intentions()
        .into_iter()
        .filter(|i| i.state == IntentionState::Dispatching)
        .filter(|i| i.lease_owner.as_deref().is_some_and(|o| o.starts_with(&owner)))
        .map(|i| i.key)
        .collect()
}

fn a_dispatcher_frozen_past_its_lease_sends_nothing_the_change_retired(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let journal = tempfile::NamedTempFile::new().unwrap();
    let sim = rt
        .block_on(unavez::sim::spawn(unavez::sim::SimOptions {
            log: Some(log.path().to_path_buf()),
            state: Some(journal.path().to_path_buf()),
            faults: unavez::sim::FaultSpec::parse("latency_ms=60..120").unwrap(),
            seed: 17,
            ..Default::default()
        }))
        .unwrap();
    let mut cfg = Cfg::motor(&sim.base_url()).with_lease(2);
    cfg.batch_size = 8;
    cfg.concurrency = 2;
    let env = Env::with(backend, &cfg);
    // On PostgreSQL the frozen dispatcher's connections carry a name of
    // their own, to tell whether it is inside a transaction.
    let app = env
        .is_postgres()
        .then(|| format!("unavez_fenced_{}", std::process::id()));
    let total = 160;
    let starts = Utc::now() + chrono::Duration::days(3);
    let refs: Vec<String> = (0..total).map(|n| format!("cita-f{n}")).collect();
    let events: Vec<String> = refs
        .iter()
        .enumerate()
        .map(|(n, r)| scheduled_at(r, n, starts, 1))
        .collect();
    env.import("agenda.jsonl", &events);

    let named = app
        .as_ref()
        .map(|a| format!("{}&application_name={a}", env.db.display()));
    let mut frozen = match &named {
        None => env.spawn(&["serve"]),
        Some(url) => env.spawn(&["--db", url, "serve"]),
    };
    let mut other = env.spawn(&["serve"]);
    assert!(
        wait_until(Duration::from_secs(30), || sent_keys(log.path()).len() >= 10),
        "the dispatchers sent nothing"
    );
    // Freeze it while it holds claims, outside any transaction.
    let mut held = Vec::new();
    assert!(
        wait_until(Duration::from_secs(15), || {
            if held_by(&env, frozen.pid()).is_empty() {
                return false;
            }
            signal(frozen.pid(), "-STOP");
            std::thread::sleep(Duration::from_millis(50));
            held = held_by(&env, frozen.pid());
            let caught = !held.is_empty() && outside_transactions(&env, app.as_deref());
            if !caught {
                signal(frozen.pid(), "-CONT");
                std::thread::sleep(Duration::from_millis(37));
            }
            caught
        }),
        "never caught the dispatcher holding a claim outside a transaction"
    );
    let at_freeze = sent_keys(log.path()).len();
    // At once, while it is frozen and its lease still runs, the
    // appointments it holds move: what it holds is for a version that no
    // longer exists.
    let held_refs: Vec<&str> = held.iter().filter_map(|k| k.split(':').next()).collect();
    let moved = |refs: &[&str]| -> Vec<String> {
        refs.iter()
            .map(|r| rescheduled(r, starts + chrono::Duration::hours(2), 2))
            .collect()
    };
    env.import("cambios-retenidas.jsonl", &moved(&held_refs));
    let held_changed_ms = Utc::now().timestamp_millis();
    // Past the lease, every other appointment moves too: the other
    // dispatcher may have taken the expired claims over meanwhile.
    std::thread::sleep(Duration::from_millis(3_000));
    let others: Vec<&str> = refs
        .iter()
        .map(String::as_str)
        .filter(|r| !held_refs.contains(r))
        .collect();
    env.import("cambios.jsonl", &moved(&others));
    // The import committed and exited: the change is committed by now.
    let changed_ms = Utc::now().timestamp_millis();
    // When the change that retired a key's version was committed.
    let change_of = |k: &str| {
        if held_refs.iter().any(|r| k.split(':').next() == Some(*r)) {
            held_changed_ms
        } else {
            changed_ms
        }
    };
    let before_change = sent_keys(log.path()).len();
    // The other dispatcher did not wait for the frozen one: its leases are
    // not locks. On PostgreSQL the frozen process still has its
    // connections, idle.
    assert!(
        before_change > at_freeze,
        "nothing went out while one dispatcher was frozen ({at_freeze} before and after)"
    );
    if let Some(app) = &app {
        assert!(connections(app) > 0, "the frozen dispatcher's connections are gone");
    }

    signal(frozen.pid(), "-CONT");
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "not settled after the thaw: {:?}",
        env.state_counts()
    );
    frozen.terminate();
    other.terminate();
    std::thread::sleep(Duration::from_millis(200));

    let sent = sent_keys(log.path());
    let receipts = first_receipts(journal.path());
    // The engine's own time for each message; a message without one is
    // judged late (nothing proves it left before the change).
    let late = |k: &String| receipts.get(k).is_none_or(|t| *t > change_of(k) + GRACE_MS);
    // Nothing for version 1 reached the engine after version 2 existed.
    let stale: Vec<(&String, i64)> = sent
        .iter()
        .filter(|k| k.contains(":v1") && late(k))
        .map(|k| (k, receipts.get(k).map_or(-1, |t| t - change_of(k))))
        .collect();
    assert!(
        stale.is_empty(),
        "sent for a retired version after the change (key, ms after it): {stale:?} (held while frozen: {held:?})"
    );
    for k in &held {
        assert!(
            !(sent.contains(k) && late(k)),
            "{k} was held by the frozen dispatcher and went out after the change"
        );
    }
    // The change was announced, once per appointment still ahead.
    assert_no_duplicates(log.path());
    assert!(
        sent[before_change..].iter().any(|k| k.contains(":v2")),
        "no update notice went out after the change"
    );
    // And the ledger agrees with the engine: every held claim ended
    // without a message, unless it reached the engine before the change.
    let rows = env.by_key();
    let in_flight = sent
        .iter()
        .filter(|k| k.contains(":v1") && receipts.get(*k).is_some_and(|t| *t > change_of(k)))
        .count();
    eprintln!(
        "held while frozen: {}; sent while frozen {}; in flight across the change {in_flight}; ended: {:?}",
        held.len(),
        before_change - at_freeze,
        held.iter()
            .map(|k| (rows[k].state, rows[k].state_reason.clone()))
            .collect::<Vec<_>>()
    );
    for k in &held {
        let row = &rows[k];
        assert!(
            !row.state.has_channel_evidence() || (sent.contains(k) && !late(k)),
            "{k} is {} in the ledger",
            row.state
        );
    }
}

on_both!(a_dispatcher_frozen_past_its_lease_sends_nothing_the_change_retired);
