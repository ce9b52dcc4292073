//! Live consoles on PostgreSQL: a connection that `LISTEN`s on the
//! ledger's channel and says which tables changed. Every committed change
//! a console shows is announced by the migration's statement triggers, so
//! a console on any host refreshes when a dispatcher on another host
//! claims, a webhook lands or an operator acts, without polling. (On
//! SQLite, one host, the embedded services' activity signal does this.)

use std::collections::BTreeSet;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

use super::{PgError, PgUrl, Result};

/// A dedicated connection listening on the ledger's channel,
/// `unavez_<schema>`.
pub struct PgListener {
    client: Client,
}

impl PgListener {
    pub fn connect(url: &PgUrl) -> Result<PgListener> {
        let mut client = url.config().connect(NoTls).map_err(|source| PgError::Connect {
            url: url.to_string(),
            source,
        })?;
        let schema: String = client.query_one("SELECT current_schema()::text", &[])?.get(0);
        // Quoted: the channel is the identifier the triggers build.
        client.batch_execute(&format!("LISTEN \"unavez_{}\"", schema.replace('"', "")))?;
        Ok(PgListener { client })
    }

    /// Waits up to `timeout` for the first change, then takes every notice
    /// already delivered; returns the changed tables (empty: nothing
    /// changed in that time). A lost connection is an error: the caller
    /// reconnects and refreshes, since changes may have been missed.
    pub fn wait(&mut self, timeout: Duration) -> Result<BTreeSet<String>> {
        let mut tables = BTreeSet::new();
        let mut notes = self.client.notifications();
        let first = notes.timeout_iter(timeout).next()?;
        if let Some(n) = first {
            tables.insert(n.payload().to_string());
            let mut more = notes.iter();
            while let Some(n) = more.next()? {
                tables.insert(n.payload().to_string());
            }
        }
        Ok(tables)
    }
}
