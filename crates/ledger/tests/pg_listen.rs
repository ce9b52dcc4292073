//! Live consoles on PostgreSQL: a listener on one connection learns which
//! tables another connection changed, at its commit and not before, and a
//! rolled-back change announces nothing.

mod pg_common;

use std::time::Duration;

use pg_common::{ledger, url};
use unavez_ledger::pg::PgListener;
use unavez_testkit::PgSchema;

#[test]
fn a_listener_hears_committed_changes_by_table_and_nothing_else() {
    let schema = PgSchema::new();
    let mut writer = ledger(&schema);
    let mut listener = PgListener::connect(&url(&schema)).unwrap();
    assert!(listener.wait(Duration::from_millis(50)).unwrap().is_empty());

    let mut tx = writer.client().transaction().unwrap();
    tx.batch_execute(
        "INSERT INTO contacts(phone, created_at, updated_at) VALUES ('+51900000009', 0, 0);
         INSERT INTO commitments(ref, kind, status, version, created_at, updated_at)
             VALUES ('CITA-9', 'appointment', 'scheduled', 1, 0, 0);",
    )
    .unwrap();
    assert!(
        listener.wait(Duration::from_millis(100)).unwrap().is_empty(),
        "nothing is announced before the commit"
    );
    tx.commit().unwrap();
    let heard = listener.wait(Duration::from_secs(5)).unwrap();
    assert_eq!(heard.into_iter().collect::<Vec<_>>(), vec!["commitments".to_string()]);

    let mut tx = writer.client().transaction().unwrap();
    tx.batch_execute("UPDATE commitments SET status = 'cancelled'").unwrap();
    tx.rollback().unwrap();
    assert!(listener.wait(Duration::from_millis(200)).unwrap().is_empty());
}
