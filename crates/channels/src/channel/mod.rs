//! Channels: where an intention is handed over to WhatsApp.
//!
//! One async trait with declared capabilities, because reconciliation depends
//! on what the channel can prove: the WhatsApp engine deduplicates by
//! `Idempotency-Key` and can be asked about a command, so an uncertain send
//! can be repeated safely; the WhatsApp Cloud API can do neither, so an
//! uncertain send there must wait for a status webhook and never be resent.
//!
//! The dispatcher only sees [`Channel`], [`SendRequest`] and [`SendOutcome`];
//! HTTP details stay in the implementations, each an [`AsyncChannel`]:
//! [`motor::MotorChannel`] (the WhatsApp engine, or `unavez sim`) and
//! [`cloud::CloudChannel`] (the WhatsApp Cloud API). [`from_config`]
//! builds the configured one.

pub mod cloud;
pub mod config;
pub mod graph;
mod http;
pub mod motor;
pub mod motor_event;

use std::sync::Arc;

use crate::channel::config::{ChannelConfig, ChannelKind};

use async_trait_shim::BoxFuture;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::domain::fault::ChannelFault;

/// What a channel can do, declared up front so the dispatcher and reconciler
/// choose a safe strategy without knowing the channel's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// The channel deduplicates by our key: repeating a send is safe.
    pub idempotent_keys: bool,
    /// The channel can be asked for a command's current state.
    pub command_lookup: bool,
    /// A queued command can be withdrawn before it goes out.
    pub cancel: bool,
}

impl Capabilities {
    /// The engine contract: it deduplicates by our key, answers "where is
    /// this command?" and withdraws a queued one.
    pub const ENGINE: Capabilities = Capabilities {
        idempotent_keys: true,
        command_lookup: true,
        cancel: true,
    };
    /// A channel that can only send (the Cloud API): an uncertain send there
    /// waits for a status webhook and is never resent.
    pub const SEND_ONLY: Capabilities = Capabilities {
        idempotent_keys: false,
        command_lookup: false,
        cancel: false,
    };
}

/// Everything needed to hand one intention to a channel. All fields are
/// fixed when the intention is reserved, so every attempt carries exactly the
/// same content (the engine compares a fingerprint of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRequest {
    /// The intention's idempotency key; sent as `Idempotency-Key`, or as
    /// `biz_opaque_callback_data` on the Cloud API.
    pub key: String,
    /// E.164 recipient.
    pub recipient: String,
    /// Rendered text, used inside the 24-hour service window.
    pub body: String,
    /// Approved template name and language, used outside the window.
    pub template: String,
    pub language: String,
    pub parameters: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub correlation_id: String,
    /// Whether the customer wrote to us in the last 24 hours (Cloud API:
    /// free text allowed).
    pub in_service_window: bool,
}

/// The classified result of one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SendOutcome {
    /// The channel took the request (202, a 429 carrying the stored command,
    /// a wamid). `state` is the channel's own word for where it is now.
    Accepted {
        command_id: Option<String>,
        message_id: Option<String>,
        state: ChannelState,
        http_status: Option<u16>,
    },
    /// Definitive failure; do not retry.
    Failed {
        code: String,
        detail: String,
        http_status: Option<u16>,
    },
    /// The request never reached processing (connection refused, 5xx before
    /// processing, a rate limit without a stored command): retry later with
    /// the same key.
    Retry {
        detail: String,
        http_status: Option<u16>,
        retry_after_secs: Option<u64>,
    },
    /// The request may have been processed and we do not know: timeout or
    /// connection lost after sending, or the engine calls it ambiguous.
    Uncertain { detail: String },
    /// The channel reports a conflict a person must look at (409 on the
    /// engine: same key, other content; or a generation mismatch).
    Conflict { detail: String, http_status: Option<u16> },
    /// The channel refused *us*, not the message (a rejected credential,
    /// an unknown or unlinked engine instance, a failed TLS handshake):
    /// nothing reached it, and no message can go out until the channel is
    /// fixed (docs/design.md, "A channel that refuses us").
    ChannelDown {
        fault: ChannelFault,
        detail: String,
        http_status: Option<u16>,
    },
}

/// Answer to a probe: a request that sends nothing, made while the channel
/// is paused to learn whether it takes us again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProbeOutcome {
    /// The channel takes our requests again.
    Ok,
    /// It still refuses us, and why.
    Down { fault: ChannelFault, detail: String },
    /// Could not tell (down, timeout, an answer we do not understand).
    Unavailable { detail: String },
}

/// A channel's report of where a command is, mapped onto our evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelState {
    /// Queued in the channel, not yet out.
    Queued,
    /// Left to WhatsApp.
    Sent,
    Delivered,
    Read,
    /// The command failed in the channel (expired, generation changed…).
    Failed,
    /// Withdrawn before it went out.
    Cancelled,
    /// The channel itself does not know (engine "ambiguo").
    Ambiguous,
}

/// Answer to "what happened to this command?".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LookupOutcome {
    Found {
        command_id: Option<String>,
        message_id: Option<String>,
        state: ChannelState,
        detail: Option<String>,
    },
    /// The channel has no record of the key: it never arrived.
    NotFound,
    /// Could not ask (down, timeout): try again later.
    Unavailable { detail: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CancelOutcome {
    /// Withdrawn before going out.
    Cancelled,
    /// Too late: it already went out or finished.
    TooLate {
        state: ChannelState,
    },
    Unsupported,
    Unavailable {
        detail: String,
    },
}

/// A place to hand intentions to, as the dispatcher holds it
/// (`Arc<dyn Channel>`). Implementations must be cheap to clone behind an
/// `Arc` and safe to call concurrently; write one as an [`AsyncChannel`].
pub trait Channel: Send + Sync {
    /// `motor`, `cloud`: stored with each attempt.
    fn kind(&self) -> &'static str;
    fn capabilities(&self) -> Capabilities;
    fn send<'a>(&'a self, req: &'a SendRequest) -> BoxFuture<'a, SendOutcome>;
    /// Reconciliation: where is the command for this key? Channels without
    /// lookup answer [`LookupOutcome::Unavailable`].
    fn lookup<'a>(&'a self, req: &'a SendRequest, command_id: Option<&'a str>) -> BoxFuture<'a, LookupOutcome>;
    fn cancel<'a>(&'a self, command_id: &'a str) -> BoxFuture<'a, CancelOutcome>;
    /// A request that sends nothing, to learn whether a paused channel
    /// takes us again.
    fn probe(&self) -> BoxFuture<'_, ProbeOutcome>;
}

/// How a channel is written: its name and capabilities as constants and
/// plain `async fn`s. Every `AsyncChannel` is a [`Channel`] through the
/// impl below, which boxes the futures for `dyn Channel` in this one place
/// instead of in every channel.
pub trait AsyncChannel: Send + Sync {
    /// `motor`, `cloud`: [`Channel::kind`].
    const KIND: &'static str;
    const CAPABILITIES: Capabilities;

    fn send(&self, req: &SendRequest) -> impl Future<Output = SendOutcome> + Send;

    /// A channel without [`Capabilities::command_lookup`] keeps this answer:
    /// the dispatcher never asks it, and an operator is told why not.
    fn lookup(&self, _req: &SendRequest, _command_id: Option<&str>) -> impl Future<Output = LookupOutcome> + Send {
        async {
            LookupOutcome::Unavailable {
                detail: format!(
                    "the {} channel has no status lookup; wait for a status webhook",
                    Self::KIND
                ),
            }
        }
    }

    /// A channel without [`Capabilities::cancel`] keeps this answer.
    fn cancel(&self, _command_id: &str) -> impl Future<Output = CancelOutcome> + Send {
        async { CancelOutcome::Unsupported }
    }

    /// A channel that never refuses us (in process) keeps this answer.
    fn probe(&self) -> impl Future<Output = ProbeOutcome> + Send {
        async { ProbeOutcome::Ok }
    }
}

impl<T: AsyncChannel> Channel for T {
    fn kind(&self) -> &'static str {
        T::KIND
    }

    fn capabilities(&self) -> Capabilities {
        T::CAPABILITIES
    }

    fn send<'a>(&'a self, req: &'a SendRequest) -> BoxFuture<'a, SendOutcome> {
        Box::pin(AsyncChannel::send(self, req))
    }

    fn lookup<'a>(&'a self, req: &'a SendRequest, command_id: Option<&'a str>) -> BoxFuture<'a, LookupOutcome> {
        Box::pin(AsyncChannel::lookup(self, req, command_id))
    }

    fn cancel<'a>(&'a self, command_id: &'a str) -> BoxFuture<'a, CancelOutcome> {
        Box::pin(AsyncChannel::cancel(self, command_id))
    }

    fn probe(&self) -> BoxFuture<'_, ProbeOutcome> {
        Box::pin(AsyncChannel::probe(self))
    }
}

/// A channel that cannot be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The environment variable that should hold a secret is unset or empty.
    #[error("channel `{channel}`: environment variable {var} (the {what}) is not set or empty")]
    MissingSecret {
        channel: &'static str,
        var: String,
        what: &'static str,
    },
    /// A configuration value is unusable.
    #[error("channel `{channel}`: config field channel.{channel}.{field}: {reason}")]
    Config {
        channel: &'static str,
        /// The field of the `[channel.{channel}]` section.
        field: &'static str,
        reason: String,
    },
    /// The HTTP client could not be built (TLS backend).
    #[error("channel `{channel}`: cannot build the HTTP client: {source}")]
    Client {
        channel: &'static str,
        source: reqwest::Error,
    },
}

/// The environment variable the configured channel's secret comes from:
/// what an operator must check when the channel rejects the credential.
pub fn secret_env(cfg: &ChannelConfig) -> &str {
    match cfg.kind {
        ChannelKind::Motor => &cfg.motor.api_key_env,
        ChannelKind::Cloud => &cfg.cloud.token_env,
    }
}

/// The channel instance a configuration sends through, as heartbeat rows
/// record it: `motor/<instance_id>` or `cloud/<phone_number_id>`.
pub fn instance_label(cfg: &ChannelConfig) -> String {
    match cfg.kind {
        ChannelKind::Motor => format!("motor/{}", cfg.motor.instance_id.trim()),
        ChannelKind::Cloud => format!("cloud/{}", cfg.cloud.phone_number_id.trim()),
    }
}

/// Builds the channel selected by `[channel] kind`, reading its secret
/// from the environment variable the configuration names (unset or blank
/// is an error naming the variable).
pub fn from_config(cfg: &ChannelConfig) -> Result<Arc<dyn Channel>, ChannelError> {
    Ok(match cfg.kind {
        ChannelKind::Motor => {
            let key = secret_from_env(motor::KIND, &cfg.motor.api_key_env, motor::API_KEY)?;
            Arc::new(motor::MotorChannel::with_api_key(&cfg.motor, key)?)
        }
        ChannelKind::Cloud => {
            let token = secret_from_env(cloud::KIND, &cfg.cloud.token_env, cloud::TOKEN)?;
            Arc::new(cloud::CloudChannel::with_token(&cfg.cloud, token)?)
        }
    })
}

/// Reads a secret from an env var; unset or blank is an error naming the var.
pub(crate) fn secret_from_env(channel: &'static str, var: &str, what: &'static str) -> Result<String, ChannelError> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(v.trim().to_string()),
        _ => Err(ChannelError::MissingSecret {
            channel,
            var: var.to_string(),
            what,
        }),
    }
}

/// Boxed futures keep the trait object-safe without a macro crate.
pub mod async_trait_shim {
    pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::config::{CloudConfig, MotorConfig};

    #[test]
    fn from_config_names_the_missing_env_var() {
        let cfg = ChannelConfig {
            kind: ChannelKind::Motor,
            motor: MotorConfig {
                api_key_env: "UNAVEZ_TEST_UNSET_MOTOR_KEY".into(),
                ..MotorConfig::default()
            },
            cloud: CloudConfig::default(),
        };
        let e = from_config(&cfg).err().unwrap().to_string();
        assert!(e.contains("UNAVEZ_TEST_UNSET_MOTOR_KEY") && e.contains("motor"), "{e}");
        let cfg = ChannelConfig {
            kind: ChannelKind::Cloud,
            cloud: CloudConfig {
                token_env: "UNAVEZ_TEST_UNSET_CLOUD_TOKEN".into(),
                ..CloudConfig::default()
            },
            ..cfg
        };
        let e = from_config(&cfg).err().unwrap().to_string();
        assert!(
            e.contains("UNAVEZ_TEST_UNSET_CLOUD_TOKEN") && e.contains("cloud"),
            "{e}"
        );
    }
}
