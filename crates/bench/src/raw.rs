//! The physical limit: durable inserts of intention-sized rows on this disk
//! with the production pragmas (WAL, `synchronous=FULL`), one row per
//! commit and many rows per commit.

use std::path::Path;
use std::time::{Duration, Instant};

use unavez::store::{StoreError, open_connection};

use crate::ledger_shape::{self, RAW_ROW_BYTES, write};

/// Raw-baseline results, in rows per second.
pub struct Raw {
    pub single_per_s: f64,
    pub single_rows: u64,
    pub batched_per_s: f64,
    pub batched_rows: u64,
    pub batch: u64,
}

fn payload(i: u64) -> String {
    let mut s = format!("{i:016}");
    while s.len() < RAW_ROW_BYTES {
        s.push_str("abcdefghijklmnopqrstuvwxyz0123456789");
    }
    s.truncate(RAW_ROW_BYTES);
    s
}

/// Single-row commits for about `budget` (at least 200 rows), then
/// `batched_rows` rows in commits of `batch`.
pub fn run(dir: &Path, budget: Duration, batched_rows: u64, batch: u64) -> Result<Raw, StoreError> {
    let mut conn = open_connection(&dir.join("raw.db"))?;
    write(&mut conn, ledger_shape::raw_setup)?;
    let mut i = 0u64;
    let t = Instant::now();
    while i < 200 || t.elapsed() < budget {
        let p = payload(i);
        write(&mut conn, |c| {
            ledger_shape::raw_insert(c, &format!("raw-{i:09}:single:v1"), &p, i as i64)
        })?;
        i += 1;
    }
    let single_per_s = i as f64 / t.elapsed().as_secs_f64();
    let single_rows = i;

    let t = Instant::now();
    let mut n = 0u64;
    while n < batched_rows {
        let take = batch.min(batched_rows - n);
        write(&mut conn, |c| {
            for j in n..n + take {
                ledger_shape::raw_insert(c, &format!("raw-{j:09}:batched:v1"), &payload(j), j as i64)?;
            }
            Ok(())
        })?;
        n += take;
    }
    let batched_per_s = n as f64 / t.elapsed().as_secs_f64();
    Ok(Raw {
        single_per_s,
        single_rows,
        batched_per_s,
        batched_rows: n,
        batch,
    })
}
