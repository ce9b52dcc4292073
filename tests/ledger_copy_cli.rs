//! `unavez ledger copy` through the real binary: a ledger made by
//! `unavez import` (and a dispatch run) moves to a fresh PostgreSQL schema,
//! the report names every table and the verified keys, and a second copy
//! into the same target is refused with exit 1 and a reason.

mod ledger_support;

use ledger_support::*;
use unavez_testkit::PgSchema;

#[test]
fn an_imported_ledger_moves_to_postgresql_and_a_second_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("clinic.db");
    let imported = run(&db, &["import", fixture("agenda.jsonl").to_str().unwrap()]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    let planned = json(&db, &["intents", "list"]);
    let n = planned.as_array().map(Vec::len).unwrap_or(0);
    assert!(n > 0, "{planned}");

    let schema = PgSchema::new();
    let from = db.to_str().unwrap();
    let report = json(&db, &["ledger", "copy", "--from", from, "--to", &schema.url]);
    assert_eq!(report["intentions_verified"], n as u64, "{report}");
    assert_eq!(report["tables"]["intentions"], n as u64);
    assert!(
        report["tables"]["commitment_events"].as_u64().unwrap() >= 10,
        "{report}"
    );
    assert!(!report["to"].as_str().unwrap().contains("options"), "{report}");

    let again = run(&db, &["ledger", "copy", "--from", from, "--to", &schema.url]);
    assert_eq!(again.status.code(), Some(1));
    let err = stderr(&again);
    assert!(
        err.contains("is not empty") && err.contains("never merges two ledgers"),
        "{err}"
    );
}

#[test]
fn a_target_that_is_not_a_postgres_url_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("clinic.db");
    let o = run(
        &db,
        &["ledger", "copy", "--from", db.to_str().unwrap(), "--to", "other.db"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not a PostgreSQL URL"), "{}", stderr(&o));
}
