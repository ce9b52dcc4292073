//! # unavez-sim — the WhatsApp engine, simulated
//!
//! | module | job |
//! |---|---|
//! | [`sim`] | the engine simulator: HTTP contract, fault injection, the ground-truth log of what went out (`sent.jsonl`), its state journal, signed webhooks; an in-process channel over it; a fake Cloud API |
//!
//! **Layering:** on top of `unavez-core` and `unavez-channels` (re-exported
//! as [`domain`] and [`channel`]), which it implements from the engine's
//! side. It is part of the product, not a test tool: `unavez demo` and
//! `unavez sim` run it, and the tests use its log as independent evidence.

pub use unavez_channels::channel;
pub use unavez_core::domain;

pub mod sim;
