//! The two backends hold one logical schema: the same tables, columns
//! (name, integer or text, nullability) and unique constraints (primary
//! keys included) after each backend's own migrations. Left out on purpose:
//! the patient search index (FTS5 on SQLite, a pg_trgm table on
//! PostgreSQL), PostgreSQL's schema-version row (SQLite keeps the
//! version in `PRAGMA user_version`) and the per-transaction count deltas
//! PostgreSQL's statement triggers fold into `intention_counts` at commit
//! (empty outside a transaction; SQLite's row triggers need none).

mod pg_common;

use std::collections::BTreeSet;

use pg_common::{ledger, url};
use unavez_ledger::store::Store;
use unavez_testkit::PgSchema;

/// `(table, column, type, not null)` and `(table, unique columns)`.
type Shape = (
    BTreeSet<(String, String, String, bool)>,
    BTreeSet<(String, Vec<String>)>,
);

fn logical_type(declared: &str) -> String {
    let t = declared.to_ascii_lowercase();
    if t.contains("int") {
        "integer".into()
    } else if t.contains("text") || t.contains("char") {
        "text".into()
    } else {
        t
    }
}

fn skipped(table: &str) -> bool {
    table.starts_with("commitment_search")
        || table == "unavez_schema"
        || table == "intention_count_deltas"
        || table.starts_with("sqlite_")
}

fn sqlite_shape() -> Shape {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    drop(Store::open(&path).unwrap());
    let c = rusqlite::Connection::open(&path).unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut columns = BTreeSet::new();
    let mut uniques = BTreeSet::new();
    for t in tables.iter().filter(|t| !skipped(t)) {
        let mut pk: Vec<(i64, String)> = Vec::new();
        let mut info = c.prepare(&format!("PRAGMA table_info({t})")).unwrap();
        let rows = info
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, bool>(3)?,
                    r.get::<_, i64>(5)?,
                ))
            })
            .unwrap();
        for row in rows {
            let (name, ty, notnull, pk_pos) = row.unwrap();
            if pk_pos > 0 {
                pk.push((pk_pos, name.clone()));
            }
            columns.insert((t.clone(), name, logical_type(&ty), notnull || pk_pos > 0));
        }
        pk.sort();
        let mut pk: Vec<String> = pk.into_iter().map(|p| p.1).collect();
        pk.sort();
        uniques.insert((t.clone(), pk));
        let idx: Vec<(String, bool, String)> = c
            .prepare(&format!("PRAGMA index_list({t})"))
            .unwrap()
            .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for (name, unique, origin) in idx {
            if unique && origin != "pk" {
                let mut cols: Vec<String> = c
                    .prepare(&format!("PRAGMA index_info({name})"))
                    .unwrap()
                    .query_map([], |r| r.get(2))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                cols.sort();
                uniques.insert((t.clone(), cols));
            }
        }
    }
    (columns, uniques)
}

fn pg_shape(schema: &PgSchema) -> Shape {
    let mut ledger = ledger(schema);
    let c = ledger.client();
    let mut columns = BTreeSet::new();
    for r in c
        .query(
            "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'NO'
             FROM information_schema.columns WHERE table_schema = current_schema()",
            &[],
        )
        .unwrap()
    {
        let t: String = r.get(0);
        if !skipped(&t) {
            columns.insert((t, r.get(1), logical_type(&r.get::<_, String>(2)), r.get(3)));
        }
    }
    let mut uniques = BTreeSet::new();
    for r in c
        .query(
            "SELECT cl.relname::text, array_agg(a.attname::text ORDER BY a.attname)
             FROM pg_constraint k JOIN pg_class cl ON cl.oid = k.conrelid
             JOIN pg_namespace n ON n.oid = cl.relnamespace
             JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY(k.conkey)
             WHERE n.nspname = current_schema() AND k.contype IN ('u', 'p')
             GROUP BY k.oid, cl.relname",
            &[],
        )
        .unwrap()
    {
        let t: String = r.get(0);
        if !skipped(&t) {
            uniques.insert((t, r.get(1)));
        }
    }
    (columns, uniques)
}

#[test]
fn both_backends_migrate_to_one_logical_schema() {
    let (sqlite_cols, sqlite_uniques) = sqlite_shape();
    let schema = PgSchema::new();
    let (pg_cols, pg_uniques) = pg_shape(&schema);
    let only_sqlite: Vec<_> = sqlite_cols.difference(&pg_cols).collect();
    let only_pg: Vec<_> = pg_cols.difference(&sqlite_cols).collect();
    assert!(
        only_sqlite.is_empty() && only_pg.is_empty(),
        "columns differ:\n only on SQLite: {only_sqlite:#?}\n only on PostgreSQL: {only_pg:#?}"
    );
    let only_sqlite: Vec<_> = sqlite_uniques.difference(&pg_uniques).collect();
    let only_pg: Vec<_> = pg_uniques.difference(&sqlite_uniques).collect();
    assert!(
        only_sqlite.is_empty() && only_pg.is_empty(),
        "unique constraints differ:\n only on SQLite: {only_sqlite:#?}\n only on PostgreSQL: {only_pg:#?}"
    );
    assert!(
        sqlite_cols.len() > 150,
        "the comparison saw the schema ({} columns)",
        sqlite_cols.len()
    );
}

#[test]
fn migrating_twice_or_from_two_hosts_at_once_applies_each_version_once() {
    let schema = PgSchema::new();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let url = url(&schema);
            std::thread::spawn(move || unavez_ledger::pg::PgLedger::open(&url).map(|_| ()))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let mut again = ledger(&schema);
    assert_eq!(
        again.schema_version().unwrap(),
        unavez_ledger::pg::PgLedger::known_version()
    );
    let rows: i64 = again
        .client()
        .query_one("SELECT count(*) FROM unavez_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
}

#[test]
fn opening_an_up_to_date_ledger_writes_nothing() {
    let schema = PgSchema::new();
    let mut first = ledger(&schema);
    // The row's creating transaction: a rewrite of the version would
    // change it.
    let before: String = first
        .client()
        .query_one("SELECT xmin::text FROM unavez_schema", &[])
        .unwrap()
        .get(0);
    for _ in 0..3 {
        drop(ledger(&schema));
    }
    let after: String = first
        .client()
        .query_one("SELECT xmin::text FROM unavez_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(before, after, "opening rewrote the schema version");
    // And a read-only session opens it too (a site console).
    let ro = url(&schema).read_only();
    unavez_ledger::pg::PgLedger::open(&ro).unwrap_or_else(|e| panic!("read-only open: {e}"));
}

#[test]
fn a_console_location_connects_with_generic_plans() {
    let schema = PgSchema::new();
    drop(ledger(&schema));
    let setting = std::path::PathBuf::from(&schema.url);
    let console = unavez_ledger::location::Location::parse(&setting)
        .unwrap()
        .for_console();
    let unavez_ledger::location::Location::Postgres(u) = &console else {
        panic!("a URL is PostgreSQL")
    };
    // The server takes the startup option (a wrong one refuses the
    // connection), and the console's store opens on it.
    let mut c = unavez_ledger::pg::PgLedger::open(u).unwrap_or_else(|e| panic!("{e}"));
    let mode: String = c.client().query_one("SHOW plan_cache_mode", &[]).unwrap().get(0);
    assert_eq!(mode, "force_generic_plan");
    Store::attach_location(&console).unwrap_or_else(|e| panic!("{e}"));
}
