//! Fixture rows and the both-backends runner for the store's conformance
//! tests (`store_backends_webhooks.rs`): `store_backends.rs`'s `both`, plus
//! plain SQL for the rows the store has no operation for.

#![allow(dead_code)]

use unavez_ledger::location::Location;
use unavez_ledger::store::{OpenOptions, Store, StoreError};
use unavez_testkit::PgSchema;

use crate::pg_common;

/// Plain SQL on the ledger under test, for fixture rows the store has no
/// operation for (its own connection, outside the store's transactions).
pub enum Fixture {
    Sqlite(std::path::PathBuf),
    Pg(String),
}

impl Fixture {
    pub fn sql(&self, script: &str) {
        match self {
            Fixture::Sqlite(path) => rusqlite::Connection::open(path)
                .and_then(|c| c.execute_batch(script))
                .unwrap_or_else(|e| panic!("{e}: {script}")),
            Fixture::Pg(url) => postgres::Client::connect(url, postgres::NoTls)
                .and_then(|mut c| c.batch_execute(script))
                .unwrap_or_else(|e| panic!("{e}: {script}")),
        }
    }

    /// The first column of the first row of `query`, as an integer (NULL
    /// and no row: `None`).
    pub fn int(&self, query: &str) -> Option<i64> {
        match self {
            Fixture::Sqlite(path) => rusqlite::Connection::open(path)
                .and_then(|c| c.query_row(query, [], |r| r.get::<_, Option<i64>>(0)))
                .unwrap_or_else(|e| panic!("{e}: {query}")),
            Fixture::Pg(url) => postgres::Client::connect(url, postgres::NoTls)
                .and_then(|mut c| c.query_opt(query, &[]))
                .unwrap_or_else(|e| panic!("{e}: {query}"))
                .and_then(|r| r.get::<_, Option<i64>>(0)),
        }
    }

    /// Commitment `id` (`ref` `cita-<id>`, version 1, scheduled at
    /// `starts`) of contact `contact`, with a contact row for it.
    pub fn commitment(&self, id: i64, contact: i64, starts: i64) {
        self.sql(&format!(
            "INSERT INTO contacts(id, phone, created_at, updated_at) VALUES ({contact}, '+51999000{contact}', 0, 0)
             ON CONFLICT DO NOTHING;
             INSERT INTO commitments(id, ref, kind, status, version, contact_id, starts_at, created_at, updated_at)
             VALUES ({id}, 'cita-{id}', 'appointment', 'scheduled', 1, {contact}, {starts}, 0, 0);"
        ));
    }

    /// Intention `id` (key `k<id>`) of commitment `commitment`, in `state`.
    pub fn intention(&self, id: i64, commitment: i64, state: &str, extra: &str) {
        self.sql(&format!(
            "INSERT INTO intentions(id, key, commitment_id, commitment_version, purpose, recipient, category,
                 channel, template, language, parameters, body, fingerprint, correlation_id, due_at, day, state,
                 state_changed_at, created_by, created_at, updated_at)
             VALUES ({id}, 'k{id}', {commitment}, 1, 'p', '+51999000{commitment}', 'transactional', 'motor', 't',
                 'es', '[]', 'b', 'f', 'c', 1000, '2026-12-01', '{state}', 1000, 'planner', 0, 0);
             {extra}"
        ));
    }

    /// Attempt `id` (number `n`) of intention `intention`.
    pub fn attempt(
        &self,
        id: i64,
        intention: i64,
        n: i64,
        ended: Option<i64>,
        outcome: &str,
        message_id: Option<&str>,
    ) {
        let ended = ended.map_or("NULL".to_string(), |e| e.to_string());
        let mid = message_id.map_or("NULL".to_string(), |m| format!("'{m}'"));
        self.sql(&format!(
            "INSERT INTO attempts(id, intention_id, n, worker, channel, started_at, ended_at, outcome, message_id,
                 commitment_version_checked)
             VALUES ({id}, {intention}, {n}, 'w', 'motor', 1000, {ended}, '{outcome}', {mid}, 1)"
        ));
    }
}

/// A fresh store on `backend` (the `on_both!` tests), with a fixture
/// handle on the same ledger and the ledger's guard (keep it alive).
pub fn open(backend: unavez_testkit::Backend) -> (Store, Fixture, unavez_testkit::TestLedger) {
    use unavez_testkit::Backend;
    let l = backend.ledger();
    match backend {
        Backend::Sqlite => (Store::open(l.db()).unwrap(), Fixture::Sqlite(l.db().to_path_buf()), l),
        Backend::Postgres => {
            let loc = Location::parse(l.db()).unwrap_or_else(|e| panic!("{e}"));
            let store = Store::open_location(&loc, &OpenOptions::CREATE).unwrap_or_else(|e| panic!("{e}"));
            let url = l.db().to_string_lossy().to_string();
            (store, Fixture::Pg(url), l)
        }
    }
}

/// Runs `body` on a fresh SQLite ledger and on a fresh PostgreSQL one.
pub fn both(body: impl Fn(&mut Store, &Fixture)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut sqlite = Store::open(&path).unwrap();
    body(&mut sqlite, &Fixture::Sqlite(path));
    let schema = PgSchema::new();
    let mut pg = Store::open_location(
        &Location::Postgres(Box::new(pg_common::url(&schema))),
        &OpenOptions::CREATE,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(pg.is_pg());
    body(&mut pg, &Fixture::Pg(schema.url.clone()));
}

pub fn ok<T>(r: Result<T, StoreError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// `r`, unless it is PostgreSQL answering that an operation this one
/// builds on (another module's) is not written for it yet: then `None`,
/// and the caller stops there. Once that operation is ported, the same
/// assertions run on PostgreSQL too.
pub fn unless_unported<T>(pg: bool, r: Result<T, StoreError>) -> Option<T> {
    match r {
        Err(StoreError::NotOnPostgres(_)) if pg => None,
        r => Some(ok(r)),
    }
}
