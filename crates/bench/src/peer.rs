//! The peer: River for Rust on SQLite (`benches/river`, its own Cargo
//! project), run as a child process; we parse its one result line.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};

pub struct River {
    pub work_per_s: f64,
    pub line: String,
}

/// One run of the peer: `jobs` no-op jobs inserted, then worked by
/// `workers` workers fetching at most every `cooldown_ms`.
pub fn run(bin: &Path, jobs: u64, workers: u32, cooldown_ms: u64, dir: &Path) -> anyhow::Result<River> {
    let out = Command::new(bin)
        .env("RIVER_JOBS", jobs.to_string())
        .env("RIVER_WORKERS", workers.to_string())
        .env("RIVER_COOLDOWN_MS", cooldown_ms.to_string())
        .env("RIVER_DIR", dir)
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
