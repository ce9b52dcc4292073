//! The set-based surface of recovery, beside [`crate::api::LedgerTx`]: the
//! facts of leases that ended (or attempts abandoned) with attempts open.
//! The rows a recovery writes are decided in
//! `unavez_core::domain::recovery` and stored with
//! [`crate::api::LedgerTx::write_attempts`] and
//! [`crate::api::LedgerTx::apply_records`], like every other decision.

use chrono::{DateTime, Utc};

use crate::domain::recovery::{LeaseFacts, OrphanFacts, StatusPoll};
use crate::store::IntentionRow;
use crate::store::{Result, Tx};

/// What a reconciler needs from a ledger. Every method runs in the
/// caller's transaction.
pub trait RecoveryTx {
    /// `dispatching` intentions whose lease ended before `now`, by id, with
    /// their owner and open attempts.
    fn expired_leases(&self, now: DateTime<Utc>) -> Result<Vec<LeaseFacts>>;
    /// The same facts for the intentions of these attempts.
    fn lease_facts_of_attempts(&self, attempt_ids: &[i64]) -> Result<Vec<LeaseFacts>>;
    /// Attempts left open, started before `started_before`, on intentions
    /// no dispatcher holds (see `Tx::orphaned_attempts`).
    fn orphaned_attempts(&self, started_before: DateTime<Utc>, limit: u32) -> Result<Vec<OrphanFacts>>;
    /// Acknowledged messages the status poll asks about now (see
    /// `Tx::status_polls_due`).
    fn status_polls_due(&self, poll: &StatusPoll, now: DateTime<Utc>, limit: u32) -> Result<Vec<IntentionRow>>;
    /// When each of these is asked about next.
    fn hold_status_polls(&self, until: &[(i64, DateTime<Utc>)]) -> Result<()>;
}

impl RecoveryTx for Tx<'_> {
    fn expired_leases(&self, now: DateTime<Utc>) -> Result<Vec<LeaseFacts>> {
        Tx::expired_leases(self, now)
    }
    fn lease_facts_of_attempts(&self, attempt_ids: &[i64]) -> Result<Vec<LeaseFacts>> {
        Tx::lease_facts_of_attempts(self, attempt_ids)
    }
    fn orphaned_attempts(&self, started_before: DateTime<Utc>, limit: u32) -> Result<Vec<OrphanFacts>> {
        Tx::orphaned_attempts(self, started_before, limit)
    }
    fn status_polls_due(&self, poll: &StatusPoll, now: DateTime<Utc>, limit: u32) -> Result<Vec<IntentionRow>> {
        Tx::status_polls_due(self, poll, now, limit)
    }
    fn hold_status_polls(&self, until: &[(i64, DateTime<Utc>)]) -> Result<()> {
        Tx::hold_status_polls(self, until)
    }
}
