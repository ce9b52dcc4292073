//! The background dispatcher and reconciler: the same code runs embedded in
//! the console, in the headless `unavez serve`, and once in
//! `unavez dispatch --until-idle`.
//!
//! | file | job |
//! |---|---|
//! | [`control`] | pause/resume, status snapshot, activity notifications for the console |
//! | `worker.rs` | claim due intentions in batches, send with bounded concurrency, record results |
//! | [`claim`] | which due intentions a claim takes: guard, validity (cancel, defer) and the claim itself, decided from one set-based read |
//! | [`finish`] | recording results in batches (the decision is `domain::finish`), and attempts the pre-send check stopped |
//! | [`gate`] | a channel that refuses us: sending paused on it, probed with a request that sends nothing, resumed when the probe passes |
//! | [`log_limit`] | repeated identical log lines of a loop that keeps failing, logged once a minute with a count |
//! | [`heartbeat`] | the run's heartbeat row: who, where, running/paused/stopped and the last error, every few seconds and on every change |
//! | `reconcile.rs` | expired leases → `uncertain`; resolve uncertain outcomes per channel capabilities, never by a blind resend |
//! | `status_poll.rs` | acknowledged messages without news for `status_poll_minutes`: the engine is asked for the command's state, applied as evidence |
//! | `repeat.rs` | a reconciliation repeat is a send: validity in the transaction that records it, withdraw or review when no longer valid |
//! | [`presend`] | the check right before each request leaves: commitment version, cancellation and the sender's own hold, re-read on a separate connection |
//! | [`reprocess`] | re-evaluate one operating day by state, with a dry run |
//! | [`request`] | the [`SendRequest`](crate::channel::SendRequest) built from the stored intention |
//!
//! The store is synchronous (SQLite); every database call runs on tokio's
//! blocking pool through [`Db`], so a slow fsync never stalls the sends in
//! flight.

pub mod claim;
pub mod control;
pub mod finish;
pub mod gate;
pub mod heartbeat;
pub mod log_limit;
pub mod presend;
mod reconcile;
pub mod reprocess;
pub mod request;
mod worker;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::channel::Channel;
use crate::config::Config;
use crate::domain::attempt::{Backoff, RetryPolicy};
use crate::domain::recovery::StatusPoll;
use crate::domain::validity::Rules;
use crate::ledger::{Ledger, Session};
use crate::store::{Store, StoreError};

pub use control::{Activity, ChannelHold, Control, ServiceState, ServiceStatus};
pub use reconcile::{ReconcileReport, reconcile_once};
pub use worker::{DispatchReport, dispatch_once, dispatch_until_idle};

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("database worker failed: {0}")]
    Worker(String),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = DispatchError> = std::result::Result<T, E>;

/// Everything the dispatcher and reconciler need from the configuration,
/// resolved once.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Lease owner written on claims and attempts: unique per process.
    pub owner: String,
    pub lease: Duration,
    pub batch_size: u32,
    pub concurrency: usize,
    pub poll: StdDuration,
    pub shutdown_grace: StdDuration,
    pub rules: Rules,
    /// Result retries: attempts before review, and the one backoff (also
    /// the wait between reconciliation tries).
    pub retry: RetryPolicy,
    /// Non-idempotent channels (and engine-ambiguous commands): how long an
    /// uncertain send waits for evidence before `review`.
    pub uncertain_review: Duration,
    /// Idempotent channels: reconciliation tries before `review`.
    pub max_reconcile_attempts: u32,
    /// When an acknowledged message without news is asked about
    /// (`[policy] status_poll_minutes`).
    pub status_poll: StatusPoll,
    /// How often the heartbeat row is written.
    pub heartbeat: StdDuration,
    /// Who runs this dispatcher, for its heartbeat row: the console's
    /// operator, else the OS account (when the system says).
    pub run_by: Option<String>,
    /// How often a channel that refused us is probed.
    pub channel_probe: StdDuration,
    /// The environment variable the channel's secret comes from, named
    /// when the channel rejects it.
    pub secret_env: Option<String>,
    /// The channel instance it sends through, for its heartbeat row
    /// (`channel::instance_label`).
    pub channel_instance: Option<String>,
}

impl Settings {
    pub fn from_config(cfg: &Config) -> Settings {
        let p = &cfg.policy;
        Settings {
            owner: format!(
                "dispatcher-{}-{}",
                std::process::id(),
                chrono::Utc::now().timestamp_millis()
            ),
            lease: Duration::seconds(i64::try_from(p.lease_seconds.max(1)).unwrap_or(60)),
            batch_size: cfg.dispatcher.batch_size.max(1),
            concurrency: usize::try_from(cfg.dispatcher.concurrency.max(1)).unwrap_or(1),
            poll: StdDuration::from_millis(cfg.dispatcher.poll_ms.max(10)),
            shutdown_grace: StdDuration::from_millis(cfg.dispatcher.shutdown_grace_ms),
            rules: Rules {
                quiet_hours: p.quiet_hours.as_ref().and_then(|q| q.minutes()),
                daily_cap: p.daily_cap_per_recipient,
                tz: cfg.tz(),
            },
            retry: RetryPolicy {
                max_attempts: p.max_attempts.max(1),
                backoff: Backoff::new(p.backoff_seconds.clone()),
            },
            uncertain_review: Duration::minutes(i64::try_from(p.uncertain_review_minutes).unwrap_or(30)),
            max_reconcile_attempts: p.max_reconcile_attempts.max(1),
            status_poll: StatusPoll {
                window: Duration::minutes(
                    i64::try_from(p.status_poll_minutes.min(crate::policy::MAX_STATUS_POLL_MINUTES)).unwrap_or(60),
                ),
            },
            heartbeat: StdDuration::from_millis(cfg.dispatcher.heartbeat_ms.max(100)),
            run_by: crate::ops::identity::current_account().ok(),
            channel_probe: StdDuration::from_millis(cfg.dispatcher.channel_probe_ms.max(100)),
            secret_env: Some(crate::channel::secret_env(&cfg.channel).to_string()),
            channel_instance: Some(crate::channel::instance_label(&cfg.channel)),
        }
    }

    /// Wait before reconciliation try number `tries` (0-based), from the
    /// backoff policy.
    pub(crate) fn reconcile_wait(&self, tries: u32) -> Duration {
        self.retry.backoff.wait(usize::try_from(tries).unwrap_or(usize::MAX))
    }
}

/// A task's session on the ledger (one connection of its own, one call at
/// a time: see [`crate::ledger`]) and the pre-send check of the same ledger
/// (which reads on a connection of its own).
#[derive(Clone)]
pub struct Db(Session, presend::PreSend);

impl Db {
    /// A session on a ledger opened (and migrated) here.
    pub fn open(path: &Path) -> Result<Db> {
        Db::session(&Ledger::open(path)?)
    }

    /// A session of its own on the process's shared ledger handle.
    pub fn session(ledger: &Ledger) -> Result<Db> {
        Ok(Db(ledger.session()?, presend::PreSend::new(ledger.location().clone())))
    }

    pub fn from_store(store: Store) -> Db {
        let check = presend::PreSend::new(store.location());
        Db(Session::from_store(store), check)
    }

    /// The pre-send check for sends recorded through this connection.
    pub fn presend(&self) -> &presend::PreSend {
        &self.1
    }

    /// Runs `f` with the session's connection on the blocking pool.
    pub async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Store) -> Result<T> + Send + 'static,
    {
        self.0.call(f).await.map_err(|e| DispatchError::Worker(e.to_string()))?
    }
}

/// What the background services did, reported when they stop.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServiceReport {
    pub dispatch: DispatchReport,
    pub reconcile: ReconcileReport,
}

/// Owns the background tasks (dispatcher, reconciler, heartbeat): one
/// cancellation token stops them and one tracker holds them, so nothing
/// outlives [`Services::stop`]. Dropping it without `stop` cancels them but
/// cannot wait; call `stop` to shut down gracefully and collect the reports.
pub struct Services {
    stop: CancellationToken,
    tracker: TaskTracker,
    control: Control,
    dispatcher: Option<JoinHandle<Result<DispatchReport>>>,
    reconciler: Option<JoinHandle<Result<ReconcileReport>>>,
    heartbeat: Option<heartbeat::Beating>,
}

impl Services {
    /// Starts the dispatcher and the reconciler on the current tokio
    /// runtime (call it inside one), each with a session of its own on the
    /// ledger at `db_path`.
    pub fn start(db_path: &Path, settings: Settings, channel: Arc<dyn Channel>) -> Result<Services> {
        Services::start_with(db_path, settings, channel, Control::new())
    }

    /// [`Services::start`] driven by `control` (created paused, or sharing
    /// an [`Activity`] counter with the webhook server).
    pub fn start_with(
        db_path: &Path,
        settings: Settings,
        channel: Arc<dyn Channel>,
        control: Control,
    ) -> Result<Services> {
        Services::start_on(&Ledger::attach_or_open(db_path)?, settings, channel, control)
    }

    /// [`Services::start_with`] on the process's shared ledger handle.
    pub fn start_on(
        ledger: &Ledger,
        settings: Settings,
        channel: Arc<dyn Channel>,
        control: Control,
    ) -> Result<Services> {
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        control.set_run_id(&settings.owner);
        let beating = heartbeat::Beating::start(ledger, &settings, control.clone(), &tracker)?;
        let settings = Arc::new(settings);
        let d_db = Db::session(ledger)?;
        let r_db = Db::session(ledger)?;
        let d_loop = worker::dispatch_loop(
            d_db,
            settings.clone(),
            channel.clone(),
            stop.clone(),
            worker::Mode::Forever,
            control.clone(),
        );
        let c = control.clone();
        // A dispatcher that ends on its own (an error) shows as stopped.
        let dispatcher = tracker.spawn(async move {
            let r = d_loop.await;
            if let Err(e) = &r {
                c.error(e);
            }
            c.set_stopped();
            r
        });
        let reconciler = tracker.spawn(reconcile::reconcile_loop(
            r_db,
            settings,
            channel,
            stop.clone(),
            control.clone(),
        ));
        Ok(Services {
            stop,
            tracker,
            control,
            dispatcher: Some(dispatcher),
            reconciler: Some(reconciler),
            heartbeat: Some(beating),
        })
    }

    /// A handle to pause/resume dispatch and read the status.
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// Graceful shutdown: stop claiming, wait for sends in flight up to the
    /// configured grace, record what is still unknown as `uncertain`, write
    /// the heartbeat's last row (`stopped`), wait for every task, and
    /// return both reports.
    pub async fn stop(mut self) -> Result<ServiceReport> {
        self.stop.cancel();
        let mut report = ServiceReport::default();
        let dispatched = match self.dispatcher.take() {
            Some(h) => h.await.map_err(|e| DispatchError::Worker(e.to_string())),
            None => Ok(Ok(DispatchReport::default())),
        };
        let reconciled = match self.reconciler.take() {
            Some(h) => h.await.map_err(|e| DispatchError::Worker(e.to_string())),
            None => Ok(Ok(ReconcileReport::default())),
        };
        // Stopped only now: while sends in flight drain, the row still says
        // running, which is what it is.
        self.control.set_stopped();
        if let Some(b) = self.heartbeat.take() {
            b.stop(self.control.status()).await;
        }
        self.tracker.close();
        self.tracker.wait().await;
        report.dispatch = dispatched??;
        report.reconcile = reconciled??;
        Ok(report)
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        self.stop.cancel();
        self.control.set_stopped();
    }
}

/// Runs dispatcher and reconciler until `shutdown` resolves, then stops
/// them gracefully (the headless `unavez serve`).
pub async fn serve(
    db_path: &Path,
    settings: Settings,
    channel: Arc<dyn Channel>,
    shutdown: impl Future<Output = ()>,
) -> Result<ServiceReport> {
    let services = Services::start(db_path, settings, channel)?;
    shutdown.await;
    services.stop().await
}
