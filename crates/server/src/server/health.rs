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
//!
//! The route needs no credentials, so an unhealthy answer says only a short
//! code (`unhealthy: write_failed`) to callers it does not trust; the
//! reason (the database's own error text, paths) goes to the log and to
//! callers on loopback that no proxy forwarded, or that present the
//! ingest bearer token.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
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
    Unhealthy(Problem, String),
}

/// Why the ledger is unhealthy, as the short code anyone may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// A real write failed (disk full, I/O error) and none succeeded since.
    WriteFailed,
    /// The ledger cannot be opened.
    Unopenable,
    /// The ledger (or its directory) cannot be written.
    ReadOnly,
    /// Another process has held the write lock for longer than the lease.
    Busy,
    /// The check itself failed.
    CheckFailed,
}

impl Problem {
    pub fn code(self) -> &'static str {
        match self {
            Problem::WriteFailed => "write_failed",
            Problem::Unopenable => "ledger_unopenable",
            Problem::ReadOnly => "ledger_read_only",
            Problem::Busy => "ledger_busy",
            Problem::CheckFailed => "check_failed",
        }
    }
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
                return Verdict::Unhealthy(
                    Problem::WriteFailed,
                    format!("the last write failed and none has succeeded since: {f}"),
                );
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
                Err(e) => return Verdict::Unhealthy(Problem::Unopenable, format!("ledger cannot be opened: {e}")),
            }
        }
        let Some(store) = probe.as_mut() else {
            return Verdict::Unhealthy(Problem::Unopenable, "ledger cannot be opened".into());
        };
        if let Some(why) = store.read_only_reason() {
            return Verdict::Unhealthy(Problem::ReadOnly, format!("ledger cannot be written: {why}"));
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
                Verdict::Unhealthy(Problem::WriteFailed, format!("ledger cannot be written: {e}"))
            }
        }
    }

    /// Another writer holds the lock: healthy while this process wrote
    /// within the lease and no write has failed since.
    fn judge_busy(&self) -> Verdict {
        let Ok(s) = self.state.lock() else {
            return Verdict::Unhealthy(Problem::CheckFailed, "health state poisoned".into());
        };
        if let Some(f) = &s.failure {
            return Verdict::Unhealthy(Problem::WriteFailed, format!("the last write failed: {f}"));
        }
        match s.last_ok {
            Some(t) if t.elapsed() < self.lease => Verdict::Busy {
                last_write_ms: t.elapsed().as_millis(),
            },
            Some(t) => Verdict::Unhealthy(
                Problem::Busy,
                format!(
                    "ledger busy: another process has held the write lock; no write for {} s (lease {} s)",
                    t.elapsed().as_secs(),
                    self.lease.as_secs()
                ),
            ),
            None => Verdict::Unhealthy(
                Problem::Busy,
                "ledger busy: another process holds the write lock".into(),
            ),
        }
    }
}

pub async fn healthz(State(state): State<AppState>, req: Request) -> Response {
    let trusted = trusted(&state, req.extensions().get::<ConnectInfo<SocketAddr>>(), req.headers());
    let s2 = state.clone();
    let verdict = tokio::task::spawn_blocking(move || s2.health().check(&s2))
        .await
        .unwrap_or_else(|e| Verdict::Unhealthy(Problem::CheckFailed, format!("health check failed: {e}")));
    match verdict {
        Verdict::Ok => (StatusCode::OK, "ok\n").into_response(),
        Verdict::Busy { last_write_ms } => (
            StatusCode::OK,
            format!("ok: ledger busy (another process holds the write lock); last write {last_write_ms} ms ago\n"),
        )
            .into_response(),
        Verdict::Unhealthy(problem, why) => {
            let code = problem.code();
            tracing::warn!(code, reason = %why, "health check failed");
            let body = match trusted {
                true => format!("unhealthy: {code}: {why}\n"),
                false => format!("unhealthy: {code}\n"),
            };
            (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
        }
    }
}

/// Whether a health caller may read the reason: one on loopback that no
/// proxy forwarded (a proxy on this host would make every caller look
/// local), or one presenting the ingest bearer token. A request that did
/// not come through the server's listener (no peer known) is not trusted.
fn trusted(state: &AppState, peer: Option<&ConnectInfo<SocketAddr>>, headers: &HeaderMap) -> bool {
    let forwarded = ["forwarded", "x-forwarded-for", "x-real-ip"]
        .iter()
        .any(|h| headers.contains_key(*h));
    if peer.is_some_and(|p| p.0.ip().is_loopback()) && !forwarded {
        return true;
    }
    let token = state.secrets().ingest_token.clone();
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    matches!((token.as_deref(), given), (Some(t), Some(g)) if super::auth::constant_time_eq(t.as_bytes(), g.as_bytes()))
}
