//! The HTTP server of `unavez serve` (axum): provider webhooks, inbound
//! messages, booking ingest, metrics and health.
//!
//! | route | auth | job |
//! |---|---|---|
//! | `GET /webhooks/whatsapp` | verify token | Cloud API subscription challenge |
//! | `POST /webhooks/whatsapp` | `X-Hub-Signature-256` | statuses and inbound messages ([`cloud`]) |
//! | `POST /webhooks/motor` | `X-Unavez-Signature` | engine command events ([`motor`]) |
//! | `POST /v1/bookings/events` | bearer token | booking events, like `unavez import` ([`bookings`]) |
//! | `GET /metrics` | none | Prometheus text ([`metrics`]) |
//! | `GET /healthz` | none | liveness + database reachable |
//!
//! Signatures are checked on the raw bytes before anything is parsed; a
//! request that fails them stores nothing but a counted rejection. SQLite
//! is blocking, so store work runs on `spawn_blocking` with connections
//! from a small pool; each request is one `BEGIN IMMEDIATE` transaction and
//! each event inside it a savepoint (applied whole or not at all).

pub mod auth;
pub mod bookings;
pub mod cloud;
pub mod inbound;
pub mod metrics;
pub mod motor;
pub mod notices;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use serde_json::json;
use tokio::net::TcpListener;

use crate::config::{Config, ServerConfig};
use crate::domain::inbound::Classifier;
use crate::planner::Planner;
use crate::store::{Store, StoreError};
use crate::templates::Templates;

/// How often `serve` retries correlating pending status events.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);
/// Connections kept open between requests.
const POOL_IDLE: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error("HTTP server task ended abnormally: {0}")]
    Join(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Secrets read from the environment variables the `[server]` config
/// names. `None` disables the endpoint that needs it (503), it never opens it.
#[derive(Clone, Default)]
pub struct Secrets {
    pub cloud_app_secret: Option<String>,
    pub cloud_verify_token: Option<String>,
    pub motor_webhook_secret: Option<String>,
    pub ingest_token: Option<String>,
}

impl Secrets {
    pub fn from_env(cfg: &ServerConfig) -> Secrets {
        let read = |var: &str| std::env::var(var).ok().filter(|v| !v.is_empty());
        Secrets {
            cloud_app_secret: read(&cfg.cloud_app_secret_env),
            cloud_verify_token: read(&cfg.cloud_verify_token_env),
            motor_webhook_secret: read(&cfg.motor_webhook_secret_env),
            ingest_token: read(&cfg.ingest_token_env),
        }
    }
}

impl Secrets {
    /// Whether any endpoint can authenticate anything (with none set, every
    /// POST answers 503): for start-up diagnostics.
    pub fn any(&self) -> bool {
        self.cloud_app_secret.is_some()
            || self.cloud_verify_token.is_some()
            || self.motor_webhook_secret.is_some()
            || self.ingest_token.is_some()
    }
}

// Never print a secret, only whether it is set.
impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |o: &Option<String>| if o.is_some() { "set" } else { "unset" };
        f.debug_struct("Secrets")
            .field("cloud_app_secret", &s(&self.cloud_app_secret))
            .field("cloud_verify_token", &s(&self.cloud_verify_token))
            .field("motor_webhook_secret", &s(&self.motor_webhook_secret))
            .field("ingest_token", &s(&self.ingest_token))
            .finish()
    }
}

/// A few `Store`s reused across blocking tasks (opening one runs the
/// migration check, which takes the write lock).
struct Pool {
    db: PathBuf,
    idle: Mutex<Vec<Store>>,
}

impl Pool {
    fn with<T>(&self, f: impl FnOnce(&mut Store) -> T) -> Result<T, StoreError> {
        let taken = self.idle.lock().map(|mut v| v.pop()).unwrap_or(None);
        let mut store = match taken {
            Some(s) => s,
            None => Store::open(&self.db)?,
        };
        let out = f(&mut store);
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < POOL_IDLE
        {
            idle.push(store);
        }
        Ok(out)
    }
}

struct Inner {
    config: Config,
    templates: Templates,
    classifier: Classifier,
    secrets: Secrets,
    pool: Pool,
}

/// Everything a handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

impl AppState {
    /// Opens (and migrates) the ledger once so that a bad path fails at
    /// start, not on the first webhook.
    pub fn new(config: Config, templates: Templates, db: PathBuf, secrets: Secrets) -> Result<AppState, StoreError> {
        let first = Store::open(&db)?;
        let classifier = Classifier::new(&config.inbound);
        Ok(AppState {
            inner: Arc::new(Inner {
                config,
                templates,
                classifier,
                secrets,
                pool: Pool {
                    db,
                    idle: Mutex::new(vec![first]),
                },
            }),
        })
    }

    /// [`AppState::new`] with secrets from the env vars the config names.
    pub fn from_env(config: Config, templates: Templates, db: PathBuf) -> Result<AppState, StoreError> {
        let secrets = Secrets::from_env(&config.server);
        AppState::new(config, templates, db, secrets)
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn secrets(&self) -> &Secrets {
        &self.inner.secrets
    }

    pub fn classifier(&self) -> &Classifier {
        &self.inner.classifier
    }

    pub fn planner(&self) -> Planner<'_> {
        Planner::new(&self.inner.config.policy, &self.inner.templates, self.inner.config.tz())
    }

    /// Runs blocking store work off the async runtime.
    pub async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&AppState, &mut Store) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let state = self.clone();
        tokio::task::spawn_blocking(move || {
            let s2 = state.clone();
            state.inner.pool.with(|store| f(&s2, store))
        })
        .await
        .map_err(|e| ApiError::internal(format!("store task failed: {e}")))?
        .map_err(ApiError::store)
    }

    /// Counts a rejected request (`webhook_rejected:<source>:<reason>`).
    /// Best effort: a rejection must not turn into a 500.
    pub async fn count_rejection(&self, source: &'static str, reason: &'static str) {
        let name = format!("webhook_rejected:{source}:{reason}");
        match self
            .blocking(move |_, store| store.write(|tx| tx.bump_counter(&name, 1)))
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(source, reason, error = %e, "could not count a rejected request"),
            Err(e) => tracing::warn!(source, reason, error = %e.message, "could not count a rejected request"),
        }
    }
}

/// An error answer: HTTP status and a JSON `{"error": ...}` body.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
    /// Database trouble is a 5xx so providers retry the delivery later.
    pub fn store(e: StoreError) -> ApiError {
        if e.is_busy() {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("ledger busy, retry: {e}"))
        } else {
            ApiError::internal(format!("ledger error: {e}"))
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        ApiError::store(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = %self.status, error = %self.message, "request failed");
        }
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

/// The routes, for `serve` and for tests.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/webhooks/whatsapp",
            get(cloud::verify_subscription).post(cloud::receive),
        )
        .route("/webhooks/motor", post(motor::receive))
        .route("/v1/bookings/events", post(bookings::receive))
        .route("/metrics", get(metrics::render))
        .route("/healthz", get(healthz))
        .with_state(state)
}

async fn healthz(axum::extract::State(state): axum::extract::State<AppState>) -> Result<Response, ApiError> {
    // A cheap indexed read: proves the file opens and answers, without the
    // full scan of an integrity check.
    let check = state
        .blocking(|_, store| store.read(|tx| tx.pending_status_count()).map(|_| ()))
        .await?;
    check?;
    Ok((StatusCode::OK, "ok\n").into_response())
}

/// A running server.
pub struct ServerHandle {
    /// The bound address (useful with port 0).
    pub addr: SocketAddr,
    join: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl ServerHandle {
    /// Waits until the server has shut down (after the shutdown future
    /// completes and in-flight requests finish).
    pub async fn wait(self) -> Result<(), ServerError> {
        match self.join.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServerError::Serve(e)),
            Err(e) => Err(ServerError::Join(e.to_string())),
        }
    }
}

/// Binds the `[server] listen` address (or any other).
pub async fn bind(addr: &str) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr).await.map_err(|source| ServerError::Bind {
        addr: addr.to_string(),
        source,
    })
}

/// Serves [`router`] on `listener` until `shutdown` completes, and sweeps
/// pending status events every [`SWEEP_INTERVAL`]. Must be called inside a
/// tokio runtime.
pub fn spawn(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServerHandle, ServerError> {
    spawn_notifying(state, listener, shutdown, None)
}

/// [`spawn`], bumping `activity` after every accepted POST (an embedding
/// console refreshes on it instead of waiting for its tick).
pub fn spawn_notifying(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    activity: Option<crate::dispatch::Activity>,
) -> Result<ServerHandle, ServerError> {
    let addr = listener.local_addr().map_err(ServerError::Serve)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    tokio::spawn(sweep_loop(state.clone(), stop_rx.clone()));
    let mut app = router(state);
    if let Some(activity) = activity {
        // Only accepted POSTs write to the ledger; scrapes and health
        // checks must not wake the console.
        app = app.layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let activity = activity.clone();
                async move {
                    let post = req.method() == axum::http::Method::POST;
                    let res = next.run(req).await;
                    if post && res.status().is_success() {
                        activity.bump();
                    }
                    res
                }
            },
        ));
    }
    let mut rx = stop_rx;
    let join = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = rx.wait_for(|stop| *stop).await;
            })
            .await
    });
    Ok(ServerHandle { addr, join })
}

/// The one-call form for `unavez serve`: secrets from the environment,
/// bind `[server] listen`, serve until `shutdown`.
pub async fn start(
    config: Config,
    templates: Templates,
    db: PathBuf,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServerHandle, ServerError> {
    let listener = bind(&config.server.listen).await?;
    let state = AppState::from_env(config, templates, db)?;
    spawn(state, listener, shutdown)
}

/// Status events that arrived before their message id was known are
/// retried here, so none waits for a dispatcher that forgot to call
/// [`crate::store::Tx::apply_pending_statuses_for`].
async fn sweep_loop(state: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(SWEEP_INTERVAL) => {}
        }
        let r = state
            .blocking(|_, store| store.write(|tx| tx.sweep_pending_statuses(1_000, Utc::now())))
            .await;
        match r {
            Ok(Ok(n)) if n > 0 => tracing::info!(applied = n, "pending status events correlated"),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "pending status sweep failed"),
            Err(e) => tracing::warn!(error = %e.message, "pending status sweep failed"),
        }
    }
}
