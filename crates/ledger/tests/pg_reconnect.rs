//! A PostgreSQL connection the server closes (`pg_terminate_backend`, as an
//! administrator or a failover does) costs a long-running process one call
//! at most, never every later one: the store reconnects before its next
//! transaction, and a `BEGIN` that met the closed connection (it ran
//! nothing) is begun again on a new one, so a connection closed between
//! transactions costs nothing. A transaction that was running when its
//! connection went (or that began just before the server got round to
//! closing it) fails and commits nothing; the next one works.

use unavez_ledger::location::Location;
use unavez_ledger::store::{OpenOptions, Store};
use unavez_testkit::PgSchema;

/// The schema's URL with an `application_name` that finds this test's
/// connections in `pg_stat_activity`.
fn named(schema: &PgSchema, name: &str) -> Location {
    let url = format!("{}&application_name={name}", schema.url);
    Location::parse(std::path::Path::new(&url)).unwrap()
}

fn admin() -> postgres::Client {
    let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| unavez_testkit::DEFAULT_PG.to_string());
    postgres::Client::connect(&base, postgres::NoTls).unwrap()
}

/// Terminates every backend of `name`; how many there were.
fn terminate(name: &str) -> i64 {
    admin()
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
            &[&name],
        )
        .unwrap()
        .get(0)
}

/// Terminates the backends of `name` and waits until they are gone: the
/// server signals a backend and answers at once, and a statement that
/// reaches it before it exits still runs (that case is the next test's).
fn terminate_idle(name: &str) -> i64 {
    let n = terminate(name);
    let mut admin = admin();
    for _ in 0..500 {
        let left: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .unwrap()
            .get(0);
        if left == 0 {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the backends of {name} did not exit");
}

fn name(tag: &str) -> String {
    format!("unavez_reconnect_{tag}_{}", std::process::id())
}

#[test]
fn a_terminated_connection_is_replaced_before_the_next_transaction() {
    let schema = PgSchema::new();
    let app = name("idle");
    let mut store = Store::open_location(&named(&schema, &app), &OpenOptions::CREATE).unwrap();
    store.write(|tx| tx.set_counter("probe", 1)).unwrap();
    assert_eq!(terminate_idle(&app), 1);
    // The idle connection is gone; the next read and write still work, on
    // a new one, without an error.
    assert_eq!(store.read(|tx| tx.counter("probe")).unwrap(), 1);
    store.write(|tx| tx.set_counter("probe", 2)).unwrap();
    assert_eq!(terminate_idle(&app), 1, "one connection again, not two");
    store.write(|tx| tx.set_counter("probe", 3)).unwrap();
    assert_eq!(store.read(|tx| tx.counter("probe")).unwrap(), 3);
}

#[test]
fn a_transaction_whose_connection_is_terminated_fails_and_the_next_one_works() {
    let schema = PgSchema::new();
    let app = name("busy");
    let mut store = Store::open_location(&named(&schema, &app), &OpenOptions::CREATE).unwrap();
    store.write(|tx| tx.set_counter("probe", 1)).unwrap();
    let failed = store.write(|tx| {
        tx.set_counter("probe", 99)?;
        // Cut from outside while the transaction is open.
        assert_eq!(terminate(&app), 1);
        tx.counter("probe").map(|_| ())
    });
    assert!(
        failed.is_err(),
        "a write on a terminated connection committed: {failed:?}"
    );
    // Nothing of it was committed, and the store works again.
    assert_eq!(store.read(|tx| tx.counter("probe")).unwrap(), 1);
    store.write(|tx| tx.set_counter("probe", 2)).unwrap();
    assert_eq!(store.read(|tx| tx.counter("probe")).unwrap(), 2);
}

#[test]
fn a_connection_planned_by_keys_stays_so_on_its_replacement() {
    let schema = PgSchema::new();
    let app = name("keys");
    let mut store = Store::open_location(&named(&schema, &app), &OpenOptions::CREATE).unwrap();
    assert!(
        !store.plans_by_keys().unwrap(),
        "a ledger connection plans as the server does"
    );
    store.plan_by_keys().unwrap();
    assert!(store.plans_by_keys().unwrap());
    assert_eq!(terminate_idle(&app), 1);
    // The next transaction runs on a new connection, with the settings.
    store.write(|tx| tx.set_counter("probe", 1)).unwrap();
    assert!(store.plans_by_keys().unwrap());
    assert_eq!(terminate_idle(&app), 1, "one connection, the replacement");
}
