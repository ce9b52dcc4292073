//! The WhatsApp Cloud API (`kind = "cloud"`).
//!
//! No idempotency key, no status lookup, no cancel: a send whose answer is
//! lost is `Uncertain` and must never be resent automatically (it would be
//! a second message); it waits for a status webhook correlated by wamid or
//! by `biz_opaque_callback_data` (= our intention key).

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::http::{Http, path_segment, probe_transport, transport_before_sending};
use super::{AsyncChannel, Capabilities, ChannelError, ChannelState, ProbeOutcome, SendOutcome, SendRequest};
use crate::channel::config::CloudConfig;
use crate::domain::fault::ChannelFault;

/// Graph's "access token" error: expired, revoked, password changed,
/// app removed… (every subcode means the token no longer works).
pub const OAUTH_EXCEPTION: i64 = 190;

/// Whether a Graph answer refuses the caller rather than the message: HTTP
/// 401/403, or error code 190 whatever its subcode and status.
pub fn channel_fault(status: StatusCode, code: Option<i64>) -> Option<ChannelFault> {
    (matches!(status.as_u16(), 401 | 403) || code == Some(OAUTH_EXCEPTION)).then_some(ChannelFault::CredentialRejected)
}

pub(crate) const KIND: &str = "cloud";
/// What the bearer secret is, in errors.
pub(crate) const TOKEN: &str = "Cloud API access token";

/// Client of `POST /{version}/{phone_number_id}/messages`.
#[derive(Debug, Clone)]
pub struct CloudChannel {
    http: Http,
    /// `{base}/{version}/{phone_number_id}/messages`.
    url: String,
    /// `{base}/{version}/{phone_number_id}`: read by the probe.
    phone_url: String,
}

/// Classifies a complete Cloud API answer.
///
/// 2xx with `messages[0].id` → accepted (the wamid). Graph error codes:
/// 131026 (undeliverable), 131049 (marketing cap) and 131047 (outside the
/// 24-hour window) → failed; 130429 and 131056 (rate limits) → retry;
/// any other code → failed with code and title. A 5xx without a Graph
/// error body may have been processed: uncertain.
pub fn classify_send(status: StatusCode, headers: &reqwest::header::HeaderMap, body: &[u8]) -> SendOutcome {
    let http_status = Some(status.as_u16());
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if status.is_success() {
        let wamid = json
            .as_ref()
            .and_then(|v| v.pointer("/messages/0/id"))
            .and_then(Value::as_str);
        return match wamid {
            Some(id) => SendOutcome::Accepted {
                command_id: None,
                message_id: Some(id.to_string()),
                state: ChannelState::Queued,
                http_status,
            },
            None => SendOutcome::Uncertain {
                detail: format!("HTTP {} without messages[0].id", status.as_u16()),
            },
        };
    }
    let err = json.as_ref().and_then(|v| v.get("error"));
    let code = err.and_then(|e| e.get("code")).and_then(Value::as_i64);
    let title = err
        .and_then(|e| {
            e.get("error_user_title")
                .or_else(|| e.get("title"))
                .or_else(|| e.get("message"))
        })
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(fault) = channel_fault(status, code) {
        let subcode = err.and_then(|e| e.get("error_subcode")).and_then(Value::as_i64);
        let raw: String = String::from_utf8_lossy(body).chars().take(300).collect();
        let detail = match code {
            Some(c) => format!(
                "Cloud API error {c}{} (HTTP {}): {title}",
                subcode.map(|s| format!("/{s}")).unwrap_or_default(),
                status.as_u16()
            ),
            None => format!(
                "HTTP {} {}: {raw}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            ),
        };
        return SendOutcome::ChannelDown {
            fault,
            detail,
            http_status,
        };
    }
    let Some(code) = code else {
        let raw: String = String::from_utf8_lossy(body).chars().take(300).collect();
        let detail = format!(
            "HTTP {} {}: {raw}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        return if status.is_server_error() {
            SendOutcome::Uncertain {
                detail: format!("{detail} (the Cloud API may have sent it; not resent)"),
            }
        } else {
            SendOutcome::Failed {
                code: format!("http_{}", status.as_u16()),
                detail,
                http_status,
            }
        };
    };
    let detail = |why: &str| format!("Cloud API error {code} ({why}): {title}");
    match code {
        131026 => SendOutcome::Failed {
            code: code.to_string(),
            detail: detail("message undeliverable"),
            http_status,
        },
        131049 => SendOutcome::Failed {
            code: code.to_string(),
            detail: detail("marketing message cap"),
            http_status,
        },
        131047 => SendOutcome::Failed {
            code: code.to_string(),
            detail: detail("outside the 24-hour window"),
            http_status,
        },
        130429 | 131056 => SendOutcome::Retry {
            detail: detail("rate limit; retry later"),
            http_status,
            retry_after_secs: headers
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok()),
        },
        _ => SendOutcome::Failed {
            code: code.to_string(),
            detail: detail(&format!("HTTP {}", status.as_u16())),
            http_status,
        },
    }
}

impl CloudChannel {
    /// The client for `cfg`, with the access token given directly (tests,
    /// embedding; [`super::from_config`] reads it from `cfg.token_env`).
    pub fn with_token(cfg: &CloudConfig, token: impl Into<String>) -> Result<CloudChannel, ChannelError> {
        // Connecting is quick or not at all; the answer may take the rest.
        let connect_ms = cfg.timeout_ms.min(5_000);
        let http = Http::new(
            KIND,
            &cfg.base_url,
            (cfg.timeout_ms, connect_ms),
            token.into(),
            (&cfg.token_env, TOKEN),
        )?;
        let hint = " (the id from the WhatsApp Manager)";
        let phone = path_segment(KIND, "phone_number_id", &cfg.phone_number_id, hint)?;
        let phone_url = format!("{}/{}/{phone}", http.base_url, cfg.api_version.trim().trim_matches('/'));
        let url = format!("{phone_url}/messages");
        Ok(CloudChannel { http, url, phone_url })
    }

    /// The Cloud API message: free text inside the 24-hour service window,
    /// the approved template outside it.
    pub fn body(req: &SendRequest) -> Value {
        let mut b = if req.in_service_window {
            json!({
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": req.recipient,
                "type": "text",
                "text": {"preview_url": false, "body": req.body},
            })
        } else {
            let params: Vec<Value> = req
                .parameters
                .iter()
                .map(|p| json!({"type": "text", "text": p}))
                .collect();
            let mut template = json!({"name": req.template, "language": {"code": req.language}});
            if !params.is_empty() {
                template["components"] = json!([{"type": "body", "parameters": params}]);
            }
            json!({
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": req.recipient,
                "type": "template",
                "template": template,
            })
        };
        b["biz_opaque_callback_data"] = json!(req.key);
        b
    }
}

/// Only a failure to connect proves nothing went out; anything after that
/// is uncertain and, on this channel, never resent automatically.
pub fn classify_transport(e: &reqwest::Error) -> SendOutcome {
    transport_before_sending(e, "Cloud API").unwrap_or_else(|| SendOutcome::Uncertain {
        detail: format!("answer lost after sending (not resent; waiting for a status webhook): {e}"),
    })
}

/// Send only (see the module header): the lookup and cancel answers are
/// the defaults of a channel without those capabilities.
impl AsyncChannel for CloudChannel {
    const KIND: &'static str = KIND;
    const CAPABILITIES: Capabilities = Capabilities::SEND_ONLY;

    async fn send(&self, req: &SendRequest) -> SendOutcome {
        let resp = self.http.post(&self.url).json(&CloudChannel::body(req)).send().await;
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return classify_transport(&e),
        };
        let status = resp.status();
        let headers = resp.headers().clone();
        match resp.bytes().await {
            Ok(body) => classify_send(status, &headers, &body),
            Err(e) => classify_transport(&e),
        }
    }

    /// `GET /{version}/{phone_number_id}`: reads the number's profile,
    /// which needs the token and sends nothing.
    async fn probe(&self) -> ProbeOutcome {
        let resp = match self.http.get(self.phone_url.clone()).send().await {
            Ok(r) => r,
            Err(e) => return probe_transport(&e),
        };
        let status = resp.status();
        let body = resp.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
        classify_probe(status, &body)
    }
}

/// The Cloud API's answer to the probe: 2xx takes us again; a refusal of
/// the caller ([`channel_fault`]) still refuses; anything else cannot tell.
pub fn classify_probe(status: StatusCode, body: &[u8]) -> ProbeOutcome {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let code = json
        .as_ref()
        .and_then(|v| v.pointer("/error/code"))
        .and_then(Value::as_i64);
    let raw: String = String::from_utf8_lossy(body).chars().take(300).collect();
    let detail = format!("HTTP {}: {raw}", status.as_u16());
    if let Some(fault) = channel_fault(status, code) {
        return ProbeOutcome::Down { fault, detail };
    }
    if status.is_success() {
        ProbeOutcome::Ok
    } else {
        ProbeOutcome::Unavailable { detail }
    }
}

#[cfg(test)]
#[path = "cloud_tests.rs"]
mod tests;
