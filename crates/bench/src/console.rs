//! Console queries on a large ledger: generate a million intentions fast,
//! then, in a fresh child process (so its memory is the console's alone),
//! time the first frame, every screen's query, and read the peak RSS.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use unavez::config::Config;
use unavez::store::{Store, StoreError, open_connection};

use crate::ledger_shape::{self, LedgerShape};

/// Generates `total` intentions (plus commitments, contacts, attempts and
/// history) into `path`; returns seconds spent.
pub fn generate(path: &Path, total: u64, now: DateTime<Utc>) -> Result<f64, StoreError> {
    let t = Instant::now();
    Store::open(path)?;
    let mut conn = open_connection(path)?;
    let shape = LedgerShape {
        contacts: total / 10 + 1,
        past_days: 60,
        future_days: 30,
        now,
        tz: Config::default().tz(),
        total,
    };
    ledger_shape::write(&mut conn, |c| ledger_shape::generate_contacts(c, shape.contacts, now))?;
    let batch = 20_000;
    let mut from = 0;
    while from < total {
        let to = (from + batch).min(total);
        ledger_shape::write(&mut conn, |c| ledger_shape::generate_intentions(c, &shape, from, to))?;
        from = to;
    }
    // The generator writes names by plain SQL; the ledger files the words
    // of the names it saves in its typo index, here done once for all.
    Store::open(path)?.write(|tx| tx.file_name_words())?;
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
    /// Untimed samples over other patients before the timed passes.
    pub warmup: usize,
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
        bail!(
            "console probe failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("console probe printed {line:?}"))
}
