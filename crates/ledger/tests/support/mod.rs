//! A PostgreSQL ledger of its own for each test: a fresh schema in the
//! database named by `UNAVEZ_TEST_PG` (`.ci/run` creates one database per
//! run and drops it afterwards), or the local server's `postgres` database.
//! An unreachable server fails the test: the suite is never skipped.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use unavez_ledger::pg::{PgLedger, PgUrl};

pub const DEFAULT_PG: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A schema that is dropped (with everything in it) when this is dropped.
pub struct PgSchema {
    admin: PgUrl,
    pub name: String,
    pub url: PgUrl,
}

impl PgSchema {
    pub fn new() -> PgSchema {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| DEFAULT_PG.to_string());
        let admin = PgUrl::parse(&base).expect("UNAVEZ_TEST_PG is a postgres:// URL");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "unavez_t{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut c = admin
            .config()
            .connect(postgres::NoTls)
            .unwrap_or_else(|e| panic!("PostgreSQL at {admin} is unreachable ({e}): start it (see docs/testing.md)"));
        c.batch_execute(&format!("CREATE SCHEMA {name}")).unwrap();
        let url = admin.with_search_path(&name);
        PgSchema { admin, name, url }
    }

    /// A migrated ledger in this schema.
    pub fn ledger(&self) -> PgLedger {
        PgLedger::open(&self.url).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = self.admin.config().connect(postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
        }
    }
}
