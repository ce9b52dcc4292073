//! The operator console (ratatui).
//!
//! Layout of the module, after gitui/k9s:
//! - [`keys`]: the command registry and the pure key → [`keys::Action`] map;
//! - [`app`]: the state and its update function (no I/O);
//! - [`worker`]: the database thread, typed requests and responses;
//! - [`view`]: rendering, a pure function of the state;
//! - [`term`]: the terminal (raw mode, panic hook) and the event loop;
//! - [`refresh`]: when to re-read (tick, or debounced service activity and
//!   the PostgreSQL ledger's change notices);
//! - [`listen`]: the PostgreSQL ledger's notices, heard on a thread of
//!   their own;
//! - [`theme`]: the colour palettes (dark, light) every view draws with;
//! - [`failure`]: the worker's errors, typed so they are said in the
//!   operator's language;
//! - [`sentence`]: a message's state as one sentence (the patient card);
//! - [`colon`]: the `:` commands, one table for the parser, Tab and `?`.
//!
//! The embedded dispatcher and the demo's in-process simulator are started
//! by the binary (`cli/background.rs`), so the console needs neither the
//! server nor the simulator.

pub mod app;
pub mod colon;
pub mod failure;
pub mod keys;
pub mod listen;
pub mod refresh;
pub mod sentence;
pub mod term;
pub mod theme;
pub mod view;
pub mod worker;

pub use term::{ConsoleOptions, run};
