//! # unavez-chaos — the chaos harness (a dev tool, never installed)
//!
//! Imports booking events while SIGKILLing the dispatcher at random moments
//! and at each step of an attempt, with store faults and a faulty engine
//! simulator, then checks the whole history against the simulator's own
//! records. Run it with
//! `cargo run --release -p unavez-chaos -- [--intentions N] [--kills N] [--seed S] [--dir D] [--json]`;
//! `tests/chaos_short.rs` runs a short one under `cargo test`.
//!
//! | module | job |
//! |---|---|
//! | [`chaos`] | the run (`run`, `check_run`, the report), its plan of events and faults (`plan`), the child processes (`procs`), the evidence files (`evidence`), the failpoint specs (`failpoints`), the ledger's read-only views (`ledger_view`) and the pure history checker (`check`) |
//!
//! **Layering:** on top of everything, through the `unavez` facade (its
//! modules are re-exported here under the same names). The children are
//! this binary re-executed as the `unavez` command line, so the product
//! binary needs no chaos code.

pub use unavez::{config, domain, server, store, templates};

pub mod chaos;
