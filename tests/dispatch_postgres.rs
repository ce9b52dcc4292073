//! The dispatcher on a PostgreSQL ledger, through the real binary and the
//! engine simulator over loopback HTTP, judged by the simulator's log:
//! every due intention goes out exactly once; a second run sends nothing;
//! and three `dispatch` processes started at once on one ledger (as
//! dispatchers on three hosts would be) still send each message once,
//! because each claim locks what it takes and skips what another holds;
//! `serve` (dispatcher, reconciler, HTTP server) runs on it the same way.

mod dispatch_support;

use std::time::Duration;

use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez_testkit::PgSchema;

#[test]
fn due_notices_go_out_once_from_a_postgresql_ledger() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 8);
    let schema = PgSchema::new();
    let env = Env::postgres(&Cfg::motor(&sim.base_url()).with_lease(30), &schema.url);
    let events: Vec<String> = (0..10).map(|n| scheduled(&format!("cita-pg{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    env.ok(&["dispatch", "--until-idle"]);
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 10));
    env.ok(&["dispatch", "--until-idle"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), 10);
    let states: Vec<IntentionState> = env.intentions().iter().map(|i| i.state).collect();
    assert!(
        states
            .iter()
            .all(|s| *s != IntentionState::Planned && *s != IntentionState::Dispatching),
        "{states:?}"
    );
}

#[test]
fn three_dispatch_processes_on_one_postgresql_ledger_send_each_message_once() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 9);
    let schema = PgSchema::new();
    let env = Env::postgres(&Cfg::motor(&sim.base_url()).with_lease(30), &schema.url);
    let events: Vec<String> = (0..60).map(|n| scheduled(&format!("cita-multi{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    let runs: Vec<_> = (0..3)
        .map(|_| env.command(&["dispatch", "--until-idle"]).spawn().unwrap())
        .collect();
    for mut r in runs {
        assert!(r.wait().unwrap().success());
    }
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 60));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), 60);
    let attempts: usize = env
        .intentions()
        .iter()
        .map(|i| env.store().read(|tx| tx.attempts(i.id)).unwrap().len())
        .sum();
    assert_eq!(attempts, 60, "one attempt per intention, whoever claimed it");
}

#[test]
fn serve_on_a_postgresql_ledger_sends_each_notice_once_and_stops_gracefully() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 10);
    let schema = PgSchema::new();
    let env = Env::postgres(&Cfg::motor(&sim.base_url()).with_lease(30), &schema.url);
    let events: Vec<String> = (0..20).map(|n| scheduled(&format!("cita-serve{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    let mut serve = env.spawn(&["serve"]);
    assert!(
        wait_until(Duration::from_secs(20), || sent_keys(log.path()).len() >= 20),
        "serve on PostgreSQL sent {} of 20",
        sent_keys(log.path()).len()
    );
    let out = serve.terminate();
    assert!(out.contains("stopped: claimed"), "{out}");
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), 20);
    // A second serve on the same ledger finds nothing left to send.
    let mut again = env.spawn(&["serve"]);
    std::thread::sleep(Duration::from_millis(1500));
    again.terminate();
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), 20);
}
