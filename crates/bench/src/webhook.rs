//! Webhook ingest: WhatsApp Cloud API status notifications over HTTP to the
//! real webhook router (`unavez::server`), with the `X-Hub-Signature-256`
//! check, deduplication by event id and monotonic application; batches of
//! statuses per notification, some repeated and some out of order, like Meta
//! sends them.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use chrono::Utc;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use unavez::config::Config;
use unavez::server::{AppState, Secrets};
use unavez::store::{Store, open_connection};
use unavez::templates::Templates;

use crate::ledger_shape::{self, LedgerShape};

const SECRET: &str = "bench-app-secret";

pub struct Webhooks {
    pub events: u64,
    pub requests: u64,
    pub seconds: f64,
    pub read_at_end: i64,
}

fn status(i: u64, st: &str, ts: i64) -> serde_json::Value {
    serde_json::json!({
        "id": format!("wamid.bench.{}", i + 1),
        "status": st,
        "timestamp": ts.to_string(),
        "recipient_id": "51970000000",
    })
}

fn notification(statuses: Vec<serde_json::Value>) -> Vec<u8> {
    serde_json::json!({
        "object": "whatsapp_business_account",
        "entry": [{ "id": "bench", "changes": [{ "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": { "display_phone_number": "15550000000", "phone_number_id": "bench" },
            "statuses": statuses }}]}]
    })
    .to_string()
    .into_bytes()
}

/// `n` accepted intentions, three statuses each (sent, delivered, read),
/// `per_batch` statuses per notification, `clients` concurrent senders. One
/// batch in ten carries its statuses in reverse order and one in ten is
/// delivered twice.
pub fn run(path: &Path, n: u64, per_batch: usize, clients: usize) -> anyhow::Result<Webhooks> {
    let now = Utc::now();
    {
        Store::open(path)?;
        let mut conn = open_connection(path)?;
        let shape = LedgerShape {
            contacts: n / 3 + 1,
            past_days: 0,
            future_days: 2,
            now,
            tz: Config::default().tz(),
            total: n,
        };
        ledger_shape::write(&mut conn, |c| ledger_shape::generate_contacts(c, shape.contacts, now))?;
        ledger_shape::write(&mut conn, |c| ledger_shape::generate_intentions(c, &shape, 0, n))?;
        ledger_shape::write(&mut conn, ledger_shape::all_accepted_on_cloud)?;
    }
    // Statuses in the order Meta would send them, grouped in batches.
    let ts = now.timestamp();
    let mut all = Vec::with_capacity(3 * n as usize);
    for st in ["sent", "delivered", "read"] {
        for i in 0..n {
            all.push(status(i, st, ts));
        }
    }
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for (k, chunk) in all.chunks(per_batch).enumerate() {
        let mut v = chunk.to_vec();
        if k % 10 == 3 {
            v.reverse();
        }
        let body = notification(v);
        if k % 10 == 7 {
            bodies.push(body.clone());
        }
        bodies.push(body);
    }
    let requests = bodies.len() as u64;
    let events = (all.len() + bodies.len().saturating_sub(all.len().div_ceil(per_batch)) * per_batch) as u64;
    let mut cfg = Config::default();
    cfg.server.listen = "127.0.0.1:0".into();
    let secrets = Secrets {
        cloud_app_secret: Some(SECRET.into()),
        ..Default::default()
    };
    let rt = tokio::runtime::Runtime::new()?;
    let seconds = rt.block_on(async {
        let listener = unavez::server::bind("127.0.0.1:0").await?;
        let state = AppState::new(cfg, Templates::embedded(), path.to_path_buf(), secrets)?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let handle = unavez::server::spawn(state, listener, async move {
            let _ = stop_rx.await;
        })?;
        let url = format!("http://{}/webhooks/whatsapp", handle.addr);
        let client = reqwest::Client::new();
        let queue = Arc::new(std::sync::Mutex::new(bodies));
        let t = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (client, url, queue) = (client.clone(), url.clone(), queue.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let body = match queue.lock() {
                        Ok(mut q) => q.pop(),
                        Err(_) => None,
                    };
                    let Some(body) = body else {
                        return Ok::<_, anyhow::Error>(());
                    };
                    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).context("hmac key")?;
                    mac.update(&body);
                    let sig = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
                    let r = client
                        .post(&url)
                        .header("X-Hub-Signature-256", sig)
                        .header("Content-Type", "application/json")
                        .body(body)
                        .send()
                        .await?;
                    if !r.status().is_success() {
                        bail!(
                            "webhook answered {}: {}",
                            r.status(),
                            r.text().await.unwrap_or_default()
                        );
                    }
                }
            }));
        }
        for t in tasks {
            t.await??;
        }
        let secs = t.elapsed().as_secs_f64();
        let _ = stop_tx.send(());
        handle.wait().await?;
        Ok::<_, anyhow::Error>(secs)
    })?;
    let read_at_end = ledger_shape::count_state(&open_connection(path)?, "read")?;
    Ok(Webhooks {
        events,
        requests,
        seconds,
        read_at_end,
    })
}
