//! `ledger copy`: a generated SQLite ledger (3,000 intentions with their
//! commitments, history and attempts, plus operator actions and counters)
//! goes into an empty PostgreSQL ledger whole, verified; the copy keeps
//! ids and moves identities past them; a non-empty target is refused and
//! left untouched.

mod pg_common;

#[path = "../../bench/src/ledger_shape.rs"]
#[allow(dead_code)]
mod ledger_shape;

use chrono::{TimeZone, Utc};
use pg_common::{ledger, url};
use unavez_ledger::copy::{CopyError, copy_sqlite_to_pg};
use unavez_ledger::store::{Store, open_connection};
use unavez_testkit::PgSchema;

fn source(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("clinic.db");
    drop(Store::open(&path).unwrap());
    let mut c = open_connection(&path).unwrap();
    let now = Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap();
    let shape = ledger_shape::LedgerShape {
        contacts: 100,
        past_days: 6,
        future_days: 3,
        now,
        tz: chrono_tz::America::Lima,
        total: 3000,
    };
    ledger_shape::write(&mut c, |c| ledger_shape::generate_contacts(c, 100, now)).unwrap();
    ledger_shape::write(&mut c, |c| ledger_shape::generate_intentions(c, &shape, 0, 3000)).unwrap();
    c.execute_batch(
        "INSERT INTO operator_actions(at, operator, role, action, intention_id, reason, result)
             VALUES (1, 'ana', 'supervisor', 'resend', 1, 'el paciente no lo recibió', 'ok');
         INSERT INTO counters(name, value) VALUES ('duplicate_keys', 7);
         INSERT INTO dispatchers(id, host, pid, state, started_at, beat_at, interval_ms)
             VALUES ('old-host:1', 'old-host', 1, 'running', 1, 1, 1000);",
    )
    .unwrap();
    path
}

#[test]
fn a_sqlite_ledger_copies_whole_and_verified_into_an_empty_postgresql_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let from = source(dir.path());
    let schema = PgSchema::new();
    let mut seen = Vec::new();
    let report = copy_sqlite_to_pg(&from, &url(&schema), &mut |t, done, total| {
        seen.push((t.to_string(), done, total))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let count = |t: &str| report.tables.iter().find(|(n, _)| n == t).map(|(_, n)| *n).unwrap();
    assert_eq!(count("intentions"), 3000);
    assert!(count("intention_history") >= 3000, "history came along");
    assert!(count("attempts") > 0);
    assert_eq!(count("operator_actions"), 1);
    assert_eq!(report.intentions_verified, 3000);
    assert!(
        seen.iter()
            .any(|(t, done, total)| t == "intentions" && *done == 1000 && *total == 3000),
        "progress in batches: {seen:?}"
    );

    let mut pg = ledger(&schema);
    let c = pg.client();
    // The per-day counts were rebuilt by the target's triggers and match.
    let counted: i64 = c
        .query_one("SELECT CAST(sum(n) AS BIGINT) FROM intention_counts", &[])
        .unwrap()
        .get(0);
    assert_eq!(counted, 3000);
    // Counted once, not rewritten per copied intention: the count rows fit
    // in one page (3,000 row versions would need about twenty).
    let pages: i64 = c
        .query_one("SELECT pg_relation_size('intention_counts') / 8192", &[])
        .unwrap()
        .get(0);
    assert!(pages <= 1, "intention_counts holds dead versions: {pages} pages");
    // Analysed after the copy (reltuples is -1 for a never-analysed table).
    let estimated: f32 = c
        .query_one("SELECT reltuples FROM pg_class WHERE oid = 'intentions'::regclass", &[])
        .unwrap()
        .get(0);
    assert_eq!(estimated, 3000.0, "the copied tables were analysed");
    // New intentions are counted again by the trigger (enabled: 'O').
    let enabled: i8 = c
        .query_one(
            "SELECT tgenabled FROM pg_trigger WHERE tgname = 'intention_counts_insert' \
             AND tgrelid = 'intentions'::regclass",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(enabled as u8, b'O', "the count trigger is on again");
    // Heartbeat rows of the old file's processes stay behind.
    let beats: i64 = c.query_one("SELECT count(*) FROM dispatchers", &[]).unwrap().get(0);
    assert_eq!(beats, 0);
    // New rows are numbered after the copied ones.
    let max: i64 = c.query_one("SELECT max(id) FROM contacts", &[]).unwrap().get(0);
    let next: i64 = c
        .query_one(
            "INSERT INTO contacts(phone, created_at, updated_at) VALUES ('+51911111111', 0, 0) RETURNING id",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(next, max + 1);

    // A second copy into the same (now non-empty) ledger is refused.
    let err = copy_sqlite_to_pg(&from, &url(&schema), &mut |_, _, _| {}).unwrap_err();
    assert!(
        matches!(err, CopyError::NotEmpty { ref table, .. } if table == "contacts"),
        "{err}"
    );
    assert!(err.to_string().contains("never merges two ledgers"), "{err}");
    let intentions: i64 = pg
        .client()
        .query_one("SELECT count(*) FROM intentions", &[])
        .unwrap()
        .get(0);
    assert_eq!(intentions, 3000, "the refused copy wrote nothing");
}

#[test]
fn a_missing_source_is_an_error_naming_it_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.db");
    let schema = PgSchema::new();
    let err = copy_sqlite_to_pg(&missing, &url(&schema), &mut |_, _, _| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope.db"), "{err}");
    assert!(!missing.exists());
}
