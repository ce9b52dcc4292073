//! The statements the ledger writes once run the same on both backends:
//! the same results for conflicts, `RETURNING`, flags from `EXISTS`,
//! `IS DISTINCT FROM`, a parameter cast where its type cannot be inferred,
//! multi-row `VALUES` with bare `?`, and errors for a broken constraint.

mod pg_common;

use std::cell::RefCell;

use pg_common::ledger;
use unavez_ledger::sql::{Db, SqlError, Value};
use unavez_ledger::store::Store;
use unavez_ledger::vals;
use unavez_testkit::PgSchema;

/// The statements under test, with what each returned, in order.
fn script(db: &Db<'_>) -> Vec<String> {
    let mut seen = Vec::new();
    let n = db
        .exec(
            "INSERT INTO contacts(phone, name, created_at, updated_at) VALUES (?, ?, ?, ?), (?, ?, ?, ?)
             ON CONFLICT (phone) DO NOTHING",
            &vals![
                "+51900000001",
                "Ana",
                1_i64,
                1_i64,
                "+51900000002",
                None::<String>,
                2_i64,
                2_i64
            ],
        )
        .unwrap();
    seen.push(format!("inserted {n}"));
    let again = db
        .rows(
            "INSERT INTO contacts(phone, created_at, updated_at) VALUES (?1, 0, 0)
             ON CONFLICT (phone) DO NOTHING RETURNING id",
            &vals!["+51900000001"],
            |r| r.int(0),
        )
        .unwrap();
    seen.push(format!("again {again:?}"));
    let rows = db
        .rows(
            "SELECT phone, name, EXISTS (SELECT 1 FROM contacts k WHERE k.id = c.id AND k.name IS NOT NULL),
                    CASE WHEN CAST(?1 AS BIGINT) IS NULL THEN 0 ELSE c.created_at + CAST(?1 AS BIGINT) END,
                    c.name IS DISTINCT FROM ?2
             FROM contacts c ORDER BY c.id",
            &vals![Some(10_i64), "Ana"],
            |r| {
                Ok(format!(
                    "{} {:?} {} {} {}",
                    r.text(0)?,
                    r.opt_text(1)?,
                    r.flag(2)?,
                    r.int(3)?,
                    r.flag(4)?
                ))
            },
        )
        .unwrap();
    seen.extend(rows);
    let none = db
        .row(
            "SELECT CASE WHEN CAST(?1 AS BIGINT) IS NULL THEN 0 ELSE 1 END",
            &[Value::Null],
            |r| r.int(0),
        )
        .unwrap();
    seen.push(format!("null cast {none:?}"));
    let count = db
        .row(
            "SELECT count(*), CAST(coalesce(sum(created_at), 0) AS BIGINT) FROM contacts",
            &[],
            |r| Ok((r.int(0)?, r.int(1)?)),
        )
        .unwrap();
    seen.push(format!("count {count:?}"));
    let refused = db.exec(
        "INSERT INTO operator_actions(at, operator, role, action, reason, result) VALUES (?1, 'ana', 'supervisor', 'resend', ?2, 'ok')",
        &vals![1_i64, "   "],
    );
    seen.push(format!(
        "blank reason refused: {}",
        matches!(refused, Err(SqlError::Sqlite(_) | SqlError::Pg(_)))
    ));
    seen
}

#[test]
fn one_statement_text_gives_the_same_answers_on_sqlite_and_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let on_sqlite = script(&Db::Sqlite(&conn));

    let schema = PgSchema::new();
    let client = RefCell::new(ledger(&schema).into_client());
    let on_pg = script(&Db::Pg(&client));
    assert_eq!(on_sqlite, on_pg);
    assert_eq!(on_sqlite[0], "inserted 2");
    assert_eq!(on_sqlite[1], "again []");
    assert_eq!(on_sqlite[2], "+51900000001 Some(\"Ana\") true 11 false");
    assert_eq!(on_sqlite.last().unwrap(), "blank reason refused: true");
}
