//! Peer benchmark for `unavez-bench`: the same number of no-op jobs through
//! River for Rust (`riverqueue`, SQLite driver), inserted and worked, on a
//! SQLite file with the pragmas unavez uses in production (WAL,
//! `synchronous=FULL`, a busy timeout).
//!
//! Prints exactly one result line that `unavez-bench` parses:
//!
//! ```text
//! river jobs=50000 insert_s=… work_s=… insert_per_s=… work_per_s=… total_per_s=…
//! ```
//!
//! Options (environment): `RIVER_JOBS` (50000), `RIVER_WORKERS` (max
//! concurrent workers, 128 — the unavez dispatch concurrency), `RIVER_COOLDOWN_MS` (minimum delay between
//! fetches, 1 — River's minimum, so the queue is not throttled by its
//! default 100 ms pacing), `RIVER_BATCH` (jobs per `insert_many`, 1000),
//! `RIVER_DIR` (where the temporary database goes; default the system temp
//! directory).

use std::error::Error;
use std::str::FromStr;
use std::time::{Duration, Instant};

use riverqueue::migrate::SqliteMigrator;
use riverqueue::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use riverqueue::{Client, Job, JobArgs, QueueConfig, WorkContext, WorkOutcome, Workers};
use serde::{Deserialize, Serialize};

/// A no-op job carrying a key about the size of an intention key.
#[derive(Clone, Debug, Deserialize, JobArgs, Serialize)]
#[river(kind = "noop")]
struct Noop {
    key: String,
}

async fn work(_context: WorkContext, _job: Job<Noop>) -> Result<WorkOutcome, std::io::Error> {
    Ok(WorkOutcome::Complete)
}

fn env_num(name: &str, default: u64) -> Result<u64, Box<dyn Error>> {
    match std::env::var(name) {
        Ok(v) => Ok(v.parse().map_err(|e| format!("{name}={v}: {e}"))?),
        Err(_) => Ok(default),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let jobs = env_num("RIVER_JOBS", 50_000)?;
    let workers_n = env_num("RIVER_WORKERS", 128)? as usize;
    let cooldown = Duration::from_millis(env_num("RIVER_COOLDOWN_MS", 1)?.max(1));
    let batch = env_num("RIVER_BATCH", 1000)?.max(1);
    let base = std::env::var("RIVER_DIR")
        .map(Into::into)
        .unwrap_or_else(|_| std::env::temp_dir());
    let dir = base.join(format!("unavez-river-peer-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("river.sqlite3");

    // The pragmas of unavez's store: WAL, synchronous=FULL, busy timeout.
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(30));
    let pool = SqlitePoolOptions::new().connect_with(options).await?;
    SqliteMigrator::new(pool.clone()).migrate_up().await?;

    let mut workers = Workers::new();
    workers.add_fn(work)?;
    let client = Client::builder(pool.clone())
        .workers(workers)
        .fetch_cooldown(cooldown)
        .queue(
            "default",
            QueueConfig::new(workers_n).with_fetch_poll_interval(Duration::from_millis(50).max(cooldown)),
        )
        .build()?;

    // Insert phase: every job durable before any is worked, like intentions
    // that are planned before they fall due.
    let t0 = Instant::now();
    let mut n = 0u64;
    while n < jobs {
        let take = batch.min(jobs - n);
        let items: Vec<Noop> = (n..n + take)
            .map(|i| Noop {
                key: format!("cita-{i:06}:recordatorio-24h:v1"),
            })
            .collect();
        client.insert_many(items).await?;
        n += take;
    }
    let insert_s = t0.elapsed().as_secs_f64();

    // Work phase: start the client and wait until every job is completed.
    let t1 = Instant::now();
    let mut run = client.start()?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let done: i64 = riverqueue::sqlx::query_scalar("SELECT count(*) FROM river_job WHERE state = 'completed'")
            .fetch_one(&pool)
            .await?;
        if done as u64 >= jobs {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("only {done} of {jobs} jobs completed after 600 s").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let work_s = t1.elapsed().as_secs_f64();
    run.stop().await?;
    pool.close().await;
    let _ = std::fs::remove_dir_all(&dir);

    let j = jobs as f64;
    println!(
        "river jobs={jobs} workers={workers_n} insert_s={insert_s:.3} work_s={work_s:.3} insert_per_s={:.0} work_per_s={:.0} total_per_s={:.0}",
        j / insert_s,
        j / work_s,
        j / (insert_s + work_s)
    );
    Ok(())
}
