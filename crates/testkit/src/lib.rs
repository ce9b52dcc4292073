//! # unavez-testkit — what the tests of several crates share
//!
//! A dev crate (`publish = false`): nothing here ships in the product.
//!
//! | item | job |
//! |---|---|
//! | [`PgSchema`] | a PostgreSQL schema of its own for one test, dropped afterwards, addressed by a `postgres://` URL that any unavez command or ledger call accepts |
//!
//! **Where the server is:** `UNAVEZ_TEST_PG` (`.ci/run` creates one
//! database per run and drops it afterwards), or the local server's
//! `postgres` database. An unreachable server fails the test: the
//! PostgreSQL suite is never skipped.
//!
//! **Layering:** depends on nothing of unavez (URLs are plain strings), so
//! every crate's tests can use it, the ledger's included.

use std::sync::atomic::{AtomicU32, Ordering};

/// The local server's maintenance database, when `UNAVEZ_TEST_PG` is unset.
pub const DEFAULT_PG: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A schema that is dropped, with everything in it, when this is dropped.
pub struct PgSchema {
    base: String,
    pub name: String,
    /// The base URL with `search_path` set to this schema (and `public`,
    /// where the `pg_trgm` extension lives).
    pub url: String,
}

impl PgSchema {
    /// Creates a fresh schema; panics, saying how to fix it, when the
    /// server cannot be reached.
    pub fn new() -> PgSchema {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| DEFAULT_PG.to_string());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "unavez_t{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut c = connect(&base);
        c.batch_execute(&format!("CREATE SCHEMA {name}"))
            .unwrap_or_else(|e| panic!("cannot create schema {name} at {}: {e}", shown(&base)));
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{name}%2Cpublic");
        PgSchema { base, name, url }
    }
}

impl Default for PgSchema {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.base, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
        }
    }
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL at {} is unreachable ({e}): start it (`pg_ctlcluster --skip-systemctl-redirect 15 main start`) or set UNAVEZ_TEST_PG",
            shown(url)
        )
    })
}

/// The URL without a password, for messages.
fn shown(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s && url[s + 3..at].contains(':') => {
            let user = &url[s + 3..at];
            format!(
                "{}{}:***{}",
                &url[..s + 3],
                &user[..user.find(':').unwrap_or(0)],
                &url[at..]
            )
        }
        _ => url.to_string(),
    }
}
