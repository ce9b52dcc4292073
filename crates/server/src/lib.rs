//! # unavez-server — the HTTP edge
//!
//! | module | job |
//! |---|---|
//! | [`server`] | the axum server of `unavez serve`: Cloud API and engine status webhooks (signatures checked on the raw bytes), inbound replies as business facts, booking ingest (`POST /v1/bookings/events`), Prometheus metrics |
//!
//! **Layering:** on top of `unavez-app` (whose modules, and the lower
//! crates' it re-exports, are re-exported here under the same names). The
//! binary starts it; nothing below knows it.

pub use unavez_app::{channel, config, dispatch, domain, ingest, ledger, planner, store, template_check, templates};

pub mod server;
