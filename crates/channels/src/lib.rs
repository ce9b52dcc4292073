//! # unavez-channels — how a message leaves
//!
//! | module | job |
//! |---|---|
//! | [`channel`] | the async `Channel` trait (written as an `AsyncChannel`) and its capabilities; `motor` (the WhatsApp engine client), `cloud` (the Cloud API client), `motor_event` (the engine's signed webhooks), `config` (the `[channel]` section) |
//!
//! **Layering:** on top of `unavez-core` only (re-exported as [`domain`]).
//! It never touches the ledger: the dispatcher in `unavez-app` records what
//! a channel answers. The simulator (`unavez-sim`) implements the same
//! contract from the other side.

pub use unavez_core::domain;

pub mod channel;
