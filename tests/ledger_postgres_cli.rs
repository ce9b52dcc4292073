//! The PostgreSQL ledger through the real binary: one setting picks it
//! (`--db postgres://…`), `init` migrates it, commands that do not run on
//! it yet say so, a password in the config file is refused; `ledger copy`
//! moves a ledger made by `unavez import` into a fresh schema, the report
//! names every table and the verified keys, and a second copy into the same
//! target is refused with exit 1 and a reason.

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

#[test]
fn one_setting_picks_postgresql_where_import_and_the_listings_run() {
    let schema = PgSchema::new();
    let url = std::path::Path::new(&schema.url);
    let o = run(url, &["init"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("ledger ready at postgres://"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("options"), "{}", stdout(&o));
    let mut c = postgres::Client::connect(&schema.url, postgres::NoTls).unwrap();
    let tables: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(tables >= 17, "{tables} tables");

    // Import and the listings run on it.
    let imported = run(url, &["import", fixture("agenda.jsonl").to_str().unwrap()]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    assert_eq!(report_number(&stdout(&imported), "stored"), 10, "{}", stdout(&imported));
    let planned = json(url, &["intents", "list"]);
    assert!(planned.as_array().is_some_and(|a| !a.is_empty()), "{planned}");
    let first = planned[0]["key"].as_str().unwrap().to_string();
    let shown = json(url, &["intents", "show", &first]);
    assert_eq!(shown["intention"]["key"], first.as_str(), "{shown}");
    let commitments = json(url, &["commitments", "list"]);
    assert_eq!(commitments.as_array().map(Vec::len), Some(4), "{commitments}");
}

#[test]
fn a_password_in_the_config_file_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("unavez.toml");
    std::fs::write(&config, "database = \"postgres://clinic:s3cret@db/unavez\"\n").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_unavez"))
        .env_remove("UNAVEZ_DB")
        .args(["--config", config.to_str().unwrap(), "init"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("unavez.toml") && err.contains("database") && err.contains("PGPASSWORD"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}
