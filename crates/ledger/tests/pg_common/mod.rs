//! The ledger's view of a test's scratch schema (`unavez_testkit::PgSchema`).

#![allow(dead_code)]

use unavez_ledger::pg::{PgLedger, PgUrl};
use unavez_testkit::PgSchema;

pub fn url(s: &PgSchema) -> PgUrl {
    PgUrl::parse(&s.url).unwrap_or_else(|e| panic!("{e}"))
}

/// A migrated ledger in the schema.
pub fn ledger(s: &PgSchema) -> PgLedger {
    PgLedger::open(&url(s)).unwrap_or_else(|e| panic!("{e}"))
}
