//! Case locks: the rows a writer locks first so that operator actions and
//! booking changes on one case run one after the other on every backend.
//!
//! The ledger only takes the locks; which writers take them, and what they
//! decide once they hold them, is the application's (`unavez_app::ops`,
//! `unavez_app::ingest`). The order is always the commitment first, then
//! its intentions by id: two writers that lock in one order never wait for
//! each other in a cycle.

use super::{Result, Tx};
use crate::vals;

impl Tx<'_> {
    /// Locks one case until this transaction ends: the commitment's row,
    /// then the given intentions' rows in id order. On PostgreSQL (READ
    /// COMMITTED) a second writer waits here until the first commits, and
    /// every statement after the lock reads what the first one committed.
    /// On SQLite `BEGIN IMMEDIATE` already made this transaction the only
    /// writer, so there is nothing to lock. Must run in a write
    /// transaction.
    pub fn lock_case(&self, commitment_id: i64, intention_ids: &[i64]) -> Result<()> {
        if !self.is_pg() {
            return Ok(());
        }
        self.db().rows(
            "SELECT id FROM commitments WHERE id = ?1 FOR UPDATE",
            &vals![commitment_id],
            |r| r.int(0),
        )?;
        let mut ids = intention_ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            self.db()
                .rows("SELECT id FROM intentions WHERE id = ?1 FOR UPDATE", &vals![id], |r| {
                    r.int(0)
                })?;
        }
        Ok(())
    }

    /// Locks the rows of the commitments among `references` that exist, in
    /// id order, until this transaction ends (see [`Tx::lock_case`]): a
    /// booking import takes them before it reads what it changes, so an
    /// operator action on one of them runs wholly before or wholly after
    /// it. A no-op on SQLite.
    pub fn lock_commitments(&self, references: &[&str]) -> Result<()> {
        if !self.is_pg() || references.is_empty() {
            return Ok(());
        }
        let refs = serde_json::to_string(references).unwrap_or_else(|_| "[]".into());
        self.db().rows(
            "SELECT id FROM commitments WHERE ref IN
                 (SELECT value FROM json_array_elements_text(CAST(CAST(?1 AS TEXT) AS json)))
             ORDER BY id FOR UPDATE",
            &vals![refs],
            |r| r.int(0),
        )?;
        Ok(())
    }
}
