//! A local fake of the WhatsApp Cloud API `POST /{version}/{phone}/messages`
//! for tests: it records what it "sent" (same [`SentLine`] log format as
//! the engine simulator), and can be told to time out after recording or
//! to answer with a given Graph error code. It also answers the Graph
//! reads `unavez doctor` and `unavez templates` make (the phone number's
//! profile, the account's templates): see [`super::cloud_graph`]. It runs
//! in-process or as `unavez sim --cloud`.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::cloud_graph::{self, PhoneProfile};
use super::core::{SentLine, lock};
use super::http::ConnKill;
use super::{PauseMode, SimError};

/// What the fake does with the next request.
#[derive(Debug, Clone, PartialEq)]
pub enum CloudBehavior {
    /// Sends it: records, logs, answers with a wamid.
    Ok,
    /// Sends it (records and logs), then never answers: the connection is
    /// held for `hold_ms` and dropped.
    TimeoutAfterRecord,
    /// Answers with a Graph API error; nothing is sent.
    Error { http_status: u16, code: i64, title: String },
}

impl CloudBehavior {
    pub fn error(http_status: u16, code: i64, title: &str) -> CloudBehavior {
        CloudBehavior::Error {
            http_status,
            code,
            title: title.to_string(),
        }
    }
}

/// Options for [`CloudFake::spawn`]. `Default`: loopback, free port, any
/// bearer token, no log file, timeouts held for 30 s.
#[derive(Debug, Clone)]
pub struct CloudFakeOptions {
    pub listen: SocketAddr,
    /// Ground-truth log, one [`SentLine`] per message sent.
    pub log: Option<PathBuf>,
    /// The only accepted bearer token; `None` accepts any.
    pub token: Option<String>,
    pub hold_ms: u64,
    /// The account's templates, as Meta's JSON objects
    /// ([`cloud_graph::default_templates`] by default).
    pub templates: Vec<Value>,
    /// Templates per page when the request gives no `limit`.
    pub page_size: usize,
    pub profile: PhoneProfile,
}

impl Default for CloudFakeOptions {
    fn default() -> Self {
        CloudFakeOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            log: None,
            token: None,
            hold_ms: 30_000,
            templates: cloud_graph::default_templates(),
            page_size: cloud_graph::DEFAULT_PAGE,
            profile: PhoneProfile::default(),
        }
    }
}

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudReceived {
    pub phone_number_id: String,
    pub body: Value,
    /// The wamid when it was sent (also for a timed-out one).
    pub wamid: Option<String>,
}

pub(super) struct FakeState {
    /// Rotated by [`CloudFake::set_token`], as Meta does when a token
    /// expires or is revoked.
    token: Mutex<Option<String>>,
    pub(super) templates: Mutex<Vec<Value>>,
    pub(super) page_size: usize,
    pub(super) profile: Mutex<PhoneProfile>,
    hold_ms: u64,
    default: Mutex<CloudBehavior>,
    queue: Mutex<VecDeque<CloudBehavior>>,
    received: Mutex<Vec<CloudReceived>>,
    sent: Mutex<Vec<SentLine>>,
    log: Mutex<Option<File>>,
}

/// A running fake Cloud API.
pub struct CloudFake {
    addr: SocketAddr,
    state: Arc<FakeState>,
    shutdown: watch::Sender<bool>,
    _mode: watch::Sender<PauseMode>,
    task: tokio::task::JoinHandle<()>,
}

impl CloudFake {
    pub async fn spawn(opts: CloudFakeOptions) -> Result<CloudFake, SimError> {
        let (listener, addr) = super::bind(opts.listen).await?;
        let log = match &opts.log {
            Some(p) => Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|source| SimError::Log {
                        path: p.clone(),
                        source,
                    })?,
            ),
            None => None,
        };
        let state = Arc::new(FakeState {
            token: Mutex::new(opts.token),
            templates: Mutex::new(opts.templates),
            page_size: opts.page_size.max(1),
            profile: Mutex::new(opts.profile),
            hold_ms: opts.hold_ms,
            default: Mutex::new(CloudBehavior::Ok),
            queue: Mutex::new(VecDeque::new()),
            received: Mutex::new(Vec::new()),
            sent: Mutex::new(Vec::new()),
            log: Mutex::new(log),
        });
        let router = Router::new()
            .route("/{version}/{phone}", axum::routing::get(cloud_graph::phone_number))
            .route(
                "/{version}/{waba}/message_templates",
                axum::routing::get(cloud_graph::message_templates),
            )
            .route("/{version}/{phone}/messages", post(messages))
            .with_state(state.clone());
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (mode, mode_rx) = watch::channel(PauseMode::Up);
        let task = tokio::spawn(super::serve(listener, addr, router, mode_rx, shutdown_rx));
        Ok(CloudFake {
            addr,
            state,
            shutdown,
            _mode: mode,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// For `CloudConfig::base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What every request gets when nothing is queued.
    pub fn set_default(&self, b: CloudBehavior) {
        *lock(&self.state.default) = b;
    }

    /// The only token accepted from now on (`None`: any non-empty one).
    pub fn set_token(&self, token: Option<&str>) {
        *lock(&self.state.token) = token.map(str::to_string);
    }

    /// A one-shot behavior for the next request (FIFO).
    pub fn push(&self, b: CloudBehavior) {
        lock(&self.state.queue).push_back(b);
    }

    /// Replaces the account's templates (Meta's JSON objects).
    pub fn set_templates(&self, templates: Vec<Value>) {
        *lock(&self.state.templates) = templates;
    }

    pub fn set_profile(&self, profile: PhoneProfile) {
        *lock(&self.state.profile) = profile;
    }

    pub fn received(&self) -> Vec<CloudReceived> {
        lock(&self.state.received).clone()
    }

    /// Messages that actually went out, in order.
    pub fn sent(&self) -> Vec<SentLine> {
        lock(&self.state.sent).clone()
    }

    pub async fn shutdown(self) {
        self.shutdown.send_replace(true);
        let _ = self.task.await;
    }
}

/// The body of a Cloud API status webhook for one message, as Meta sends
/// it (`entry[].changes[].value.statuses[]`), for tests of the receiver.
/// A `failed` status carries `errors[]` (131026). Sign it for
/// `X-Hub-Signature-256` with [`crate::channel::motor_event::sign`] (same
/// `sha256=<hex HMAC-SHA256>` format) and the app secret.
pub fn status_webhook(
    phone_number_id: &str,
    wamid: &str,
    status: &str,
    recipient: &str,
    biz_opaque_callback_data: Option<&str>,
) -> Value {
    let mut st = json!({
        "id": wamid,
        "status": status,
        "timestamp": Utc::now().timestamp().to_string(),
        "recipient_id": recipient.trim_start_matches('+'),
    });
    if let Some(b) = biz_opaque_callback_data {
        st["biz_opaque_callback_data"] = json!(b);
    }
    if status == "failed" {
        st["errors"] = json!([{"code": 131026, "title": "Message undeliverable"}]);
    }
    json!({
        "object": "whatsapp_business_account",
        "entry": [{
            "id": "0",
            "changes": [{
                "field": "messages",
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "0", "phone_number_id": phone_number_id},
                    "statuses": [st],
                },
            }],
        }],
    })
}

/// A Graph error in Meta's shape; a rejected token (190) carries Meta's
/// subcode for an invalidated session (463: expired) and no `error_data`.
pub(super) fn graph_error(status: StatusCode, code: i64, title: &str) -> Response {
    let body = if code == 190 {
        json!({"error": {"message": format!("Error validating access token: {title}"), "type": "OAuthException", "code": code, "error_subcode": 463, "fbtrace_id": "fake"}})
    } else {
        json!({"error": {"message": title, "type": "OAuthException", "code": code, "error_data": {"details": title}, "fbtrace_id": "fake"}})
    };
    (status, Json(body)).into_response()
}

/// The customer-visible text of a Cloud API message body.
fn visible_text(body: &Value) -> Option<String> {
    match body.get("type").and_then(Value::as_str)? {
        "text" => body.pointer("/text/body").and_then(Value::as_str).map(str::to_string),
        "template" => {
            let name = body.pointer("/template/name").and_then(Value::as_str)?;
            let params: Vec<&str> = body
                .pointer("/template/components/0/parameters")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect())
                .unwrap_or_default();
            Some(format!("[{name}] {}", params.join(" | ")))
        }
        _ => None,
    }
}

/// Whether the bearer token is the accepted one.
pub(super) fn authorized(st: &FakeState, headers: &HeaderMap) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match (lock(&st.token).as_deref(), bearer) {
        (_, None) => false,
        (Some(t), Some(b)) => t == b,
        (None, Some(b)) => !b.trim().is_empty(),
    }
}

async fn messages(
    State(st): State<Arc<FakeState>>,
    Path((_version, phone)): Path<(String, String)>,
    headers: HeaderMap,
    kill: Option<Extension<ConnKill>>,
    body: axum::body::Bytes,
) -> Response {
    if !authorized(&st, &headers) {
        return graph_error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token");
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return graph_error(StatusCode::BAD_REQUEST, 100, "Invalid parameter: body is not JSON");
    };
    let to = v.get("to").and_then(Value::as_str).unwrap_or("").to_string();
    let text = visible_text(&v);
    if v.get("messaging_product").and_then(Value::as_str) != Some("whatsapp") || to.is_empty() || text.is_none() {
        lock(&st.received).push(CloudReceived {
            phone_number_id: phone,
            body: v,
            wamid: None,
        });
        return graph_error(StatusCode::BAD_REQUEST, 100, "Invalid parameter");
    }
    let behavior = lock(&st.queue).pop_front().unwrap_or_else(|| lock(&st.default).clone());
    if let CloudBehavior::Error {
        http_status,
        code,
        title,
    } = &behavior
    {
        lock(&st.received).push(CloudReceived {
            phone_number_id: phone,
            body: v,
            wamid: None,
        });
        let status = StatusCode::from_u16(*http_status).unwrap_or(StatusCode::BAD_REQUEST);
        return graph_error(status, *code, title);
    }
    let wamid = {
        let mut rec = lock(&st.received);
        let wamid = format!("wamid.FAKE{:08X}", rec.len() + 1);
        let line = SentLine {
            key: v
                .get("biz_opaque_callback_data")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            instance_id: phone.clone(),
            command_id: String::new(),
            provider_message_id: wamid.clone(),
            recipient: to.clone(),
            text: text.unwrap_or_default(),
            time: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
        };
        if let Some(f) = lock(&st.log).as_mut()
            && let Ok(mut bytes) = serde_json::to_vec(&line)
        {
            bytes.push(b'\n');
            let _ = f.write_all(&bytes);
        }
        lock(&st.sent).push(line);
        rec.push(CloudReceived {
            phone_number_id: phone,
            body: v,
            wamid: Some(wamid.clone()),
        });
        wamid
    };
    if behavior == CloudBehavior::TimeoutAfterRecord {
        tokio::time::sleep(Duration::from_millis(st.hold_ms)).await;
        if let Some(Extension(k)) = kill {
            k.0.notify_one();
            return std::future::pending::<Response>().await;
        }
    }
    Json(json!({
        "messaging_product": "whatsapp",
        "contacts": [{"input": to, "wa_id": to.trim_start_matches('+')}],
        "messages": [{"id": wamid, "message_status": "accepted"}],
    }))
    .into_response()
}
