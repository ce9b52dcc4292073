//! `serve` on a PostgreSQL ledger whose connections the server keeps
//! terminating (`pg_terminate_backend`, as an administrator, a pooler or a
//! failover would): it must neither die nor crash-loop nor stay stuck on a
//! dead connection. Each call that meets a closed connection fails (and is
//! logged); the next one reconnects. Judged by the simulator's log: every
//! due notice goes out, once.

mod dispatch_support;

use std::time::{Duration, Instant};

use dispatch_support::*;
use unavez_testkit::PgSchema;

fn admin() -> postgres::Client {
    let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| unavez_testkit::DEFAULT_PG.to_string());
    postgres::Client::connect(&base, postgres::NoTls).unwrap()
}

/// Terminates every backend whose `application_name` is `app`; how many.
fn terminate(admin: &mut postgres::Client, app: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0)
}

/// Backends of `app` that started after `since` (seconds since the epoch,
/// the server's clock): connections made again after a termination.
fn connected_since(admin: &mut postgres::Client, app: &str, since: f64) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = $1 AND extract(epoch FROM backend_start) > $2::float8",
            &[&app, &since],
        )
        .unwrap()
        .get(0)
}

fn server_now(admin: &mut postgres::Client) -> f64 {
    admin
        .query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])
        .unwrap()
        .get(0)
}

#[test]
fn serve_outlives_its_postgresql_connections_being_terminated() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "latency_ms=20..60", 23);
    let schema = PgSchema::new();
    let app = format!("unavez_serve_{}", std::process::id());
    let url = format!("{}&application_name={app}", schema.url);
    let mut cfg = Cfg::motor(&sim.base_url()).with_lease(3);
    cfg.concurrency = 4;
    cfg.batch_size = 4;
    // The ledger in the configuration is the plain URL (the test's own reads
    // use it); only `serve` is named, so only its connections are cut.
    let env = Env::postgres(&cfg, &schema.url);
    let total = 150;
    let events: Vec<String> = (0..total).map(|n| scheduled(&format!("cita-term{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let mut admin = admin();
    let mut serve = env.spawn(&["--db", &url, "serve"]);
    assert!(
        wait_until(Duration::from_secs(20), || !sent_keys(log.path()).is_empty()),
        "serve sent nothing"
    );
    // Cut every connection it has, again and again, while it works.
    let mut cut = 0;
    for _ in 0..6 {
        let at = server_now(&mut admin);
        cut += terminate(&mut admin, &app);
        std::thread::sleep(Duration::from_millis(400));
        let child = serve.0.as_mut().unwrap();
        assert!(
            child.try_wait().unwrap().is_none(),
            "serve exited after its connections were terminated"
        );
        assert!(
            wait_until(Duration::from_secs(5), || connected_since(&mut admin, &app, at) > 0),
            "serve did not connect again after the termination"
        );
    }
    assert!(cut >= 6, "terminated only {cut} connection(s)");
    let started = Instant::now();
    assert!(
        wait_until(Duration::from_secs(60), || sent_keys(log.path()).len() >= total
            && env.settled()),
        "after the terminations serve sent {} of {total} ({:?})",
        sent_keys(log.path()).len(),
        env.state_counts()
    );
    eprintln!(
        "{cut} connection(s) terminated; settled {:.1} s after the last one",
        started.elapsed().as_secs_f64()
    );
    // Still running, and it stops gracefully.
    let out = serve.terminate();
    assert!(out.contains("stopped: claimed"), "{out}");
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), total);
}
