//! Why the ledger refused an action: the typed refusal lives with the pure
//! guard rules in core (`domain::refusal`, `domain::guard`), so the console's
//! hints and the actions name the same rule.

pub use crate::domain::refusal::Refusal;
