//! The WhatsApp engine simulator: the engine HTTP contract (docs/design.md) with seeded
//! faults, a ground-truth log of every message that actually went out, and
//! signed webhooks. Runs in-process ([`spawn`]) or as `unavez sim`.
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/instances/{id}/messages` | send (Bearer + `Idempotency-Key`), 202 with the command |
//! | `GET /v1/commands/{id}` | a command and its current state |
//! | `POST /v1/commands/{id}/cancel` | withdraw a queued command (or get it back unchanged) |
//! | `POST /sim/instances/{id}/relink` | re-link: generation + 1, queued commands fail `generacion_cambiada` |
//! | `GET /sim/stats`, `GET /sim/commands`, `GET /sim/sent` | counters, commands, sent messages |
//! | `POST /sim/pause`, `POST /sim/resume` | simulate the engine being down, keeping its memory |
//! | `GET`/`POST /sim/faults` | read or replace the fault spec at run time |
//!
//! Faults apply to `POST …/messages` only; see [`faults`] for the grammar.

pub mod cloud_fake;
pub mod cloud_graph;
mod core;
pub mod engine;
pub mod faults;
mod http;
pub mod inproc;
mod messages;
mod timers;
mod webhook;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinSet;
use tower_service::Service;

pub use self::core::SentLine;
use self::core::{Core, lock};
pub use self::engine::Command;
pub use self::faults::{FaultSpec, FaultSpecError};
pub use self::inproc::InProcessChannel;

/// The webhook secret used when `UNAVEZ_MOTOR_WEBHOOK_SECRET` is unset.
/// Development only; `unavez sim` says so on stderr when it falls back.
pub const DEV_WEBHOOK_SECRET: &str = "unavez-dev-webhook-secret";

/// How long commands take to move along (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimTiming {
    /// `en_cola` → `enviado` (the message goes out).
    pub send_ms: u64,
    /// `enviado` → `entregado`.
    pub deliver_ms: u64,
    /// `entregado` → `leido`.
    pub read_ms: u64,
    /// `ambiguo` → resolved (`enviado` or `fallido`).
    pub resolve_ms: u64,
}

impl Default for SimTiming {
    fn default() -> Self {
        SimTiming {
            send_ms: 20,
            deliver_ms: 30,
            read_ms: 50,
            resolve_ms: 200,
        }
    }
}

/// Everything `spawn` needs. `Default` is a quiet loopback engine on a
/// free port, no faults, no log, no webhook, any bearer key accepted.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Address to bind; port 0 picks a free one (see [`SimHandle::addr`]).
    pub listen: SocketAddr,
    pub seed: u64,
    pub faults: FaultSpec,
    /// Ground truth: one JSON line ([`SentLine`]) per message that went out.
    pub log: Option<PathBuf>,
    /// Where to POST signed [`crate::channel::motor_event::MotorEvent`]s.
    pub webhook: Option<String>,
    pub webhook_secret: Vec<u8>,
    /// The only accepted bearer key; `None` accepts any non-empty one.
    pub api_key: Option<String>,
    /// The instances the engine has; `None` (the default): any id is one.
    pub instances: Option<Vec<String>>,
    /// Append-only journal of the engine's memory: a restarted simulator
    /// with the same file still knows every key (keys never expire).
    pub state: Option<PathBuf>,
    pub timing: SimTiming,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            seed: 0,
            faults: FaultSpec::none(),
            log: None,
            webhook: None,
            webhook_secret: DEV_WEBHOOK_SECRET.as_bytes().to_vec(),
            api_key: None,
            instances: None,
            state: None,
            timing: SimTiming::default(),
        }
    }
}

/// Whether the simulated engine is reachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseMode {
    Up,
    /// Every `/v1` request gets 503 (nothing processed).
    Unavailable,
    /// The listening socket is closed: connections are refused and open
    /// ones dropped. Memory and timers keep going.
    Refuse,
}

/// How many times each fault fired.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    pub error5xx: u64,
    pub reset: u64,
    pub timeout_after: u64,
    pub rate429: u64,
    pub ambiguous: u64,
}

/// `GET /sim/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimStats {
    /// `POST …/messages` requests received.
    pub requests: u64,
    /// New commands accepted.
    pub created: u64,
    /// Repeats answered with the stored command.
    pub repeated: u64,
    /// 409s.
    pub conflicts: u64,
    /// 422s.
    pub rejected: u64,
    /// Messages that went out since this process started (lines appended
    /// to the log by this process).
    pub sent: u64,
    /// Commands known (including replayed from `--state`).
    pub commands: u64,
    pub by_estado: BTreeMap<String, u64>,
    pub faults: FaultCounts,
    pub webhooks_delivered: u64,
    pub webhooks_failed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot open message log {}: {source}", path.display())]
    Log { path: PathBuf, source: std::io::Error },
    #[error("cannot use state file {}: {source}", path.display())]
    State { path: PathBuf, source: std::io::Error },
}

/// A running simulator. Dropping it does not stop it; call [`shutdown`](SimHandle::shutdown).
pub struct SimHandle {
    addr: SocketAddr,
    core: Arc<Core>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl SimHandle {
    /// The bound address (the real port when `listen` had port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, for `MotorConfig::base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stats(&self) -> SimStats {
        self.core.stats()
    }

    /// Messages that went out since this process started, in order.
    pub fn sent(&self) -> Vec<SentLine> {
        self.core.sent()
    }

    /// Every command the engine knows, any app.
    pub fn commands(&self) -> Vec<Command> {
        let mut v: Vec<Command> = lock(&self.core.engine).commands.values().cloned().collect();
        v.sort_by(|a, b| a.command_id.cmp(&b.command_id));
        v
    }

    /// The command for a key in an instance (any app), if any.
    pub fn command_by_key(&self, instance_id: &str, key: &str) -> Option<Command> {
        lock(&self.core.engine)
            .commands
            .values()
            .find(|c| c.instance_id == instance_id && c.idempotency_key == key)
            .cloned()
    }

    /// The same engine as a [`crate::channel::Channel`] without sockets
    /// (kind `motor`), as the app of `api_key`, for one instance. Shares
    /// keys, log, faults and webhooks with the HTTP side.
    pub fn channel(&self, api_key: &str, instance_id: &str, expected_generation: Option<i64>) -> InProcessChannel {
        InProcessChannel::new(self.core.clone(), api_key, instance_id, expected_generation)
    }

    /// Re-links an instance; returns the new generation.
    pub fn relink(&self, instance_id: &str) -> i64 {
        let mut engine = lock(&self.core.engine);
        let (g, failed) = engine.relink(instance_id, chrono::Utc::now());
        self.core.generation_changed(instance_id, g);
        for c in &failed {
            self.core.changed(c, false);
        }
        g
    }

    pub fn set_faults(&self, faults: FaultSpec) {
        self.core.set_faults(faults);
    }

    /// Rotates the accepted bearer key (`None`: any non-empty one), as
    /// `POST /sim/api-key` does.
    pub fn set_api_key(&self, key: Option<&str>) {
        self.core.set_api_key(key.map(str::to_string));
    }

    /// Unlinks (`false`) or links again (`true`) an instance's phone.
    pub fn set_connected(&self, instance_id: &str, connected: bool) {
        let mut d = lock(&self.core.disconnected);
        if connected {
            d.remove(instance_id);
        } else {
            d.insert(instance_id.to_string());
        }
    }

    /// Simulates the engine being down; `for_duration` resumes by itself.
    pub fn pause(&self, mode: PauseMode, for_duration: Option<Duration>) {
        pause_core(&self.core, mode, for_duration);
    }

    pub fn resume(&self) {
        self.core.mode.send_replace(PauseMode::Up);
    }

    /// Stops accepting, drops open connections and timers, stops webhook
    /// delivery, and waits for all of it.
    pub async fn shutdown(self) {
        self.shutdown.send_replace(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

pub(crate) fn pause_core(core: &Arc<Core>, mode: PauseMode, for_duration: Option<Duration>) {
    core.mode.send_replace(mode);
    if let Some(d) = for_duration {
        let core = core.clone();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            if *core.mode.borrow() == mode {
                core.mode.send_replace(PauseMode::Up);
            }
        });
    }
}

/// Starts a simulator on the current tokio runtime.
pub async fn spawn(opts: SimOptions) -> Result<SimHandle, SimError> {
    let (listener, addr) = bind(opts.listen).await?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (events_tx, events_rx) = match &opts.webhook {
        Some(_) => {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(rx))
        }
        None => (None, None),
    };
    let mut core = Core::new(
        opts.seed,
        opts.faults.clone(),
        opts.timing,
        opts.api_key.clone(),
        opts.log.as_deref(),
        opts.state.as_deref(),
        events_tx,
        shutdown_rx.clone(),
    )?;
    core.instances = opts.instances.clone();
    let core = Arc::new(core);
    let mut tasks = Vec::new();
    if let (Some(url), Some(rx)) = (opts.webhook.clone(), events_rx) {
        tasks.push(webhook::spawn(
            core.clone(),
            url,
            opts.webhook_secret.clone(),
            rx,
            shutdown_rx.clone(),
        ));
    }
    core.resume_all();
    let router = http::router(core.clone());
    tasks.push(tokio::spawn(serve(
        listener,
        addr,
        router,
        core.mode.subscribe(),
        shutdown_rx,
    )));
    Ok(SimHandle {
        addr,
        core,
        shutdown: shutdown_tx,
        tasks,
    })
}

/// Binds `listen`; the address is the real one (a free port for port 0).
pub(crate) async fn bind(listen: SocketAddr) -> Result<(TcpListener, SocketAddr), SimError> {
    let bind_error = |source| SimError::Bind { addr: listen, source };
    let listener = TcpListener::bind(listen).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    Ok((listener, addr))
}

/// Our own accept loop (instead of `axum::serve`) so a handler can drop its
/// connection without a response, and so "down" can really refuse
/// connections by closing the listening socket.
pub(crate) async fn serve(
    listener: TcpListener,
    addr: SocketAddr,
    router: axum::Router,
    mut mode: watch::Receiver<PauseMode>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut listener = Some(listener);
    let mut conns: JoinSet<()> = JoinSet::new();
    let mut mode_gone = false;
    loop {
        let refuse = *mode.borrow_and_update() == PauseMode::Refuse;
        if refuse {
            if listener.take().is_some() {
                conns.abort_all();
            }
        } else if listener.is_none() {
            match TcpListener::bind(addr).await {
                Ok(l) => listener = Some(l),
                Err(e) => {
                    tracing::warn!("sim: cannot listen again on {addr}: {e}; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                        _ = shutdown.wait_for(|s| *s) => break,
                    }
                }
            }
        }
        match &listener {
            Some(l) => tokio::select! {
                accepted = l.accept() => match accepted {
                    Ok((stream, _)) => { conns.spawn(connection(stream, router.clone())); }
                    Err(e) => tracing::debug!("sim accept: {e}"),
                },
                changed = mode.changed() => if changed.is_err() { mode_gone = true; break },
                _ = shutdown.wait_for(|s| *s) => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            },
            None => tokio::select! {
                changed = mode.changed() => if changed.is_err() { mode_gone = true; break },
                _ = shutdown.wait_for(|s| *s) => break,
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            },
        }
    }
    if mode_gone {
        // Nobody can pause us any more; serve until shutdown.
        if let Some(l) = listener.take() {
            loop {
                tokio::select! {
                    accepted = l.accept() => if let Ok((stream, _)) = accepted { conns.spawn(connection(stream, router.clone())); },
                    _ = shutdown.wait_for(|s| *s) => break,
                }
            }
        }
    }
    drop(listener);
    conns.shutdown().await;
}

async fn connection(stream: TcpStream, router: axum::Router) {
    // Answers leave as soon as they are written (a client waits for each).
    let _ = stream.set_nodelay(true);
    let kill = Arc::new(Notify::new());
    let handle = http::ConnKill(kill.clone());
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(handle.clone());
        let mut r = router.clone();
        async move { r.call(req).await }
    });
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = conn => {}
        // Dropping the connection closes the socket without a response.
        _ = kill.notified() => {}
    }
}
