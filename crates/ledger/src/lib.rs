//! # unavez-ledger — rows in and out
//!
//! The ledger: every line of SQL in unavez, the migrations, and the
//! transaction discipline — on SQLite, the embedded default (WAL,
//! `synchronous=FULL`, `BEGIN IMMEDIATE` for every read-then-write), and on
//! PostgreSQL, the shared ledger being built (`pg`: READ COMMITTED, row
//! locks, the database's clock).
//!
//! | module | job |
//! |---|---|
//! | [`api`] | the set-based [`api::LedgerTx`] trait: the surface a second backend (PostgreSQL) implements — rows in and out, no rules (claim facts and attempts for N, finish facts and attempt rows for N, reserve N, apply N history rows) |
//! | [`api_recovery`] | [`api_recovery::RecoveryTx`]: the facts of expired leases and abandoned attempts (what becomes of them is decided in `domain::recovery`) |
//! | [`store`] | `Store`/`Tx`: typed operations grouped by who uses them (ingest, dispatch, uncertain, webhooks, console, operator…), `open_connection` with the production pragmas, `migrations/`; `store::backup`: a file's one-snapshot copy (SQLite's backup API), its facts read-only (schema version, `quick_check`, heartbeat rows) |
//! | [`copy`] | `unavez ledger copy`: a SQLite ledger into an empty PostgreSQL one, in one target transaction, verified (row counts, keys, fingerprints) before it commits |
//! | [`location`] | one setting picks the ledger: a `postgres://` URL or a SQLite path |
//! | [`pg`] | the shared ledger on PostgreSQL (in progress): `postgres://` URLs, its own migrations for the same logical schema, the database's clock, the claim's rows (`FOR UPDATE SKIP LOCKED`) |
//! | [`sql`], [`rows`] | one way to run a statement and read a row on either backend: the SQL both engines share, `?N` placeholders, values that convert to what PostgreSQL asks for |
//! | `failpoint` | (feature `failpoints`, dev crates only) named places where the chaos harness makes a transaction fail or the process die |
//!
//! **No decisions here.** Retry, review, late, validity, guards, key
//! conflicts, expired leases, the reconciler's rows and what a status
//! webhook writes are decided in `unavez-core` and `unavez-app`; this
//! crate returns the facts they need and stores the rows they decided.
//! Console, webhook and operator queries are still inherent `Tx` methods.
//!
//! What the ledger **may** do: filter and order by parameters it is given
//! (a time, a limit, a state or template the caller names, a rule's
//! thresholds passed in), keep storage invariants one statement holds (a
//! unique key, a compare-and-set on the state a decision read, "the first
//! opt-out time stays", "a known reference is never overwritten"), take
//! the row locks a caller asks for (`Tx::lock_case`, `Tx::lock_commitments`:
//! which writers serialize on a case is the application's choice), and
//! count what it stored. What it **may not** do: choose an outcome — which
//! state change, which history signal or cause, the words of a note, retry
//! or review, whether something expired or counts as evidence. Those come
//! in as rows ([`domain::history::Record`], [`domain::finish::AttemptWrite`])
//! decided by core.
//!
//! The status-webhook path keeps its steps here as rows (record an event,
//! the correlation lookups, mark it, store core's decision for a report,
//! [`domain::webhook::report_row`], through `Tx::signal`); their order and
//! the choices between them are the application's (`unavez_app::status`).
//!
//! **Layering:** on top of `unavez-core` only (re-exported here under its
//! module names so `crate::domain::…` paths read as before). It knows
//! neither the configuration, the channels nor the application workflows;
//! `unavez-app` drives it.

pub use unavez_core::{domain, planner, policy, templates};

pub mod api;
pub mod api_recovery;
pub mod copy;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod location;
pub mod pg;
pub mod rows;
pub mod rules_sql;
pub mod sql;
pub mod store;

/// TEMPORARY (levers measurement): whether lever `name` is switched off
/// by `UNAVEZ_LEVERS_OFF`.
pub fn lever_off(name: &str) -> bool {
    static OFF: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OFF.get_or_init(|| std::env::var("UNAVEZ_LEVERS_OFF").unwrap_or_default())
        .split(',')
        .any(|s| s == name)
}
