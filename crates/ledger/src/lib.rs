//! # unavez-ledger — rows in and out
//!
//! The SQLite ledger: every line of SQL in unavez, the migrations, and the
//! transaction discipline (WAL, `synchronous=FULL`, `BEGIN IMMEDIATE` for
//! every read-then-write).
//!
//! | module | job |
//! |---|---|
//! | [`api`] | the set-based [`api::LedgerTx`] trait: the surface a second backend (PostgreSQL) implements — rows in and out, no rules (claim facts and attempts for N, finish facts and attempt rows for N, reserve N, apply N history rows) |
//! | [`store`] | `Store`/`Tx`: typed operations grouped by who uses them (ingest, dispatch, uncertain, webhooks, console, operator…), `open_connection` with the production pragmas, `migrations/` |
//! | [`copy`] | `unavez ledger copy`: a SQLite ledger into an empty PostgreSQL one, in one target transaction, verified (row counts, keys, fingerprints) before it commits |
//! | [`location`] | one setting picks the ledger: a `postgres://` URL or a SQLite path |
//! | [`pg`] | the shared ledger on PostgreSQL (in progress): `postgres://` URLs, its own migrations for the same logical schema, the database's clock, the claim's rows (`FOR UPDATE SKIP LOCKED`) |
//! | [`sql`], [`rows`] | one way to run a statement and read a row on either backend: the SQL both engines share, `?N` placeholders, values that convert to what PostgreSQL asks for |
//! | `failpoint` | (feature `failpoints`, dev crates only) named places where the chaos harness makes a transaction fail or the process die |
//!
//! **No decisions here.** Retry, review, late, validity, guards and key
//! conflicts are decided in `unavez-core` and `unavez-app`; this crate
//! returns the facts they need and stores the rows they decided. Console,
//! webhook and operator queries are still inherent `Tx` methods.
//!
//! **Layering:** on top of `unavez-core` only (re-exported here under its
//! module names so `crate::domain::…` paths read as before). It knows
//! neither the configuration, the channels nor the application workflows;
//! `unavez-app` drives it.

pub use unavez_core::{domain, planner, policy, templates};

pub mod api;
pub mod copy;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod location;
pub mod pg;
pub mod rows;
pub mod sql;
pub mod store;
