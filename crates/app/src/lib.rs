//! # unavez-app — the workflows
//!
//! What the product does with the ledger and the channels: booking events
//! in, messages out, uncertainty resolved, people's decisions recorded.
//!
//! | module | job |
//! |---|---|
//! | [`backup`] | backups and restores of a SQLite ledger: online copy, check, retention, the periodic task of `serve`; a restore's refusals (live dispatcher, newer schema, damaged copy) |
//! | [`board`] | the Tablero's figures of a day by the hour: latency to acceptance (p50, p95) and queue depth, from one ledger read |
//! | [`config`] | the TOML configuration (re-exporting policy, operators and channel config under their old paths); secrets by env var name; the template file |
//! | [`ingest`] | booking events → commitments → planned intentions, atomically |
//! | [`ledger`] | the one handle to the ledger a process shares: pooled connections for calls, a session of its own for a steady writer |
//! | [`planning`] | reserving a plan's intentions (a reused key with other content is a conflict) and closing what a closure names |
//! | [`import`] | `.jsonl`, `.csv` and `.ics` files → booking events, with `file:line` errors |
//! | [`status`] | status webhooks: record → correlate → apply, or wait for the message id; the periodic sweep |
//! | [`doctor`] | `unavez doctor`: gathers each check's facts (configuration, ledger file and schema, free space, the channel's answer, Meta's templates, the listen address, heartbeat rows) for `domain::doctor` to decide |
//! | [`dispatch`] | the background dispatcher and reconciler: claims with validity, durable attempts, pre-send checks, uncertain outcomes, repeats, reprocessing a day |
//! | [`feed`] | calendar feeds polled by `serve`: the conditional GET, one poll's body through the `.ics` import path, vanished events cancelled or held (`domain::feed` decides), the poller with its lease |
//! | [`ops`] | operator actions (cancel, verify, authorize resend, manual contact, pause) with reason and responsible |
//! | [`demo`] | the demo clinic generator |
//!
//! **Layering:** on top of `unavez-core`, `unavez-ledger` and
//! `unavez-channels` (re-exported here under their module names). The
//! server, the console and the binary build on it; it knows none of them.

pub use unavez_channels::channel;
pub use unavez_core::{domain, planner, policy, template_check, templates};
#[cfg(feature = "failpoints")]
pub use unavez_ledger::failpoint;
pub use unavez_ledger::{location, pg, store};

pub mod backup;
pub mod board;
pub mod config;
pub mod demo;
pub mod dispatch;
pub mod doctor;
pub mod feed;
pub mod import;
pub mod ingest;
pub mod ledger;
pub mod ops;
pub mod planning;
pub mod status;
