//! The WhatsApp Cloud API (`kind = "cloud"`).
//!
//! No idempotency key, no status lookup, no cancel: a send whose answer is
//! lost is `Uncertain` and must never be resent automatically (it would be
//! a second message); it waits for a status webhook correlated by wamid or
//! by `biz_opaque_callback_data` (= our intention key).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::async_trait_shim::BoxFuture;
use super::{
    CancelOutcome, Capabilities, Channel, ChannelError, ChannelState, LookupOutcome, SendOutcome, SendRequest,
};
use crate::channel::config::CloudConfig;

const KIND: &str = "cloud";

/// Client of `POST /{version}/{phone_number_id}/messages`.
#[derive(Debug, Clone)]
pub struct CloudChannel {
    client: reqwest::Client,
    url: String,
    token: String,
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
    /// Builds the client; the access token comes from the env var named by
    /// `cfg.token_env` (unset or blank is an error naming the variable).
    pub fn new(cfg: &CloudConfig) -> Result<CloudChannel, ChannelError> {
        let token = super::secret_from_env(KIND, &cfg.token_env, "Cloud API access token")?;
        CloudChannel::with_token(cfg, token)
    }

    /// Same as [`new`](CloudChannel::new) with the token given directly.
    pub fn with_token(cfg: &CloudConfig, token: impl Into<String>) -> Result<CloudChannel, ChannelError> {
        let token = token.into();
        if token.trim().is_empty() {
            return Err(ChannelError::MissingSecret {
                channel: KIND,
                var: cfg.token_env.clone(),
                what: "Cloud API access token",
            });
        }
        let base = cfg.base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ChannelError::Config {
                channel: KIND,
                field: "channel.cloud.base_url",
                reason: format!("{base:?} is not an http(s) URL"),
            });
        }
        let phone = cfg.phone_number_id.trim();
        if phone.is_empty() || phone.contains('/') {
            return Err(ChannelError::Config {
                channel: KIND,
                field: "channel.cloud.phone_number_id",
                reason: "empty or contains '/' (the id from the WhatsApp Manager)".into(),
            });
        }
        if cfg.timeout_ms == 0 {
            return Err(ChannelError::Config {
                channel: KIND,
                field: "channel.cloud.timeout_ms",
                reason: "must be positive".into(),
            });
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .connect_timeout(Duration::from_millis(cfg.timeout_ms.min(5_000)))
            .build()
            .map_err(|source| ChannelError::Client { channel: KIND, source })?;
        let url = format!("{base}/{}/{phone}/messages", cfg.api_version.trim().trim_matches('/'));
        Ok(CloudChannel { client, url, token })
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

    async fn do_send(&self, req: &SendRequest) -> SendOutcome {
        let resp = self
            .client
            .post(&self.url)
            .bearer_auth(&self.token)
            .json(&CloudChannel::body(req))
            .send()
            .await;
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
}

/// Only a failure to connect proves nothing went out; anything after that
/// is uncertain and, on this channel, never resent automatically.
pub fn classify_transport(e: &reqwest::Error) -> SendOutcome {
    if e.is_connect() {
        SendOutcome::Retry {
            detail: format!("Cloud API unreachable (not sent): {e}"),
            http_status: None,
            retry_after_secs: None,
        }
    } else if e.is_builder() {
        SendOutcome::Failed {
            code: "request_invalido".into(),
            detail: e.to_string(),
            http_status: None,
        }
    } else {
        SendOutcome::Uncertain {
            detail: format!("answer lost after sending (not resent; waiting for a status webhook): {e}"),
        }
    }
}

impl Channel for CloudChannel {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            idempotent_keys: false,
            command_lookup: false,
            cancel: false,
        }
    }

    fn send<'a>(&'a self, req: &'a SendRequest) -> BoxFuture<'a, SendOutcome> {
        Box::pin(self.do_send(req))
    }

    fn lookup<'a>(&'a self, _req: &'a SendRequest, _command_id: Option<&'a str>) -> BoxFuture<'a, LookupOutcome> {
        Box::pin(async {
            LookupOutcome::Unavailable {
                detail: "the Cloud API has no status lookup; wait for a status webhook".into(),
            }
        })
    }

    fn cancel<'a>(&'a self, _command_id: &'a str) -> BoxFuture<'a, CancelOutcome> {
        Box::pin(async { CancelOutcome::Unsupported })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderMap;

    fn classify(status: u16, body: Value) -> SendOutcome {
        classify_send(
            StatusCode::from_u16(status).unwrap(),
            &HeaderMap::new(),
            body.to_string().as_bytes(),
        )
    }

    fn graph(code: i64) -> Value {
        json!({"error": {"message": "m", "code": code, "type": "OAuthException"}})
    }

    #[test]
    fn graph_errors_are_classified() {
        assert!(matches!(
            classify(200, json!({"messages": [{"id": "wamid.1"}]})),
            SendOutcome::Accepted { message_id: Some(m), command_id: None, .. } if m == "wamid.1"
        ));
        assert!(matches!(classify(200, json!({})), SendOutcome::Uncertain { .. }));
        for code in [131026, 131049, 131047, 100, 190] {
            assert!(
                matches!(classify(400, graph(code)), SendOutcome::Failed { code: c, .. } if c == code.to_string()),
                "{code}"
            );
        }
        for code in [130429, 131056] {
            assert!(
                matches!(classify(429, graph(code)), SendOutcome::Retry { .. }),
                "{code}"
            );
        }
        assert!(matches!(
            classify(502, json!("bad gateway")),
            SendOutcome::Uncertain { .. }
        ));
        assert!(matches!(classify(404, json!("nope")), SendOutcome::Failed { code, .. } if code == "http_404"));
    }

    fn req(window: bool) -> SendRequest {
        SendRequest {
            key: "k1".into(),
            recipient: "+51987654321".into(),
            body: "Hola Ana".into(),
            template: "cita_recordatorio".into(),
            language: "es_PE".into(),
            parameters: vec!["Ana".into(), "09:30".into()],
            expires_at: None,
            correlation_id: "c".into(),
            in_service_window: window,
        }
    }

    #[test]
    fn text_inside_the_window_template_outside() {
        let t = CloudChannel::body(&req(true));
        assert_eq!(t["type"], "text");
        assert_eq!(t["text"]["body"], "Hola Ana");
        assert_eq!(t["biz_opaque_callback_data"], "k1");
        let p = CloudChannel::body(&req(false));
        assert_eq!(p["type"], "template");
        assert_eq!(p["template"]["name"], "cita_recordatorio");
        assert_eq!(p["template"]["language"]["code"], "es_PE");
        assert_eq!(p["template"]["components"][0]["parameters"][1]["text"], "09:30");
        assert_eq!(p["biz_opaque_callback_data"], "k1");
    }
}
