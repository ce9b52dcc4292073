//! # unavez — one business intention, at most one message
//!
//! A ledger, a background dispatcher and an operator console for WhatsApp
//! notifications that belong to a business process (appointment reminders,
//! order notices). A map for newcomers, from the pure core outwards:
//!
//! | module | job |
//! |---|---|
//! | [`domain`] | pure rules: intention states and transitions, idempotency keys, content fingerprints, commitment versions, the booking-event contract |
//! | [`planner`] | pure: which messages a commitment change calls for, and which planned ones it closes |
//! | [`templates`] | WhatsApp-shaped message templates and Spanish date formatting |
//! | [`config`] | the TOML configuration, policy and operators; secrets by env var name |
//! | [`store`] | **all SQL**: the SQLite ledger behind a narrow API (so a PostgreSQL store can follow) |
//! | [`ingest`] | booking events → commitments → planned intentions, atomically |
//! | [`import`] | `.jsonl`, `.csv` and `.ics` files → booking events, with `file:line` errors |
//! | [`channel`] | the async channel trait and its capabilities; the engine (`motor`) and Cloud API clients |
//! | [`dispatch`] | background dispatcher and reconciler: claims with validity, durable attempts, uncertain outcomes, reprocessing a day |
//! | [`sim`] | the WhatsApp engine simulator (faults, ground-truth log, signed webhooks) and a fake Cloud API |
//! | [`server`] | the HTTP server of `serve`: webhooks, inbound replies, booking ingest, metrics |
//! | [`ops`] | operator actions (cancel, verify, authorize resend, manual contact) with reason and responsible |
//! | [`i18n`] | the console's string table (Spanish default, English) |
//! | [`demo`] | the demo clinic generator |
//! | [`tui`] | the ratatui operator console |
//!
//! The binary (`src/main.rs`) is thin: it parses the command line with
//! [`cli`] and calls into these modules. Errors are `thiserror` enums at
//! module boundaries; only the binary edge uses `anyhow`.

pub use unavez_app::{config, demo, dispatch, import, ingest, ops};
pub use unavez_channels::channel;
pub use unavez_console::{i18n, tui};
pub use unavez_core::{domain, planner, policy, templates};
pub use unavez_ledger::{failpoint, store};
pub use unavez_server::server;
pub use unavez_sim::sim;

pub mod chaos;
pub mod cli;
