//! Request bodies and rejections, without the ledger's write lock.
//!
//! - **Bodies** are read here, before any handler, under three bounds from
//!   `[server]`: the size of one body (413), the total time to receive it
//!   (408, so a trickling body is cut too, which a per-read timeout would
//!   not do), and the bytes of all bodies held at once (503 with
//!   `Retry-After`; a provider retries, memory stays bounded).
//! - **Rejections** (401, 403, 408, 413, 400 before anything is stored) are
//!   counted in memory and flushed to the ledger's `counters` in batches:
//!   a flood of bad signatures costs no write transaction per request, and
//!   a rejection answers at once while another process holds the write
//!   lock. `/metrics` shows stored plus pending counts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::{ApiError, AppState};
use crate::config::ServerConfig;
use crate::domain::counter::{Counter, Rejection, Source};

/// How often pending rejection counts are written.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// The body bounds of `[server]`.
pub struct BodyLimits {
    /// One body, in bytes.
    pub limit: usize,
    /// Receiving one body, in total.
    pub read_timeout: Duration,
    /// Permits are bytes of bodies in flight.
    budget: Arc<Semaphore>,
}

impl BodyLimits {
    pub fn from_config(cfg: &ServerConfig) -> BodyLimits {
        // Permits are counted in u32 when taken; a budget above that is
        // more memory than this service should ever hold anyway.
        let budget = cfg.bodies_in_flight_bytes.min(u32::MAX as usize);
        BodyLimits {
            limit: cfg.body_limit_bytes,
            read_timeout: Duration::from_millis(cfg.body_read_timeout_ms),
            budget: Arc::new(Semaphore::new(budget)),
        }
    }
}

/// The `source` label of a request's rejections, from its route.
fn source_of(path: &str) -> Source {
    match path {
        "/webhooks/whatsapp" => Source::Cloud,
        "/webhooks/motor" => Source::Motor,
        "/v1/bookings/events" => Source::Bookings,
        _ => Source::Other,
    }
}

/// Reads a POST body whole under the [`BodyLimits`], then hands the
/// request on with the bytes in memory (the handlers' own reading is then
/// instant). The body's share of the budget is held until the response.
pub async fn read_bodies(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let source = source_of(req.uri().path());
    let limits = state.body_limits();
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.limit as u64) {
        state.rejections().add(source, Rejection::TooLarge);
        return closing(too_large(limits.limit));
    }
    // Without a declared length the body may use the whole limit.
    let share = declared
        .map(|n| n as usize)
        .unwrap_or(limits.limit)
        .clamp(1, limits.limit) as u32;
    let Ok(permit) = limits.budget.clone().try_acquire_many_owned(share) else {
        state.rejections().add(source, Rejection::Busy);
        let mut res = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many request bodies in flight; retry shortly",
        )
        .quiet()
        .into_response();
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return closing(res);
    };
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(limits.read_timeout, axum::body::to_bytes(body, limits.limit)).await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            // `to_bytes` reports the limit as an error whose text says so;
            // anything else is a broken upload.
            let res = if e.to_string().contains("length limit") {
                state.rejections().add(source, Rejection::TooLarge);
                too_large(limits.limit)
            } else {
                state.rejections().add(source, Rejection::Unreadable);
                ApiError::new(StatusCode::BAD_REQUEST, format!("cannot read request body: {e}")).into_response()
            };
            return closing(res);
        }
        Err(_) => {
            state.rejections().add(source, Rejection::SlowBody);
            let res = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request body not received within {} ms",
                    limits.read_timeout.as_millis()
                ),
            )
            .into_response();
            return closing(res);
        }
    };
    let res = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    drop(permit);
    // What the request did to the ledger is what /healthz reports.
    if let Some(super::LedgerWriteFailed(why)) = res.extensions().get::<super::LedgerWriteFailed>() {
        state.health().write_failed_msg(why);
    } else if res.status().is_success() {
        state.health().write_ok();
    }
    res
}

fn too_large(limit: usize) -> Response {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body over the {limit}-byte limit"),
    )
    .into_response()
}

/// A refusal whose body may still be arriving: close the connection rather
/// than read the rest.
fn closing(mut res: Response) -> Response {
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    res
}

/// Rejection counts not yet in the ledger.
#[derive(Default)]
pub struct Rejections {
    pending: Mutex<BTreeMap<Counter, i64>>,
}

impl Rejections {
    pub fn add(&self, source: Source, reason: Rejection) {
        if let Ok(mut p) = self.pending.lock() {
            *p.entry(Counter::WebhookRejected(source, reason)).or_insert(0) += 1;
        }
    }

    /// What is pending now (to write, or to show next to the stored counts).
    pub fn pending(&self) -> Vec<(Counter, i64)> {
        self.pending
            .lock()
            .map(|p| p.iter().map(|(k, v)| (*k, *v)).collect())
            .unwrap_or_default()
    }

    /// Forgets counts once they are stored (new ones may have arrived
    /// meanwhile: subtract, never clear).
    pub fn settle(&self, stored: &[(Counter, i64)]) {
        if let Ok(mut p) = self.pending.lock() {
            for (counter, n) in stored {
                if let Some(v) = p.get_mut(counter) {
                    *v -= n;
                    if *v <= 0 {
                        p.remove(counter);
                    }
                }
            }
        }
    }
}

/// Adds pending counts to stored ones (both sorted by name).
pub fn merge_counters(stored: &mut Vec<(String, i64)>, pending: Vec<(Counter, i64)>) {
    for (name, n) in pending.into_iter().map(|(c, n)| (c.name(), n)) {
        match stored.iter_mut().find(|(s, _)| *s == name) {
            Some(c) => c.1 += n,
            None => stored.push((name, n)),
        }
    }
    stored.sort_by(|a, b| a.0.cmp(&b.0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_counts_survive_a_concurrent_flush() {
        let r = Rejections::default();
        r.add(Source::Cloud, Rejection::Signature);
        r.add(Source::Cloud, Rejection::Signature);
        let snap = r.pending();
        r.add(Source::Cloud, Rejection::Signature);
        r.settle(&snap);
        assert_eq!(
            r.pending(),
            vec![(Counter::WebhookRejected(Source::Cloud, Rejection::Signature), 1)]
        );
        let mut stored = vec![("webhook_rejected:cloud:signature".to_string(), 5)];
        merge_counters(&mut stored, r.pending());
        assert_eq!(stored[0].1, 6);
    }
}
