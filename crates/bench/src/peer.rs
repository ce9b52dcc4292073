//! The peer: River for Rust (`benches/river`, its own Cargo project) on
//! SQLite or on PostgreSQL, run as a child process; we parse its one result
//! line.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};

pub struct River {
    pub work_per_s: f64,
    pub line: String,
}

/// River's PostgreSQL driver: the database URL (River makes a schema of
/// its own there) and the size of its connection pool.
#[derive(Clone, Debug)]
pub struct OnPg {
    pub url: String,
    pub pool: u32,
}

/// One run of the peer: `jobs` no-op jobs inserted, then worked by
/// `workers` workers fetching at most every `cooldown_ms`; on SQLite in
/// `dir`, or on PostgreSQL when `pg` says so.
pub fn run(
    bin: &Path,
    jobs: u64,
    workers: u32,
    cooldown_ms: u64,
    dir: &Path,
    pg: Option<&OnPg>,
) -> anyhow::Result<River> {
    let mut cmd = Command::new(bin);
    cmd.env("RIVER_JOBS", jobs.to_string())
        .env("RIVER_WORKERS", workers.to_string())
        .env("RIVER_COOLDOWN_MS", cooldown_ms.to_string())
        .env("RIVER_DIR", dir)
        .env_remove("RIVER_PG");
    if let Some(pg) = pg {
        cmd.env("RIVER_PG", &pg.url).env("RIVER_POOL", pg.pool.to_string());
    }
    let out = cmd
        .output()
        .with_context(|| format!("running {} (build it with benches/run.sh)", bin.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("river "))
        .context("no result line from the river peer")?;
    let field = |name: &str| -> anyhow::Result<f64> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .with_context(|| format!("no {name} in {line:?}"))?
            .parse()
            .with_context(|| format!("bad {name} in {line:?}"))
    };
    Ok(River {
        work_per_s: field("work_per_s")?,
        line: line.to_string(),
    })
}
