//! `GET /healthz` that tells the truth: `200` only while the ledger can be
//! written (or is busy with another writer and this process wrote within
//! the lease), `503` with the reason otherwise (read-only, disk full, a
//! failed write not yet followed by a good one).
//!
//! Every write of the server reports here (requests that store, rejection
//! flushes, status sweeps). A failed one (disk full, I/O error) makes the
//! check 503 until a write of the same kind succeeds: the probe below is a
//! single row and may fit where a real request does not, so it never
//! clears such a failure. Otherwise the check is that probe, a real
//! one-row write on a dedicated connection whose busy timeout is short,
//! so the answer comes within about 100 ms even while another process
//! holds the write lock; its verdict is reused for a second, so a flood of
//! health checks is not a flood of writes.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;

use super::AppState;
use crate::store::{Store, StoreError};

/// How long the probe waits for another writer's lock.
const PROBE_WAIT: Duration = Duration::from_millis(40);
/// A verdict younger than this is answered again without a new probe.
const REUSE: Duration = Duration::from_secs(1);
/// The heartbeat row the probe writes.
const PROBE_COUNTER: &str = "health_probe_at_ms";

/// What the server knows about its writes.
pub struct Health {
    lease: Duration,
    state: Mutex<WriteState>,
    /// The probe's own connection (opened on first use).
    probe: Mutex<Option<Store>>,
}

#[derive(Default)]
struct WriteState {
    last_ok: Option<Instant>,
    /// The last write's error, while no write has succeeded since.
    failure: Option<String>,
    verdict: Option<(Instant, Verdict)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Another process holds the write lock; this one wrote recently.
    Busy {
        last_write_ms: u128,
    },
    Unhealthy(String),
}

impl Health {
    pub fn new(lease: Duration) -> Health {
        Health {
            lease,
            state: Mutex::new(WriteState::default()),
            probe: Mutex::new(None),
        }
    }

    /// A write committed.
    pub fn write_ok(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.last_ok = Some(Instant::now());
            if s.failure.take().is_some() {
                s.verdict = None;
            }
        }
    }

    /// The probe's write committed: the ledger takes writes, but a failure
    /// of a real write stands (see the module doc).
    fn probe_ok(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.last_ok = Some(Instant::now());
        }
    }

    /// A request's write failed with `why`.
    pub fn write_failed_msg(&self, why: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.failure = Some(why.to_string());
            s.verdict = None;
        }
    }

    /// A write failed. Waiting out another writer's lock is not a failure
    /// of this ledger; anything else is until a write succeeds.
    pub fn write_failed(&self, e: &StoreError) {
        if e.is_busy() {
            return;
        }
        if let Ok(mut s) = self.state.lock() {
            s.failure = Some(e.to_string());
            s.verdict = None;
        }
    }

    /// Probes the ledger (blocking: call off the async runtime).
    pub fn check(&self, state: &AppState) -> Verdict {
        if let Ok(s) = self.state.lock() {
            if let Some(f) = &s.failure {
                return Verdict::Unhealthy(format!("the last write failed and none has succeeded since: {f}"));
            }
            if let Some((at, v)) = &s.verdict
                && at.elapsed() < REUSE
            {
                return v.clone();
            }
        }
        // One probe at a time; a concurrent check answers from what is known.
        let verdict = match self.probe.try_lock() {
            Ok(mut probe) => self.probe_with(&mut probe, state),
            Err(_) => self.judge_busy(),
        };
        if let Ok(mut s) = self.state.lock() {
            s.verdict = Some((Instant::now(), verdict.clone()));
        }
        verdict
    }

    fn probe_with(&self, probe: &mut Option<Store>, state: &AppState) -> Verdict {
        if probe.is_none() {
            match Store::attach_location(state.location()).and_then(|mut s| s.set_busy_timeout(PROBE_WAIT).map(|_| s)) {
                Ok(s) => *probe = Some(s),
                Err(e) => return Verdict::Unhealthy(format!("ledger cannot be opened: {e}")),
            }
        }
        let Some(store) = probe.as_mut() else {
            return Verdict::Unhealthy("ledger cannot be opened".into());
        };
        if let Some(why) = store.read_only_reason() {
            return Verdict::Unhealthy(format!("ledger cannot be written: {why}"));
        }
        let now = Utc::now().timestamp_millis();
        match store.write(|tx| tx.set_counter(PROBE_COUNTER, now)) {
            Ok(()) => {
                self.probe_ok();
                Verdict::Ok
            }
            Err(e) if e.is_busy() => self.judge_busy(),
            Err(e) => {
                self.write_failed(&e);
                // A failed connection may be stale (a replaced file): the
                // next probe opens a new one.
                *probe = None;
                Verdict::Unhealthy(format!("ledger cannot be written: {e}"))
            }
        }
    }

    /// Another writer holds the lock: healthy while this process wrote
    /// within the lease and no write has failed since.
    fn judge_busy(&self) -> Verdict {
        let Ok(s) = self.state.lock() else {
            return Verdict::Unhealthy("health state poisoned".into());
        };
        if let Some(f) = &s.failure {
            return Verdict::Unhealthy(format!("the last write failed: {f}"));
        }
        match s.last_ok {
            Some(t) if t.elapsed() < self.lease => Verdict::Busy {
                last_write_ms: t.elapsed().as_millis(),
            },
            Some(t) => Verdict::Unhealthy(format!(
                "ledger busy: another process has held the write lock; no write for {} s (lease {} s)",
                t.elapsed().as_secs(),
                self.lease.as_secs()
            )),
            None => Verdict::Unhealthy("ledger busy: another process holds the write lock".into()),
        }
    }
}

pub async fn healthz(State(state): State<AppState>) -> Response {
    let s2 = state.clone();
    let verdict = tokio::task::spawn_blocking(move || s2.health().check(&s2))
        .await
        .unwrap_or_else(|e| Verdict::Unhealthy(format!("health check failed: {e}")));
    match verdict {
        Verdict::Ok => (StatusCode::OK, "ok\n").into_response(),
        Verdict::Busy { last_write_ms } => (
            StatusCode::OK,
            format!("ok: ledger busy (another process holds the write lock); last write {last_write_ms} ms ago\n"),
        )
            .into_response(),
        Verdict::Unhealthy(why) => {
            tracing::warn!(reason = %why, "health check failed");
            (StatusCode::SERVICE_UNAVAILABLE, format!("unhealthy: {why}\n")).into_response()
        }
    }
}
