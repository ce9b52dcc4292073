//! The import path on both backends, from one definition: the same agenda
//! files (JSONL, CSV, iCalendar), imported twice with `import_file` into a
//! SQLite file and into a PostgreSQL schema, leave the same commitments,
//! event logs, intentions (key, state, recipient, text, fingerprint, due
//! time) and histories; the second import is all duplicates on both.
//! Row ids are left out: PostgreSQL spends an identity value on every
//! insert a conflict turns away, SQLite does not.

use std::path::{Path, PathBuf};

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use unavez::config::Policy;
use unavez::import::{ImportOptions, import_file};
use unavez::planner::Planner;
use unavez::store::{IntentFilter, OpenOptions, Store};
use unavez::templates::Templates;
use unavez_ledger::location::Location;
use unavez_testkit::PgSchema;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ledger")
        .join(name)
}

/// Imports every fixture twice; returns the two reports' duplicate counts
/// and the ledger's contents as text.
fn import_all(store: &mut Store) -> (Vec<usize>, Vec<String>) {
    let (policy, templates) = (Policy::default(), Templates::embedded());
    let planner = Planner::new(&policy, &templates, chrono_tz::America::Lima);
    let mut duplicates = Vec::new();
    for round in 0..2 {
        for name in ["agenda.jsonl", "agenda.csv", "agenda.ics"] {
            let opts = ImportOptions {
                skip_invalid: false,
                rejects_path: None,
                source: name.into(),
            };
            let report = import_file(store, &planner, &fixture(name), &opts, now())
                .unwrap_or_else(|e| panic!("{name} on {}: {e}", store.path().display()));
            if round == 1 {
                duplicates.push(report.duplicates);
            }
        }
    }
    let strip = |mut v: Value, fields: &[&str]| {
        for f in fields {
            v.as_object_mut().unwrap().remove(*f);
        }
        v.to_string()
    };
    let mut out = Vec::new();
    store
        .read(|tx| {
            for c in tx.list_commitments(1000, 0)? {
                out.push(strip(serde_json::to_value(&c).unwrap(), &["id", "contact_id"]));
                out.push(format!("{:?}", tx.commitment_events(&c.commitment.reference)?));
            }
            let all = IntentFilter {
                limit: 10_000,
                ..Default::default()
            };
            for i in tx.list_intentions(&all)? {
                let history: Vec<String> = tx
                    .history(i.id)?
                    .into_iter()
                    .map(|h| {
                        format!(
                            "{} {:?}>{} {} {}",
                            h.signal, h.from_state, h.to_state, h.cause, h.applied
                        )
                    })
                    .collect();
                out.push(strip(
                    serde_json::to_value(&i).unwrap(),
                    &["id", "commitment_id", "related_id"],
                ));
                out.push(history.join("; "));
            }
            Ok::<_, unavez::store::StoreError>(())
        })
        .unwrap();
    (duplicates, out)
}

#[test]
fn agenda_files_import_alike_on_sqlite_and_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let (dup_sqlite, on_sqlite) = import_all(&mut Store::open(&dir.path().join("clinic.db")).unwrap());
    let schema = PgSchema::new();
    let location = Location::parse(Path::new(&schema.url)).unwrap();
    let mut pg = Store::open_location(&location, &OpenOptions::CREATE).unwrap();
    let (dup_pg, on_pg) = import_all(&mut pg);
    assert!(on_sqlite.len() > 20, "{} rows", on_sqlite.len());
    assert!(dup_sqlite.iter().all(|d| *d > 0), "{dup_sqlite:?}");
    assert_eq!(dup_sqlite, dup_pg);
    for (i, (a, b)) in on_sqlite.iter().zip(&on_pg).enumerate() {
        assert_eq!(a, b, "row #{i} differs");
    }
    assert_eq!(on_sqlite.len(), on_pg.len());
}
