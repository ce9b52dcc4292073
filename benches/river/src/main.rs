//! Peer benchmark for `unavez-bench`: the same number of no-op jobs through
//! River for Rust (`riverqueue`), inserted and worked, on one of its two
//! drivers:
//!
//! - **SQLite** (default): a temporary file with the pragmas unavez uses in
//!   production (WAL, `synchronous=FULL`, a busy timeout);
//! - **PostgreSQL** (`RIVER_PG=postgres://…`): a fresh schema of that
//!   database (River's migrations applied there, dropped after), on a pool
//!   of `RIVER_POOL` connections, with the server's own `synchronous_commit`
//!   (printed, so the bench can show it matches unavez's connections).
//!
//! Prints exactly one result line that `unavez-bench` parses:
//!
//! ```text
//! river db=… pool=… synchronous_commit=… jobs=50000 workers=… insert_s=… work_s=… insert_per_s=… work_per_s=… total_per_s=…
//! ```
//!
//! Options (environment): `RIVER_JOBS` (50000), `RIVER_WORKERS` (max
//! concurrent workers, 128 — the unavez dispatch concurrency),
//! `RIVER_COOLDOWN_MS` (minimum delay between fetches, 1 — River's minimum,
//! so the queue is not throttled by its default 100 ms pacing),
//! `RIVER_BATCH` (jobs per `insert_many`, 1000), `RIVER_DIR` (where the
//! temporary SQLite database goes; default the system temp directory),
//! `RIVER_PG` and `RIVER_POOL` (PostgreSQL, pool size 10 by default).

use std::error::Error;
use std::str::FromStr;
use std::time::{Duration, Instant};

use riverqueue::migrate::{PostgresMigrator, SqliteMigrator};
use riverqueue::sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use riverqueue::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use riverqueue::{Client, ClientBuilder, Job, JobArgs, QueueConfig, WorkContext, WorkOutcome, Workers};
use serde::{Deserialize, Serialize};

type Res<T> = Result<T, Box<dyn Error>>;

/// A no-op job carrying a key about the size of an intention key.
#[derive(Clone, Debug, Deserialize, JobArgs, Serialize)]
#[river(kind = "noop")]
struct Noop {
    key: String,
}

async fn work(_context: WorkContext, _job: Job<Noop>) -> Result<WorkOutcome, std::io::Error> {
    Ok(WorkOutcome::Complete)
}

fn env_num(name: &str, default: u64) -> Res<u64> {
    match std::env::var(name) {
        Ok(v) => Ok(v.parse().map_err(|e| format!("{name}={v}: {e}"))?),
        Err(_) => Ok(default),
    }
}

const COMPLETED: &str = "SELECT count(*) FROM river_job WHERE state = 'completed'";

/// The database the run uses, and how it is watched and cleaned up.
enum Backend {
    Sqlite {
        pool: SqlitePool,
        dir: std::path::PathBuf,
    },
    Postgres {
        pool: PgPool,
        /// A connection outside River's pool: the progress poll must not
        /// take one of the connections the fairness rule counts.
        watch: PgPool,
        schema: String,
        pool_size: u32,
        synchronous_commit: String,
    },
}

impl Backend {
    async fn sqlite() -> Res<Backend> {
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
        Ok(Backend::Sqlite { pool, dir })
    }

    async fn postgres(url: &str, pool_size: u32) -> Res<Backend> {
        let schema = format!("river_bench_{}", std::process::id());
        let base = PgConnectOptions::from_str(url)?;
        let watch = PgPoolOptions::new().max_connections(1).connect_with(base.clone()).await?;
        // One statement each: sqlx prepares what it sends.
        for sql in [
            format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
            format!("CREATE SCHEMA {schema}"),
        ] {
            // The schema name is ours (the process id), not input.
            riverqueue::sqlx::query(riverqueue::sqlx::AssertSqlSafe(sql)).execute(&watch).await?;
        }
        let watch = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone().options([("search_path", schema.as_str())]))
            .await?;
        let pool = PgPoolOptions::new()
            .max_connections(pool_size)
            .connect_with(base.options([("search_path", schema.as_str())]))
            .await?;
        PostgresMigrator::new(pool.clone()).migrate_up().await?;
        let synchronous_commit: String = riverqueue::sqlx::query_scalar("SHOW synchronous_commit")
            .fetch_one(&pool)
            .await?;
        Ok(Backend::Postgres {
            pool,
            watch,
            schema,
            pool_size,
            synchronous_commit,
        })
    }

    fn builder(&self) -> ClientBuilder {
        match self {
            Backend::Sqlite { pool, .. } => Client::builder(pool.clone()),
            Backend::Postgres { pool, .. } => Client::builder(pool.clone()),
        }
    }

    async fn completed(&self) -> Res<u64> {
        let n: i64 = match self {
            Backend::Sqlite { pool, .. } => riverqueue::sqlx::query_scalar(COMPLETED).fetch_one(pool).await?,
            Backend::Postgres { watch, .. } => riverqueue::sqlx::query_scalar(COMPLETED).fetch_one(watch).await?,
        };
        Ok(n as u64)
    }

    /// How often the work phase looks for its end: on PostgreSQL the count
    /// scans the job table on the server both sides share, so less often.
    fn poll(&self) -> Duration {
        match self {
            Backend::Sqlite { .. } => Duration::from_millis(20),
            Backend::Postgres { .. } => Duration::from_millis(50),
        }
    }

    fn describe(&self) -> String {
        match self {
            Backend::Sqlite { .. } => "db=sqlite pool=sqlx-default synchronous=FULL".into(),
            Backend::Postgres {
                pool_size,
                synchronous_commit,
                ..
            } => format!("db=postgres pool={pool_size} synchronous_commit={synchronous_commit}"),
        }
    }

    async fn close(self) -> Res<()> {
        match self {
            Backend::Sqlite { pool, dir } => {
                pool.close().await;
                let _ = std::fs::remove_dir_all(&dir);
            }
            Backend::Postgres {
                pool, watch, schema, ..
            } => {
                pool.close().await;
                riverqueue::sqlx::query(riverqueue::sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                    .execute(&watch)
                    .await?;
                watch.close().await;
            }
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Res<()> {
    let jobs = env_num("RIVER_JOBS", 50_000)?;
    let workers_n = env_num("RIVER_WORKERS", 128)? as usize;
    let cooldown = Duration::from_millis(env_num("RIVER_COOLDOWN_MS", 1)?.max(1));
    let batch = env_num("RIVER_BATCH", 1000)?.max(1);
    let backend = match std::env::var("RIVER_PG") {
        Ok(url) if !url.is_empty() => Backend::postgres(&url, env_num("RIVER_POOL", 10)?.max(1) as u32).await?,
        _ => Backend::sqlite().await?,
    };

    let mut workers = Workers::new();
    workers.add_fn(work)?;
    let client = backend
        .builder()
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
        let done = backend.completed().await?;
        if done >= jobs {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("only {done} of {jobs} jobs completed after 600 s").into());
        }
        tokio::time::sleep(backend.poll()).await;
    }
    let work_s = t1.elapsed().as_secs_f64();
    run.stop().await?;
    let describe = backend.describe();
    backend.close().await?;

    let j = jobs as f64;
    println!(
        "river {describe} jobs={jobs} workers={workers_n} insert_s={insert_s:.3} work_s={work_s:.3} insert_per_s={:.0} work_per_s={:.0} total_per_s={:.0}",
        j / insert_s,
        j / work_s,
        j / (insert_s + work_s)
    );
    Ok(())
}
