//! What the two HTTP channels share: a bearer secret that must not be
//! blank, an http(s) base URL and a client with positive timeouts, each
//! refused with an error that names the configuration field.

use std::time::Duration;

use super::{ChannelError, ProbeOutcome, SendOutcome};
use crate::domain::fault::ChannelFault;

/// A channel's endpoint, checked: every request carries the bearer secret.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    /// Without a trailing slash.
    pub(crate) base_url: String,
    bearer: String,
}

impl Http {
    /// `bearer` was given directly or read by [`super::secret_from_env`];
    /// `(var, what)` name it when it is blank. `timeouts_ms` is (request,
    /// connect).
    pub(crate) fn new(
        channel: &'static str,
        base_url: &str,
        timeouts_ms: (u64, u64),
        bearer: String,
        (var, what): (&str, &'static str),
    ) -> Result<Http, ChannelError> {
        if bearer.trim().is_empty() {
            return Err(ChannelError::MissingSecret {
                channel,
                var: var.to_string(),
                what,
            });
        }
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(ChannelError::Config {
                channel,
                field: "base_url",
                reason: format!("{base_url:?} is not an http(s) URL"),
            });
        }
        let (timeout, connect) = timeouts_ms;
        if timeout == 0 || connect == 0 {
            return Err(ChannelError::Config {
                channel,
                field: "timeout_ms",
                reason: "timeouts must be positive".into(),
            });
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(timeout))
            .connect_timeout(Duration::from_millis(connect))
            .build()
            .map_err(|source| ChannelError::Client { channel, source })?;
        Ok(Http {
            client,
            base_url,
            bearer,
        })
    }

    pub(crate) fn get(&self, url: String) -> reqwest::RequestBuilder {
        self.client.get(url).bearer_auth(&self.bearer)
    }

    pub(crate) fn post(&self, url: &str) -> reqwest::RequestBuilder {
        self.client.post(url).bearer_auth(&self.bearer)
    }
}

/// An id that becomes one segment of a URL path (the engine instance, the
/// Cloud API phone number id): not blank, no `/`. Trimmed.
pub(crate) fn path_segment(
    channel: &'static str,
    field: &'static str,
    value: &str,
    hint: &str,
) -> Result<String, ChannelError> {
    let v = value.trim();
    if v.is_empty() || v.contains('/') {
        return Err(ChannelError::Config {
            channel,
            field,
            reason: format!("{value:?} is empty or contains '/'{hint}"),
        });
    }
    Ok(v.to_string())
}

/// What a transport error proves on any HTTP channel: a failure to connect
/// means the request never left (retry with the same key), and a request
/// that could not be built never will (final). `None`: anything later may
/// have been processed, and each channel says what that means for it.
/// `who` names the other side in the detail.
pub(crate) fn transport_before_sending(e: &reqwest::Error, who: &str) -> Option<SendOutcome> {
    if let Some(detail) = tls_failure(e) {
        // The handshake comes before the request: nothing left, and nothing
        // will until someone fixes the certificate or the URL.
        Some(SendOutcome::ChannelDown {
            fault: ChannelFault::Tls,
            detail: format!("{who}: TLS handshake failed (not sent): {detail}"),
            http_status: None,
        })
    } else if e.is_connect() {
        Some(SendOutcome::Retry {
            detail: format!("{who} unreachable (not sent): {e}"),
            http_status: None,
            retry_after_secs: None,
        })
    } else if e.is_builder() {
        Some(SendOutcome::Failed {
            code: "request_invalido".into(),
            detail: e.to_string(),
            http_status: None,
        })
    } else {
        None
    }
}

/// The TLS error behind a transport error, if the handshake is what failed
/// (a certificate not trusted, expired or for another name; a peer that
/// does not speak TLS). rustls reports it inside I/O errors of the
/// connection (nested: the connector wraps the stream's own), which hide
/// it from `source()`, so each I/O error is opened too.
pub(crate) fn tls_failure(e: &reqwest::Error) -> Option<String> {
    fn rustls_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        let inner = err.downcast_ref::<std::io::Error>()?.get_ref()?;
        rustls_in(inner)
    }
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(t) = rustls_in(err) {
            return Some(t.to_string());
        }
        cur = err.source();
    }
    None
}

/// A probe's transport error: a failed handshake is still the channel's
/// fault; anything else says only that we could not ask.
pub(crate) fn probe_transport(e: &reqwest::Error) -> ProbeOutcome {
    match tls_failure(e) {
        Some(detail) => ProbeOutcome::Down {
            fault: ChannelFault::Tls,
            detail: format!("TLS handshake failed: {detail}"),
        },
        None => ProbeOutcome::Unavailable { detail: e.to_string() },
    }
}
