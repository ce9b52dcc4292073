//! A short chaos run on a PostgreSQL ledger as part of `cargo test`: three
//! `unavez serve` dispatchers on one schema the harness makes for itself,
//! SIGKILLed at random moments and at each step of an attempt, with store
//! faults, their connections terminated (`pg_terminate_backend`) and one
//! of them frozen past its lease while its appointments move; then the
//! history checker, on the simulator's records. Fails if anything was
//! duplicated, lost or wrongly sent, if a terminated dispatcher died or did
//! not connect again, or if the freeze never caught a dispatcher holding
//! claims. The server is `UNAVEZ_TEST_PG` (default the local one): if it
//! cannot be reached the test fails, it is never skipped.

use std::process::Command;

#[test]
fn a_short_chaos_run_on_postgresql_with_three_dispatchers_loses_nothing_and_sends_nothing_twice() {
    let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_unavez-chaos"))
        .args([
            "--intentions",
            "300",
            "--kills",
            "3",
            "--seed",
            "29",
            "--dispatchers",
            "3",
            "--settle-secs",
            "90",
        ])
        .arg("--db")
        .arg(&base)
        .arg("--dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "chaos on PostgreSQL failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for line in [
        "· postgres · 3 dispatcher(s) ·",
        "duplicated                 0",
        "lost                       0",
        "wrongly sent               0",
        "held and retired, sent after the change: 0",
        "settled: yes",
        "RESULT: PASS",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // Every kill point fired, every store fault and every terminated
    // connection was survived (and connected again), the freeze caught one.
    assert!(stdout.contains("pg_terminate_backend ("), "{stdout}");
    assert!(stdout.contains("caught=yes"), "{stdout}");
    assert!(!stdout.contains("=NO"), "a fault did not do what it must:\n{stdout}");
    // The schema it made is gone after a passing run.
    let schema = stdout
        .split("search_path%3D")
        .nth(1)
        .and_then(|s| s.split("%2C").next())
        .unwrap_or_else(|| panic!("no schema in the report:\n{stdout}"))
        .to_string();
    assert!(stdout.contains("(schema dropped)"), "{stdout}");
    let mut c = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    let left: i64 = c
        .query_one("SELECT count(*) FROM pg_namespace WHERE nspname = $1", &[&schema])
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "schema {schema} was left behind");
}
