//! The simulator as a [`Channel`] without sockets, for benchmarks and the
//! demo: the same engine contract rules, faults, log and webhooks as over HTTP
//! (both go through [`super::messages`]), classified by the same function
//! as [`crate::channel::motor::MotorChannel`]. Transport faults map to what
//! a client would have seen: a reset or a lost answer is `Uncertain`.

use std::sync::Arc;

use chrono::Utc;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};

use super::PauseMode;
use super::core::{Core, lock};
use super::messages::{Reply, app_id, handle_message};
use crate::channel::motor::{self, classify_send, map_estado, request_body};
use crate::channel::{
    AsyncChannel, CancelOutcome, Capabilities, ChannelState, LookupOutcome, SendOutcome, SendRequest,
};

/// An in-process engine client bound to one app (bearer key) and instance.
#[derive(Clone)]
pub struct InProcessChannel {
    pub(super) core: Arc<Core>,
    pub(super) app: String,
    pub(super) instance_id: String,
    pub(super) expected_generation: Option<i64>,
}

impl InProcessChannel {
    pub(super) fn new(core: Arc<Core>, api_key: &str, instance_id: &str, expected_generation: Option<i64>) -> Self {
        InProcessChannel {
            core,
            app: app_id(api_key),
            instance_id: instance_id.to_string(),
            expected_generation,
        }
    }

    fn down(&self) -> bool {
        *self.core.mode.borrow() != PauseMode::Up
    }

    async fn submit(&self, req: &SendRequest) -> SendOutcome {
        if self.down() {
            // Refused or 503: in both cases nothing was processed.
            return SendOutcome::Retry {
                detail: "engine paused (not sent)".into(),
                http_status: None,
                retry_after_secs: None,
            };
        }
        let body = request_body(req, self.expected_generation).to_string();
        match handle_message(&self.core, &self.app, &self.instance_id, &req.key, body.as_bytes()).await {
            Reply::Json {
                status,
                body,
                retry_after,
            } => {
                let mut headers = HeaderMap::new();
                if let Some(s) = retry_after {
                    headers.insert(RETRY_AFTER, HeaderValue::from(s));
                }
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                classify_send(status, &headers, body.to_string().as_bytes())
            }
            Reply::Reset => SendOutcome::Uncertain {
                detail: "connection lost after sending (simulated reset)".into(),
            },
            Reply::Lost { .. } => SendOutcome::Uncertain {
                detail: "no answer in time after sending (simulated)".into(),
            },
        }
    }

    fn read(&self, command_id: &str) -> LookupOutcome {
        match lock(&self.core.engine)
            .commands
            .get(command_id)
            .filter(|c| c.app == self.app)
        {
            Some(c) => LookupOutcome::Found {
                command_id: Some(c.command_id.clone()),
                message_id: c.provider_message_id.clone(),
                state: map_estado(&c.estado).unwrap_or(ChannelState::Ambiguous),
                detail: c.detail.clone(),
            },
            None => LookupOutcome::NotFound,
        }
    }

    async fn lookup_by_repeat(&self, req: &SendRequest) -> LookupOutcome {
        match self.submit(req).await {
            SendOutcome::Accepted {
                command_id: Some(id), ..
            } => self.read(&id),
            // A repeat that comes back failed still names its command.
            SendOutcome::Failed { .. } => {
                let scope = (self.app.clone(), self.instance_id.clone(), req.key.trim().to_string());
                // Bind first: the guard must be gone before `read` locks again.
                let id = lock(&self.core.engine).by_key(&scope).map(|c| c.command_id.clone());
                match id {
                    Some(id) => self.read(&id),
                    None => LookupOutcome::Unavailable {
                        detail: "the engine refused the repeat".into(),
                    },
                }
            }
            other => LookupOutcome::Unavailable {
                detail: format!("{other:?}"),
            },
        }
    }

    fn withdraw(&self, command_id: &str) -> CancelOutcome {
        if self.down() {
            return CancelOutcome::Unavailable {
                detail: "engine paused".into(),
            };
        }
        let mut engine = lock(&self.core.engine);
        match engine.cancel(&self.app, command_id, Utc::now()) {
            Some((c, changed)) => {
                if changed {
                    self.core.changed(&c, false);
                }
                match map_estado(&c.estado) {
                    Some(ChannelState::Cancelled) => CancelOutcome::Cancelled,
                    state => CancelOutcome::TooLate {
                        state: state.unwrap_or(ChannelState::Ambiguous),
                    },
                }
            }
            None => CancelOutcome::Unavailable {
                detail: format!("unknown command {command_id}"),
            },
        }
    }
}

impl AsyncChannel for InProcessChannel {
    const KIND: &'static str = motor::KIND;
    const CAPABILITIES: Capabilities = Capabilities::ENGINE;

    async fn send(&self, req: &SendRequest) -> SendOutcome {
        self.submit(req).await
    }

    async fn lookup(&self, req: &SendRequest, command_id: Option<&str>) -> LookupOutcome {
        if self.down() {
            return LookupOutcome::Unavailable {
                detail: "engine paused".into(),
            };
        }
        match command_id {
            Some(id) => self.read(id),
            None => self.lookup_by_repeat(req).await,
        }
    }

    async fn cancel(&self, command_id: &str) -> CancelOutcome {
        self.withdraw(command_id)
    }
}
