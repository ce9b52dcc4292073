//! `[server]`: the HTTP server of `unavez serve` (where it listens, its
//! limits, and the environment variables that hold its secrets).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: String,
    /// The largest request body accepted (413 above).
    pub body_limit_bytes: usize,
    /// From a connection's start (or, on a kept-alive connection, the
    /// first byte of the next request) to the end of the headers.
    pub header_read_timeout_ms: u64,
    /// To read a whole request body, in total: a trickling body is cut too.
    pub body_read_timeout_ms: u64,
    /// How long a kept-alive connection may wait for its next request.
    pub idle_timeout_ms: u64,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Request body bytes held in memory at once, over all connections
    /// (503 with Retry-After beyond).
    pub bodies_in_flight_bytes: usize,
    /// Cloud API app secret (HMAC of webhook bodies), by env var name.
    pub cloud_app_secret_env: String,
    /// Cloud API webhook verification token, by env var name.
    pub cloud_verify_token_env: String,
    /// Shared secret of the engine's webhooks, by env var name.
    pub motor_webhook_secret_env: String,
    /// Bearer token for `POST /v1/bookings/events`, by env var name.
    pub ingest_token_env: String,
    /// The public https URL Meta reaches this server at (behind a proxy);
    /// `unavez doctor` reminds that Meta's webhook must point at it.
    pub public_url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8089".into(),
            body_limit_bytes: 2 * 1024 * 1024,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            max_connections: 1024,
            bodies_in_flight_bytes: 64 * 1024 * 1024,
            cloud_app_secret_env: "UNAVEZ_CLOUD_APP_SECRET".into(),
            cloud_verify_token_env: "UNAVEZ_CLOUD_VERIFY_TOKEN".into(),
            motor_webhook_secret_env: "UNAVEZ_MOTOR_WEBHOOK_SECRET".into(),
            ingest_token_env: "UNAVEZ_INGEST_TOKEN".into(),
            public_url: None,
        }
    }
}

impl ServerConfig {
    pub(super) fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = [
            ("body_limit_bytes", self.body_limit_bytes as u64),
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("body_read_timeout_ms", self.body_read_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("max_connections", self.max_connections as u64),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err((field, "must be greater than 0".into()));
            }
        }
        if self.bodies_in_flight_bytes < self.body_limit_bytes {
            return Err((
                "bodies_in_flight_bytes",
                format!(
                    "{} is smaller than body_limit_bytes ({}): no body of the largest allowed size could be read",
                    self.bodies_in_flight_bytes, self.body_limit_bytes
                ),
            ));
        }
        Ok(())
    }
}
