//! The set-based surface of recovery, beside [`crate::api::LedgerTx`]: the
//! facts of leases that ended (or attempts abandoned) with attempts open.
//! The rows a recovery writes are decided in
//! `unavez_core::domain::recovery` and stored with
//! [`crate::api::LedgerTx::write_attempts`] and
//! [`crate::api::LedgerTx::apply_records`], like every other decision.

use chrono::{DateTime, Utc};

use crate::domain::recovery::LeaseFacts;
use crate::store::{Result, Tx};

/// What a reconciler needs from a ledger. Every method runs in the
/// caller's transaction.
pub trait RecoveryTx {
    /// `dispatching` intentions whose lease ended before `now`, by id, with
    /// their owner and open attempts.
    fn expired_leases(&self, now: DateTime<Utc>) -> Result<Vec<LeaseFacts>>;
    /// The same facts for the intentions of these attempts.
    fn lease_facts_of_attempts(&self, attempt_ids: &[i64]) -> Result<Vec<LeaseFacts>>;
}

impl RecoveryTx for Tx<'_> {
    fn expired_leases(&self, now: DateTime<Utc>) -> Result<Vec<LeaseFacts>> {
        Tx::expired_leases(self, now)
    }
    fn lease_facts_of_attempts(&self, attempt_ids: &[i64]) -> Result<Vec<LeaseFacts>> {
        Tx::lease_facts_of_attempts(self, attempt_ids)
    }
}
