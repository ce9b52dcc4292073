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
//! | `GET /healthz` | none | whether the ledger can be written ([`health`]) |
//!
//! Connections are bounded in number and time ([`conn`]); bodies in size,
//! time and total bytes in flight ([`limits`]). Signatures are checked on
//! the raw bytes before anything is parsed; a request that fails them
//! stores nothing, and its rejection is counted in memory and flushed in
//! batches, so refusing never waits for the write lock. SQLite is
//! blocking, so store work runs on `spawn_blocking` with connections from
//! the process's shared ledger handle ([`crate::ledger::Ledger`]); each request is one `BEGIN IMMEDIATE` transaction and each
//! event inside it a savepoint (applied whole or not at all).

pub mod auth;
pub mod bookings;
pub mod cloud;
pub mod conn;
pub mod health;
pub mod inbound;
pub mod limits;
pub mod metrics;
pub mod motor;
pub mod notices;

use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, ServerConfig};
use crate::domain::counter::{Rejection, Source};
use crate::domain::inbound::Classifier;
use crate::ledger::Ledger;
use crate::planner::Planner;
use crate::store::{Store, StoreError};
use crate::templates::Templates;

/// How often `serve` retries correlating pending status events.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);

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

struct Inner {
    config: Config,
    templates: Templates,
    classifier: Classifier,
    secrets: Secrets,
    ledger: Ledger,
    bodies: limits::BodyLimits,
    rejections: limits::Rejections,
    health: health::Health,
    /// The periodic backups `serve` runs (`[backup]`), for `/metrics`.
    backups: Option<unavez_app::backup::Monitor>,
    /// Sources whose "not configured" refusal was logged already.
    warned: Mutex<HashSet<&'static str>>,
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
        Ok(AppState::on_ledger(config, templates, Ledger::open(&db)?, secrets))
    }

    /// The server's state on the process's shared ledger handle.
    pub fn on_ledger(config: Config, templates: Templates, ledger: Ledger, secrets: Secrets) -> AppState {
        let classifier = Classifier::new(&config.inbound);
        let bodies = limits::BodyLimits::from_config(&config.server);
        let health = health::Health::new(Duration::from_secs(config.policy.lease_seconds));
        AppState {
            inner: Arc::new(Inner {
                config,
                templates,
                classifier,
                secrets,
                ledger,
                bodies,
                rejections: limits::Rejections::default(),
                health,
                backups: None,
                warned: Mutex::new(HashSet::new()),
            }),
        }
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

    /// The ledger file.
    pub fn db(&self) -> &Path {
        self.inner.ledger.path()
    }

    /// Where the ledger is, with everything needed to connect (the
    /// shown [`AppState::db`] leaves a URL's options and password out).
    pub fn location(&self) -> &unavez_app::location::Location {
        self.inner.ledger.location()
    }

    pub fn body_limits(&self) -> &limits::BodyLimits {
        &self.inner.bodies
    }

    pub fn rejections(&self) -> &limits::Rejections {
        &self.inner.rejections
    }

    /// The same state with the periodic backups' monitor (before serving).
    pub fn with_backups(self, backups: Option<unavez_app::backup::Monitor>) -> AppState {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => {
                inner.backups = backups;
                AppState { inner: Arc::new(inner) }
            }
            // Already shared: handlers hold it, so it stays as it was.
            Err(inner) => AppState { inner },
        }
    }

    /// How the periodic backups went, when this process runs them.
    pub fn backups(&self) -> Option<&unavez_app::backup::Monitor> {
        self.inner.backups.as_ref()
    }

    pub fn health(&self) -> &health::Health {
        &self.inner.health
    }

    /// The message templates this clinic sends.
    pub fn templates(&self) -> &Templates {
        &self.inner.templates
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
            state.inner.ledger.with(|store| f(&s2, store))
        })
        .await
        .map_err(|e| ApiError::internal(format!("store task failed: {e}")))?
        .map_err(ApiError::store)
    }

    /// Counts a rejected request (`webhook_rejected:<source>:<reason>`) in
    /// memory; [`AppState::flush_rejections`] stores the counts in batches.
    pub async fn count_rejection(&self, source: Source, reason: Rejection) {
        self.inner.rejections.add(source, reason);
    }

    /// Writes the pending rejection counts in one transaction. On failure
    /// they stay pending for the next flush.
    pub async fn flush_rejections(&self) -> Result<(), ApiError> {
        if self.inner.rejections.pending().is_empty() {
            return Ok(());
        }
        self.blocking(|state, store| state.store_rejections(store))
            .await?
            .map_err(ApiError::store)
    }

    /// [`AppState::flush_rejections`] on a given connection (blocking).
    pub fn store_rejections(&self, store: &mut Store) -> Result<(), StoreError> {
        let pending = self.inner.rejections.pending();
        if pending.is_empty() {
            return Ok(());
        }
        let r = store.write(|tx| pending.iter().try_for_each(|(n, v)| tx.bump_counter(*n, *v)));
        match &r {
            Ok(()) => {
                self.inner.rejections.settle(&pending);
                self.inner.health.write_ok();
            }
            Err(e) => self.inner.health.write_failed(e),
        }
        r
    }

    /// The 503 of an endpoint whose secret is not set: expected on a site
    /// that does not use that provider, so it is logged once per endpoint
    /// (WARN), not as an error per request.
    pub fn not_configured(&self, source: &'static str, message: String) -> ApiError {
        let first = self.inner.warned.lock().map(|mut w| w.insert(source)).unwrap_or(false);
        if first {
            tracing::warn!(source, "{message}; requests to it answer 503 (logged once)");
        }
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).quiet()
    }
}

/// An error answer: HTTP status and a JSON `{"error": ...}` body.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// Already logged (or expected): not logged again as a failed request.
    quiet: bool,
    /// A ledger write failed (not a busy wait): `/healthz` reports it.
    ledger_failure: bool,
}

/// Marks a response whose request failed to write the ledger (read by the
/// body layer, which tells [`health::Health`]).
#[derive(Debug, Clone)]
pub struct LedgerWriteFailed(pub String);

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            quiet: false,
            ledger_failure: false,
        }
    }
    /// Not logged when answered (see [`AppState::not_configured`]).
    pub fn quiet(mut self) -> ApiError {
        self.quiet = true;
        self
    }
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
    /// Database trouble is a 5xx so providers retry the delivery later.
    pub fn store(e: StoreError) -> ApiError {
        if e.is_busy() {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("ledger busy, retry: {e}"))
        } else {
            let mut err = ApiError::internal(format!("ledger error: {e}"));
            err.ledger_failure = true;
            err
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
        if self.status.is_server_error() && !self.quiet {
            // Debug-quoted: a message may quote what the request sent.
            tracing::error!(status = %self.status, error = ?self.message, "request failed");
        }
        let failure = self.ledger_failure.then(|| LedgerWriteFailed(self.message.clone()));
        let mut res = (self.status, Json(json!({ "error": self.message }))).into_response();
        if let Some(f) = failure {
            res.extensions_mut().insert(f);
        }
        res
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
        .route("/healthz", get(health::healthz))
        .layer(axum::middleware::from_fn_with_state(state.clone(), limits::read_bodies))
        .with_state(state)
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
    // One token stops every task of the server; one tracker owns them, and
    // the handle resolves only once all have ended.
    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    {
        let stop = stop.clone();
        tracker.spawn(async move {
            tokio::select! {
                _ = shutdown => stop.cancel(),
                _ = stop.cancelled() => {}
            }
        });
    }
    tracker.spawn(sweep_loop(state.clone(), stop.clone()));
    tracker.spawn(flush_loop(state.clone(), stop.clone()));
    let limits = conn::ConnLimits::from_config(&state.config().server);
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
    let join = tokio::spawn(async move {
        let served = conn::serve(listener, app, limits, stop.clone()).await;
        // Ended on its own (an error) or told to: either way the others
        // stop, and the last rejections counted are stored before the
        // handle resolves.
        stop.cancel();
        tracker.close();
        tracker.wait().await;
        served
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
    start_on(config, templates, Ledger::open(&db)?, shutdown).await
}

/// [`start`] on the process's shared ledger handle (`unavez serve` gives
/// the same one to its dispatcher).
pub async fn start_on(
    config: Config,
    templates: Templates,
    ledger: Ledger,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServerHandle, ServerError> {
    start_with_backups(config, templates, ledger, None, shutdown).await
}

/// [`start_on`], reporting on `/metrics` the periodic backups `backups`
/// watches (`[backup]`, run by `serve` beside the server).
pub async fn start_with_backups(
    config: Config,
    templates: Templates,
    ledger: Ledger,
    backups: Option<unavez_app::backup::Monitor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ServerHandle, ServerError> {
    let listener = bind(&config.server.listen).await?;
    let secrets = Secrets::from_env(&config.server);
    spawn(
        AppState::on_ledger(config, templates, ledger, secrets).with_backups(backups),
        listener,
        shutdown,
    )
}

/// Status events that arrived before their message id was known are
/// retried here, so none waits for a dispatcher that forgot to call
/// [`unavez_app::status::apply_pending`].
async fn sweep_loop(state: AppState, stop: CancellationToken) {
    // A ledger that is down fails every sweep: one line a minute.
    let mut limit = unavez_app::dispatch::log_limit::LogLimit::default();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(SWEEP_INTERVAL) => {}
        }
        let r = state
            .blocking(|state, store| {
                let r = store.write(|tx| unavez_app::status::sweep_pending(tx, 1_000, Utc::now()));
                match &r {
                    // An empty sweep commits nothing: no evidence either way.
                    Ok(0) => {}
                    Ok(_) => state.health().write_ok(),
                    Err(e) => state.health().write_failed(e),
                }
                r
            })
            .await;
        match r {
            Ok(Ok(n)) => {
                limit.clear();
                if n > 0 {
                    tracing::info!(applied = n, "pending status events correlated");
                }
            }
            Ok(Err(e)) => unavez_app::warn_limited!(limit, "pending status sweep failed: {e}"),
            Err(e) => unavez_app::warn_limited!(limit, "pending status sweep failed: {}", e.message),
        }
    }
}

/// Stores pending rejection counts every [`limits::FLUSH_INTERVAL`], and
/// once more on shutdown.
async fn flush_loop(state: AppState, stop: CancellationToken) {
    // A ledger that is down fails every flush while requests are refused.
    let mut limit = unavez_app::dispatch::log_limit::LogLimit::default();
    loop {
        let stopping = tokio::select! {
            _ = stop.cancelled() => true,
            _ = tokio::time::sleep(limits::FLUSH_INTERVAL) => false,
        };
        // (An empty flush touches no ledger, so it proves nothing: the
        // limiter is left to its minute.)
        if let Err(e) = state.flush_rejections().await {
            unavez_app::warn_limited!(
                limit,
                "could not store rejection counts; kept for the next flush: {}",
                e.message
            );
        }
        if stopping {
            return;
        }
    }
}
