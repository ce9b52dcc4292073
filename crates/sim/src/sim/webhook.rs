//! Webhook delivery from the simulator: every command state change is
//! POSTed as a signed [`MotorEvent`], with the seeded duplication, delay and
//! reordering of the fault spec, and a few retries on non-2xx.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::core::Core;
use crate::channel::motor_event::{MotorEvent, SIGNATURE_HEADER, sign};

/// Delivery attempts per copy of an event before giving up.
const TRIES: u32 = 6;

/// Ordered delivery lanes: events of one command always use the same lane,
/// so they arrive in order (unless reordering is on), while different
/// commands are delivered concurrently.
const LANES: u64 = 8;

pub fn spawn(
    core: Arc<Core>,
    url: String,
    secret: Vec<u8>,
    mut rx: mpsc::UnboundedReceiver<MotorEvent>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap_or_default();
    let ctx = Arc::new(Ctx {
        core,
        client,
        url,
        secret: secret.into(),
    });
    let lanes: Vec<mpsc::UnboundedSender<MotorEvent>> = (0..LANES)
        .map(|_| {
            let (tx, mut lane_rx) = mpsc::unbounded_channel::<MotorEvent>();
            let ctx = ctx.clone();
            let mut sd = shutdown.clone();
            tokio::spawn(async move {
                loop {
                    let ev = tokio::select! {
                        ev = lane_rx.recv() => match ev { Some(ev) => ev, None => break },
                        _ = sd.wait_for(|s| *s) => break,
                    };
                    for (_, delay) in ctx.copies(&ev) {
                        tokio::select! { _ = ctx.deliver(&ev, delay) => {}, _ = sd.wait_for(|s| *s) => return }
                    }
                }
            });
            tx
        })
        .collect();
    tokio::spawn(async move {
        loop {
            let ev = tokio::select! {
                ev = rx.recv() => match ev { Some(ev) => ev, None => break },
                _ = shutdown.wait_for(|s| *s) => break,
            };
            if ctx.core.faults().webhook_reorder {
                // Independent deliveries: a later event with a shorter delay
                // overtakes an earlier one.
                for (_, delay) in ctx.copies(&ev) {
                    let (ctx, ev, mut sd) = (ctx.clone(), ev.clone(), shutdown.clone());
                    tokio::spawn(async move {
                        tokio::select! { _ = ctx.deliver(&ev, delay) => {}, _ = sd.wait_for(|s| *s) => {} }
                    });
                }
            } else {
                let lane = ctx.core.dice.raw(&["lane", &ev.command_id]) % LANES;
                let _ = lanes[lane as usize].send(ev);
            }
        }
    })
}

struct Ctx {
    core: Arc<Core>,
    client: reqwest::Client,
    url: String,
    secret: Arc<[u8]>,
}

impl Ctx {
    /// `(copy number, delay)` for each delivery of an event: one, or two
    /// when the seeded duplication fires.
    fn copies(&self, ev: &MotorEvent) -> Vec<(u32, u64)> {
        let faults = self.core.faults();
        let n = if self
            .core
            .dice
            .chance(faults.webhook_dup, &["webhook_dup", &ev.event_id])
        {
            2
        } else {
            1
        };
        (0..n)
            .map(|copy| {
                (
                    copy,
                    self.core.dice.pick(
                        &faults.webhook_delay_ms,
                        &["webhook_delay", &ev.event_id, &copy.to_string()],
                    ),
                )
            })
            .collect()
    }

    async fn deliver(&self, ev: &MotorEvent, delay_ms: u64) {
        deliver(&self.core, &self.client, &self.url, &self.secret, ev, delay_ms).await
    }
}

async fn deliver(core: &Core, client: &reqwest::Client, url: &str, secret: &[u8], ev: &MotorEvent, delay_ms: u64) {
    if delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    let Ok(body) = serde_json::to_vec(ev) else { return };
    let signature = sign(secret, &body);
    for attempt in 0..TRIES {
        let res = client
            .post(url)
            .header("content-type", "application/json")
            .header(SIGNATURE_HEADER, &signature)
            .body(body.clone())
            .send()
            .await;
        match res {
            Ok(r) if r.status().is_success() => {
                core.bump(|s| s.webhooks_delivered += 1);
                return;
            }
            Ok(r) => tracing::debug!("webhook {} answered {}", ev.event_id, r.status()),
            Err(e) => tracing::debug!("webhook {} failed: {e}", ev.event_id),
        }
        tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
    }
    core.bump(|s| s.webhooks_failed += 1);
    tracing::warn!("webhook event {} not delivered after {TRIES} tries", ev.event_id);
}
