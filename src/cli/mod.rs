//! Command line (placeholder while the ledger lands).
