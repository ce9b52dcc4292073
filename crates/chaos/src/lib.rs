//! # unavez-chaos — the chaos harness (a dev tool, never installed)
//!
//! Imports booking events while SIGKILLing the dispatchers at random moments
//! and at each step of an attempt, with store faults, a faulty engine
//! simulator, on PostgreSQL terminated connections, and one dispatcher
//! frozen past its lease; then checks the whole history against the
//! simulator's own records. Run it with
//! `cargo run --release -p unavez-chaos -- [--intentions N] [--kills N] [--seed S] [--dir D]
//! [--db PATH|postgres://…] [--dispatchers N] [--keep-schema] [--json]`;
//! `tests/chaos_short.rs` (SQLite) and `tests/chaos_postgres.rs` run short
//! ones under `cargo test`.
//!
//! | module | job |
//! |---|---|
//! | [`chaos`] | the run (`run`, `check_run`), its plan of events and faults (`plan`), the ledger it runs on (`backend`), the child processes (`procs`), the freeze, the evidence files (`evidence`), the failpoint specs (`failpoints`), the ledger's read-only views (`ledger_view`), the pure history checker (`check`) and the report (`report`) |
//!
//! **Layering:** on top of everything, through the `unavez` facade (its
//! modules are re-exported here under the same names). The children are
//! this binary re-executed as the `unavez` command line, so the product
//! binary needs no chaos code.

pub use unavez::{config, domain, server, store, templates};

pub mod chaos;
