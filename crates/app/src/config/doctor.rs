//! `[doctor]`: the thresholds of `unavez doctor` (issue 26 §1).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DoctorConfig {
    /// Free space, in MiB, the ledger's file system must keep: below it
    /// the `disk` check fails (a full disk stops every write).
    pub min_free_mb: u64,
}

impl Default for DoctorConfig {
    fn default() -> Self {
        DoctorConfig { min_free_mb: 512 }
    }
}
