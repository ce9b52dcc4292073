//! The dispatcher's heartbeat: a row in the ledger (`dispatchers`) that
//! says who runs this dispatcher where, and what it is doing, written every
//! `[dispatcher] heartbeat_ms` and at once on every change of state or
//! error. A clean shutdown writes `stopped` last; a crash leaves the row to
//! go stale, and readers count it as gone after three missed beats
//! (`domain::heartbeat`). A console with no dispatcher of its own shows the
//! live dispatchers of other processes from these rows.
//!
//! The beat has its own ledger connection, so a beat waiting for another
//! process's write lock never holds up a claim or a result.

use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::log_limit::LogLimit;
use super::{Control, Db, Result, ServiceState, ServiceStatus, Settings};
use crate::domain::heartbeat::Heartbeat;
use crate::ledger::Ledger;

/// Rows of runs that last beat longer ago than this are pruned when a
/// dispatcher starts: enough to see last week's crashes, never a pile-up.
const KEEP_ROWS: Duration = Duration::days(7);

/// The name of this host, for the row (`?` when the system will not say).
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "?".into())
}

/// Who this dispatcher run is, fixed for the run.
#[derive(Debug, Clone)]
struct Run {
    id: String,
    host: String,
    pid: u32,
    owner: Option<String>,
    started_at: DateTime<Utc>,
    interval: StdDuration,
    channel_instance: Option<String>,
}

impl Run {
    fn row(&self, status: &ServiceStatus, now: DateTime<Utc>) -> Heartbeat {
        Heartbeat {
            id: self.id.clone(),
            host: self.host.clone(),
            pid: self.pid,
            owner: self.owner.clone(),
            state: status.state,
            last_error: status.last_error.as_ref().map(|e| e.1.clone()),
            last_error_at: status.last_error.as_ref().map(|e| e.0),
            started_at: self.started_at,
            beat_at: now,
            interval: Duration::from_std(self.interval).unwrap_or(Duration::seconds(5)),
            channel: status.channel.as_ref().map(|h| h.pause.clone()),
            channel_instance: self.channel_instance.clone(),
        }
    }
}

/// A running heartbeat; [`Beating::stop`] writes the last row.
pub struct Beating {
    db: Db,
    run: Run,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Beating {
    /// Starts beating for `control`'s services on the current tokio
    /// runtime (call it inside one): the first row at once (pruning rows of
    /// runs long gone), then every interval and on every change. The row's
    /// id is the lease owner of `settings`, unique per process run.
    /// The task belongs to `tracker`, so the owner's shutdown awaits it.
    pub fn start(ledger: &Ledger, settings: &Settings, control: Control, tracker: &TaskTracker) -> Result<Beating> {
        let db = Db::session(ledger)?;
        let run = Run {
            id: settings.owner.clone(),
            host: host_name(),
            pid: std::process::id(),
            owner: settings.run_by.clone(),
            started_at: Utc::now(),
            interval: settings.heartbeat,
            channel_instance: settings.channel_instance.clone(),
        };
        let stop = CancellationToken::new();
        let task = tracker.spawn(beat_loop(db.clone(), run.clone(), control, stop.clone()));
        Ok(Beating {
            db,
            run,
            stop,
            task: Some(task),
        })
    }

    /// Stops beating and writes `status` as the last row (a clean shutdown
    /// says `stopped`).
    pub async fn stop(mut self, status: ServiceStatus) {
        self.stop.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        write(
            &self.db,
            self.run.row(&status, Utc::now()),
            false,
            &mut LogLimit::default(),
        )
        .await;
    }
}

impl Drop for Beating {
    fn drop(&mut self) {
        // Without `stop` there is no goodbye: the row goes stale and
        // readers count the run as gone, which is what it is.
        self.stop.cancel();
    }
}

/// Writes one row; a beat that cannot be written (the ledger locked for
/// longer than the busy timeout, a full disk) is only late: the next one
/// tries again, and readers tolerate two missed beats. A beat also follows
/// every change of the services' status, and a failing ledger changes it
/// on every poll: `limit` keeps that to one line a minute.
async fn write(db: &Db, row: Heartbeat, prune: bool, limit: &mut LogLimit) {
    let r = db
        .call(move |s| {
            s.write(|tx| {
                if prune {
                    tx.prune_heartbeats(row.beat_at - KEEP_ROWS)?;
                }
                tx.beat(&row)
            })?;
            Ok(())
        })
        .await;
    match r {
        Ok(()) => {
            limit.clear();
        }
        Err(e) => crate::warn_limited!(*limit, "could not write the dispatcher's heartbeat: {e}"),
    }
}

/// Beats at once, then every interval and on every change, until told to
/// stop.
async fn beat_loop(db: Db, run: Run, control: Control, stop: CancellationToken) {
    let mut changes = control.changes();
    let mut tick = tokio::time::interval(run.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = true;
    let mut limit = LogLimit::default();
    loop {
        if !first {
            tokio::select! {
                _ = tick.tick() => {}
                r = changes.changed() => {
                    if r.is_err() {
                        break;
                    }
                }
                _ = stop.cancelled() => {}
            }
        }
        if stop.is_cancelled() {
            break;
        }
        if first {
            // An interval's first tick completes at once: this beat.
            tick.tick().await;
        }
        let status = control.status();
        write(&db, run.row(&status, Utc::now()), first, &mut limit).await;
        first = false;
        if status.state == ServiceState::Stopped {
            // Ended on its own (an error): the row says so, and nothing
            // more will change.
            break;
        }
    }
}
