//! # unavez-core — the rules, with no I/O
//!
//! Everything here is pure and deterministic, tested without a database or
//! a network: what an intention is and how it may change, what a booking
//! change calls for, what a message says.
//!
//! | module | job |
//! |---|---|
//! | [`doctor`] | `unavez doctor`'s checks, typed (id, status, finding), and the pure decisions behind them: file mode, free space, schema version, clock skew, template lengths, dispatchers from heartbeat rows |
//! | [`domain`] | intention states and transitions, idempotency keys, content fingerprints, commitment versions, the booking-event contract (strict JSON: no key given twice), validity, inbound keywords, operators, roles and which actions each may take, channel status words, dispatcher heartbeats (alive or gone) and alert thresholds (crossed or not) |
//! | [`planner`] | which messages a commitment change calls for, and which planned ones it closes |
//! | [`policy`] | what to send and when (`[policy]`) and the inbound keywords (`[inbound]`), with validation |
//! | [`search`] | finding a patient: a typed query read as phone digits or name tokens, accents folded, one typo (OSA distance) forgiven, exact before fuzzy |
//! | [`template_check`] | our templates file against Meta's (missing, not approved, other parameters, other text) and the skeleton of a file from Meta's approved templates |
//! | [`templates`] | WhatsApp-shaped message templates (parsed from text; the embedded set) and Spanish date formatting |
//!
//! **Layering:** the bottom of the workspace. It depends on no other unavez
//! crate; the ledger, channels, app and everything above build on it.

pub mod doctor;
pub mod domain;
pub mod planner;
pub mod policy;
pub mod search;
pub mod template_check;
pub mod templates;
