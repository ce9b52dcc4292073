//! # unavez — one business intention, at most one message
//!
//! A ledger, a background dispatcher and an operator console for WhatsApp
//! notifications that belong to a business process (appointment reminders,
//! order notices). The workspace's folders are its layers, from the pure
//! core outwards; each crate's `lib.rs` maps its own modules:
//!
//! | crate | folder | job | modules re-exported here |
//! |---|---|---|---|
//! | `unavez-core` | `crates/core` | pure rules, no I/O: states and transitions, keys, fingerprints, commitment versions, the booking-event contract, the planner, policy, templates | [`domain`], [`planner`], [`policy`], [`templates`] |
//! | `unavez-ledger` | `crates/ledger` | **all SQL**: the SQLite ledger and its migrations | [`store`] |
//! | `unavez-channels` | `crates/channels` | the channel trait; the engine (`motor`) and Cloud API clients and their wire types | [`channel`] |
//! | `unavez-sim` | `crates/sim` | the WhatsApp engine simulator and a fake Cloud API (`demo`, `unavez sim`, the tests' ground truth) | [`sim`] |
//! | `unavez-app` | `crates/app` | configuration, ingest, import, the dispatcher and reconciler, operator actions, the demo clinic | [`config`], [`ingest`], [`import`], [`dispatch`], [`ops`], [`demo`] |
//! | `unavez-server` | `crates/server` | the HTTP server of `serve`: webhooks, inbound replies, booking ingest, metrics | [`server`] |
//! | `unavez-console` | `crates/console` | the ratatui operator console and its string tables | [`tui`], [`i18n`] |
//! | `unavez` | `.` (this package) | the binary: the command line ([`cli`]) and the embedded background services | — |
//!
//! Each arrow points down only: core ← ledger, channels ← sim, app ←
//! server, console ← unavez. This facade re-exports every layer under its
//! old module name, so `unavez::store::…`, `unavez::dispatch::…` and the
//! like work for the integration tests in `tests/` and for the tools.
//!
//! The binary (`src/main.rs`) is thin: it parses the command line with
//! [`cli`] and calls into these modules. Errors are `thiserror` enums at
//! module boundaries; only the binary edge uses `anyhow`.

pub use unavez_app::{
    backup, board, config, demo, dispatch, doctor, feed, import, ingest, ledger, ops, planning, status,
};
pub use unavez_channels::channel;
pub use unavez_console::{i18n, tui};
pub use unavez_core::{domain, planner, policy, template_check, templates};
pub use unavez_ledger::store;
pub use unavez_server::server;
pub use unavez_sim::sim;

pub mod cli;
