//! The WhatsApp engine (docs/design.md, "The WhatsApp engine contract") over HTTP (`kind = "motor"`).
//!
//! Every attempt for an intention carries the same `Idempotency-Key` and
//! the same body (built only from fields fixed at reservation), so the
//! engine answers a repeat with the original command instead of sending a
//! second message. What matters here is classifying each answer honestly:
//! "never sent" (retry) must not be confused with "sent, answer lost"
//! (uncertain).

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::http::{Http, path_segment, probe_transport, transport_before_sending};
use super::motor_event::estado;
use super::{
    AsyncChannel, CancelOutcome, Capabilities, ChannelError, ChannelState, LookupOutcome, ProbeOutcome, SendOutcome,
    SendRequest,
};
use crate::channel::config::MotorConfig;
use crate::domain::fault::ChannelFault;

/// The engine's error words for a channel that refuses us (docs/design.md,
/// "The WhatsApp engine contract", "Errors of the channel, not the message").
pub mod fault_word {
    /// `401`: no bearer key, or one the engine does not know.
    pub const NO_AUTORIZADO: &str = "no_autorizado";
    /// `403`: the key is known but may not use this instance.
    pub const PROHIBIDO: &str = "prohibido";
    /// `404` on an instance route: no instance by that id in this app.
    pub const INSTANCIA_DESCONOCIDA: &str = "instancia_desconocida";
    /// `503` on a send: the instance exists but no phone is linked now.
    pub const INSTANCIA_DESCONECTADA: &str = "instancia_desconectada";
}

/// Whether an engine answer is the channel refusing us rather than the
/// message: 401/403 whatever the body, 404 `instancia_desconocida`, 503
/// `instancia_desconectada`. Any other 404 or 503 keeps its meaning.
pub fn channel_fault(status: StatusCode, body: Option<&Value>) -> Option<ChannelFault> {
    let word = body.and_then(|v| v.get("error")).and_then(Value::as_str);
    match (status.as_u16(), word) {
        (401 | 403, _) => Some(ChannelFault::CredentialRejected),
        (404, Some(fault_word::INSTANCIA_DESCONOCIDA)) => Some(ChannelFault::InstanceUnknown),
        (503, Some(fault_word::INSTANCIA_DESCONECTADA)) => Some(ChannelFault::InstanceDisconnected),
        _ => None,
    }
}

/// [`Channel::kind`](super::Channel::kind) of the engine contract, over HTTP or in process.
pub const KIND: &str = "motor";
/// What the bearer secret is, in errors.
pub(super) const API_KEY: &str = "engine API key";

/// Client of the engine's command API.
#[derive(Debug, Clone)]
pub struct MotorChannel {
    http: Http,
    instance_id: String,
    expected_generation: Option<i64>,
}

/// Engine `estado` → our channel state. Unknown words are `None`.
pub fn map_estado(e: &str) -> Option<ChannelState> {
    Some(match e {
        estado::EN_COLA => ChannelState::Queued,
        estado::ENVIADO => ChannelState::Sent,
        estado::ENTREGADO => ChannelState::Delivered,
        estado::LEIDO => ChannelState::Read,
        estado::FALLIDO => ChannelState::Failed,
        estado::CANCELADO => ChannelState::Cancelled,
        estado::AMBIGUO => ChannelState::Ambiguous,
        _ => return None,
    })
}

/// The parts of an engine command body we use.
#[derive(Debug, Clone, PartialEq)]
struct CommandView {
    command_id: String,
    state: ChannelState,
    message_id: Option<String>,
    detail: Option<String>,
}

fn command_view(v: &Value) -> Option<CommandView> {
    let command_id = v.get("command_id")?.as_str()?.to_string();
    let e = v.get("estado")?.as_str()?;
    // An estado we do not know is treated as "the engine cannot say".
    let state = map_estado(e).unwrap_or(ChannelState::Ambiguous);
    Some(CommandView {
        command_id,
        state,
        message_id: v.get("provider_message_id").and_then(Value::as_str).map(str::to_string),
        detail: v.get("detail").and_then(Value::as_str).map(str::to_string),
    })
}

/// `detail` (or `error`) of an engine error body, or the raw text.
fn error_detail(status: StatusCode, body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let text = parsed
        .as_ref()
        .and_then(|v| {
            let code = v.get("error").and_then(Value::as_str);
            let detail = v.get("detail").and_then(Value::as_str);
            match (code, detail) {
                (Some(c), Some(d)) => Some(format!("{c}: {d}")),
                (None, Some(d)) => Some(d.to_string()),
                (Some(c), None) => Some(c.to_string()),
                _ => None,
            }
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(300).collect());
    format!(
        "HTTP {} {}: {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        text
    )
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<u64> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Classifies a complete engine answer to `POST …/messages` (the engine contract,
/// issue 3): 2xx → accepted; 429 with the stored command → accepted;
/// 409 → conflict; 422 and other 4xx → failed; 5xx → retry.
pub fn classify_send(status: StatusCode, headers: &reqwest::header::HeaderMap, body: &[u8]) -> SendOutcome {
    let http_status = Some(status.as_u16());
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let view = json.as_ref().and_then(command_view);
    if status.is_success() || status == StatusCode::TOO_MANY_REQUESTS {
        if let Some(c) = view {
            // A repeat can bring back a command the engine already failed
            // (expired, generation changed): final, no retry can help.
            if c.state == ChannelState::Failed {
                return SendOutcome::Failed {
                    code: c.detail.clone().unwrap_or_else(|| "fallido".into()),
                    detail: format!(
                        "the engine failed command {}: {}",
                        c.command_id,
                        c.detail.as_deref().unwrap_or("no detail")
                    ),
                    http_status,
                };
            }
            return SendOutcome::Accepted {
                command_id: Some(c.command_id),
                message_id: c.message_id,
                state: c.state,
                http_status,
            };
        }
        if status == StatusCode::TOO_MANY_REQUESTS {
            return SendOutcome::Retry {
                detail: error_detail(status, body),
                http_status,
                retry_after_secs: retry_after(headers),
            };
        }
        // 2xx without a readable command: it was processed, but we cannot
        // tell into what.
        return SendOutcome::Uncertain {
            detail: format!("HTTP {} without a command in the body", status.as_u16()),
        };
    }
    if let Some(fault) = channel_fault(status, json.as_ref()) {
        return SendOutcome::ChannelDown {
            fault,
            detail: error_detail(status, body),
            http_status,
        };
    }
    if status == StatusCode::CONFLICT {
        return SendOutcome::Conflict {
            detail: error_detail(status, body),
            http_status,
        };
    }
    if status.is_server_error() {
        return SendOutcome::Retry {
            detail: error_detail(status, body),
            http_status,
            retry_after_secs: retry_after(headers),
        };
    }
    let code = json
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("http_{}", status.as_u16()));
    SendOutcome::Failed {
        code,
        detail: error_detail(status, body),
        http_status,
    }
}

/// Classifies the engine's answer to the probe (`GET /v1/instances/{id}`):
/// `200` with `estado` `conectada` takes us again, `desconectada` is an
/// unlinked instance, and the refusals of [`channel_fault`] still refuse.
pub fn classify_probe(status: StatusCode, body: &[u8]) -> ProbeOutcome {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if let Some(fault) = channel_fault(status, json.as_ref()) {
        return ProbeOutcome::Down {
            fault,
            detail: error_detail(status, body),
        };
    }
    // Any other 404 is an engine without the instance route: the key
    // worked (a wrong one is a 401 on every route), which is what we ask.
    if status == StatusCode::NOT_FOUND {
        return ProbeOutcome::Ok;
    }
    if !status.is_success() {
        return ProbeOutcome::Unavailable {
            detail: error_detail(status, body),
        };
    }
    match json.as_ref().and_then(|v| v.get("estado")).and_then(Value::as_str) {
        Some(INSTANCIA_DESCONECTADA_ESTADO) => ProbeOutcome::Down {
            fault: ChannelFault::InstanceDisconnected,
            detail: "the engine reports the instance disconnected (no phone linked)".into(),
        },
        _ => ProbeOutcome::Ok,
    }
}

/// `estado` of an instance with no phone linked, in the probe's answer.
pub const INSTANCIA_DESCONECTADA_ESTADO: &str = "desconectada";

/// Classifies a transport error: only a failure to connect proves the
/// request never left; anything later (timeout, reset, truncated body)
/// may have been processed.
pub fn classify_transport(e: &reqwest::Error) -> SendOutcome {
    if let Some(unsent) = transport_before_sending(e, "engine") {
        unsent
    } else if e.is_timeout() {
        SendOutcome::Uncertain {
            detail: format!("no answer in time after sending: {e}"),
        }
    } else {
        SendOutcome::Uncertain {
            detail: format!("connection lost after sending: {}", error_chain(e)),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The engine message body for an intention. Built only from fields fixed
/// when the intention was reserved, so every attempt has the same
/// fingerprint.
pub fn request_body(req: &SendRequest, expected_generation: Option<i64>) -> Value {
    let mut b = json!({
        "destino": {"telefono": req.recipient},
        "texto": req.body,
        "correlation_id": req.correlation_id,
    });
    if !req.template.is_empty() {
        b["plantilla"] = json!({"nombre": req.template, "idioma": req.language, "parametros": req.parameters});
    }
    if let Some(t) = req.expires_at {
        b["expires_at"] = json!(t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true));
    }
    if let Some(g) = expected_generation {
        b["generacion_esperada"] = json!(g);
    }
    b
}

impl MotorChannel {
    /// The client for `cfg`, with the bearer key given directly (tests,
    /// embedding; [`super::from_config`] reads it from `cfg.api_key_env`).
    pub fn with_api_key(cfg: &MotorConfig, api_key: impl Into<String>) -> Result<MotorChannel, ChannelError> {
        let http = Http::new(
            KIND,
            &cfg.base_url,
            (cfg.timeout_ms, cfg.connect_timeout_ms),
            api_key.into(),
            (&cfg.api_key_env, API_KEY),
        )?;
        let instance_id = path_segment(KIND, "instance_id", &cfg.instance_id, "")?;
        Ok(MotorChannel {
            http,
            instance_id,
            expected_generation: cfg.expected_generation,
        })
    }

    /// The JSON body for a request (see [`request_body`]).
    pub fn body(&self, req: &SendRequest) -> Value {
        request_body(req, self.expected_generation)
    }

    fn messages_url(&self) -> String {
        format!("{}/v1/instances/{}/messages", self.http.base_url, self.instance_id)
    }

    /// One POST with the intention's key; the raw answer or transport error.
    async fn post(
        &self,
        req: &SendRequest,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, Vec<u8>), reqwest::Error> {
        let resp = self
            .http
            .post(&self.messages_url())
            .header("Idempotency-Key", &req.key)
            .json(&self.body(req))
            .send()
            .await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        // A body cut off midway is a lost answer, not a refusal.
        let body = resp.bytes().await?.to_vec();
        Ok((status, headers, body))
    }

    /// One call about a command (lookup, cancel): its status and body, or
    /// why the engine could not be asked.
    async fn ask(request: reqwest::RequestBuilder) -> Result<(StatusCode, Vec<u8>), String> {
        let resp = request.send().await.map_err(|e| error_chain(&e))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| error_chain(&e))?;
        Ok((status, body.to_vec()))
    }
}

fn found(c: CommandView) -> LookupOutcome {
    LookupOutcome::Found {
        command_id: Some(c.command_id),
        message_id: c.message_id,
        state: c.state,
        detail: c.detail,
    }
}

impl AsyncChannel for MotorChannel {
    const KIND: &'static str = KIND;
    const CAPABILITIES: Capabilities = Capabilities::ENGINE;

    async fn send(&self, req: &SendRequest) -> SendOutcome {
        match self.post(req).await {
            Ok((status, headers, body)) => classify_send(status, &headers, &body),
            Err(e) => classify_transport(&e),
        }
    }

    async fn lookup(&self, req: &SendRequest, command_id: Option<&str>) -> LookupOutcome {
        if let Some(id) = command_id {
            let url = format!("{}/v1/commands/{}", self.http.base_url, id);
            let (status, body) = match Self::ask(self.http.get(url)).await {
                Ok(answer) => answer,
                Err(detail) => return LookupOutcome::Unavailable { detail },
            };
            if status == StatusCode::NOT_FOUND {
                return LookupOutcome::NotFound;
            }
            return match serde_json::from_slice::<Value>(&body)
                .ok()
                .as_ref()
                .and_then(command_view)
            {
                Some(c) if status.is_success() => found(c),
                _ => LookupOutcome::Unavailable {
                    detail: error_detail(status, &body),
                },
            };
        }
        // No command id: repeat the request with the same key and content.
        // The engine returns the original command with its current state (or
        // takes it now if it never arrived, which is the send we wanted).
        match self.post(req).await {
            Ok((status, _, body)) => {
                let view = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .as_ref()
                    .and_then(command_view);
                match view {
                    Some(c) if status.is_success() || status == StatusCode::TOO_MANY_REQUESTS => found(c),
                    _ => LookupOutcome::Unavailable {
                        detail: error_detail(status, &body),
                    },
                }
            }
            Err(e) => LookupOutcome::Unavailable {
                detail: error_chain(&e),
            },
        }
    }

    /// `GET /v1/instances/{instance_id}`: it proves the key (401/403), that
    /// the instance exists (404 `instancia_desconocida`) and whether a
    /// phone is linked (`estado`), and sends nothing.
    async fn probe(&self) -> ProbeOutcome {
        let url = format!("{}/v1/instances/{}", self.http.base_url, self.instance_id);
        let resp = match self.http.get(url).send().await {
            Ok(r) => r,
            Err(e) => return probe_transport(&e),
        };
        let status = resp.status();
        let body = match resp.bytes().await {
            Ok(b) => b.to_vec(),
            Err(e) => {
                return ProbeOutcome::Unavailable {
                    detail: error_chain(&e),
                };
            }
        };
        classify_probe(status, &body)
    }

    async fn cancel(&self, command_id: &str) -> CancelOutcome {
        let url = format!("{}/v1/commands/{}/cancel", self.http.base_url, command_id);
        let (status, body) = match Self::ask(self.http.post(&url)).await {
            Ok(answer) => answer,
            Err(detail) => return CancelOutcome::Unavailable { detail },
        };
        match serde_json::from_slice::<Value>(&body)
            .ok()
            .as_ref()
            .and_then(command_view)
        {
            Some(c) if status.is_success() && c.state == ChannelState::Cancelled => CancelOutcome::Cancelled,
            Some(c) if status.is_success() => CancelOutcome::TooLate { state: c.state },
            _ => CancelOutcome::Unavailable {
                detail: error_detail(status, &body),
            },
        }
    }
}

#[cfg(test)]
#[path = "motor_tests.rs"]
mod tests;
