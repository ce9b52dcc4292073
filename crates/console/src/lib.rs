//! # unavez-console — the operator console
//!
//! | module | job |
//! |---|---|
//! | [`tui`] | the ratatui console: key registry (`keys`), state and update (`app`), the database worker (`worker`), rendering (`view`), the terminal loop (`term`), refresh on activity (`refresh`) |
//! | [`i18n`] | the console's string tables (Spanish default, English twin) |
//!
//! **Layering:** on top of `unavez-app` (whose modules, and the lower
//! crates' it re-exports, are re-exported here under the same names). It
//! needs neither the server nor the simulator: the binary starts those
//! (`cli/background.rs`) and hands the console a channel and a control.

pub use unavez_app::{
    board, channel, config, dispatch, doctor, domain, ledger, ops, planner, store, template_check, templates,
};

pub mod i18n;
pub mod tui;
