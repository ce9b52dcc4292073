//! Console queries on a large ledger: generate a million intentions fast,
//! then, in a fresh child process (so its memory is the console's alone),
//! time the first frame, every screen's query, and read the peak RSS.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, bail};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use unavez::config::Config;
use unavez::domain::intention::operating_day;
use unavez::domain::state::IntentionState;
use unavez::store::bench::LedgerShape;
use unavez::store::{IntentFilter, Store, StoreError};

use crate::report::{peak_rss_mib, percentile};

/// Generates `total` intentions (plus commitments, contacts, attempts and
/// history) into `path`; returns seconds spent.
pub fn generate(path: &Path, total: u64, now: DateTime<Utc>) -> Result<f64, StoreError> {
    let t = Instant::now();
    let mut store = Store::open(path)?;
    let shape = LedgerShape { contacts: total / 10 + 1, past_days: 60, future_days: 30, now, tz: Config::default().tz(), total };
    store.write(|tx| tx.bench_generate_contacts(shape.contacts, now))?;
    let batch = 20_000;
    let mut from = 0;
    while from < total {
        let to = (from + batch).min(total);
        store.write(|tx| tx.bench_generate_intentions(&shape, from, to))?;
        from = to;
    }
    Ok(t.elapsed().as_secs_f64())
}

/// What the probe child reports.
#[derive(Debug, Serialize, Deserialize)]
pub struct Probe {
    pub intentions: i64,
    pub open_ms: f64,
    pub first_frame_ms: f64,
    pub first_frame_kind: String,
    /// Screen name → (p50 ms, p95 ms, samples).
    pub queries: Vec<(String, f64, f64, usize)>,
    /// Point lookup by id: the floor any query is compared to.
    pub point_p50_ms: f64,
    pub point_p95_ms: f64,
    pub peak_rss_mib: f64,
}

/// Runs the probe in a child process (this binary, `probe-console`).
pub fn probe_in_child(db: &Path, now: DateTime<Utc>, samples: usize) -> anyhow::Result<Probe> {
    let exe = std::env::current_exe().context("locating unavez-bench")?;
    let out = Command::new(exe)
        .arg("probe-console")
        .arg("--db")
        .arg(db)
        .arg("--now-ms")
        .arg(now.timestamp_millis().to_string())
        .arg("--samples")
        .arg(samples.to_string())
        .output()
        .context("running the console probe")?;
    if !out.status.success() {
        bail!("console probe failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("console probe printed {line:?}"))
}

fn time_ms<T>(f: impl FnOnce() -> Result<T, StoreError>) -> Result<(f64, T), StoreError> {
    let t = Instant::now();
    let v = f()?;
    Ok((t.elapsed().as_secs_f64() * 1000.0, v))
}

fn summarize(name: &str, mut v: Vec<f64>) -> (String, f64, f64, usize) {
    v.sort_by(f64::total_cmp);
    (name.to_string(), percentile(&v, 50.0), percentile(&v, 95.0), v.len())
}

/// The probe itself: runs in the child. `started` is the child's first
/// instant, so the first frame includes opening the ledger.
pub fn probe(started: Instant, db: &Path, now: DateTime<Utc>, samples: usize) -> Result<Probe, StoreError> {
    let (open_ms, mut store) = time_ms(|| Store::open(db))?;
    let tz = Config::default().tz();
    let today = operating_day(now, tz);
    // First frame: what the console's opening screen needs before it can
    // draw (counters and the first page of what needs attention).
    let attention = vec![IntentionState::Uncertain, IntentionState::Review, IntentionState::Failed];
    store.read(|tx| {
        tx.count_by_state()?;
        tx.list_intentions(&IntentFilter { states: attention.clone(), limit: 50, ..Default::default() })
    })?;
    let first_frame_ms = started.elapsed().as_secs_f64() * 1000.0;
    let first_frame_kind = "open + counters + first attention page (no TUI render yet)".to_string();

    let intentions = store.read(|tx| tx.bench_count_intentions())?;
    let day = |k: usize| operating_day(now + Duration::days(k as i64 % 90 - 60), tz);
    let mut queries = Vec::new();
    let mut counts = Vec::new();
    let mut by_day = Vec::new();
    let mut by_state = Vec::new();
    let mut detail = Vec::new();
    let mut point = Vec::new();
    for k in 0..samples {
        let id = (crate::mix(k as u64) % intentions.max(1) as u64) as i64 + 1;
        store.read(|tx| {
            counts.push(time_ms(|| tx.count_by_state())?.0);
            let d = day(k);
            by_day.push(
                time_ms(|| {
                    tx.list_intentions(&IntentFilter {
                        day: Some(d),
                        limit: 50,
                        offset: (k % 4 * 50) as u32,
                        ..Default::default()
                    })
                })?
                .0,
            );
            by_state.push(
                time_ms(|| {
                    tx.list_intentions(&IntentFilter {
                        states: attention.clone(),
                        limit: 50,
                        offset: (k % 4 * 50) as u32,
                        ..Default::default()
                    })
                })?
                .0,
            );
            let (ms, row) = time_ms(|| tx.intention(id))?;
            point.push(ms);
            detail.push(time_ms(|| tx.intention_detail(&row.key))?.0);
            Ok::<_, StoreError>(())
        })?;
    }
    let _ = today;
    queries.push(summarize("counts by state", counts));
    queries.push(summarize("day list (50 rows)", by_day));
    queries.push(summarize("attention list (50 rows)", by_state));
    queries.push(summarize("intention detail", detail));
    point.sort_by(f64::total_cmp);
    Ok(Probe {
        intentions,
        open_ms,
        first_frame_ms,
        first_frame_kind,
        queries,
        point_p50_ms: percentile(&point, 50.0),
        point_p95_ms: percentile(&point, 95.0),
        peak_rss_mib: peak_rss_mib().unwrap_or(f64::NAN),
    })
}
