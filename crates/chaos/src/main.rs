//! `unavez-chaos`: the chaos harness and history checker (see
//! `unavez_chaos::chaos` and docs/testing.md), run as
//! `cargo run --release -p unavez-chaos -- [--intentions N] [--kills N] [--seed S] [--dir D]
//! [--db PATH|postgres://…] [--dispatchers N] [--keep-schema] [--json]`.
//!
//! The children (simulator, importer, dispatcher) are this same binary
//! re-executed as `unavez-chaos __unavez <unavez arguments>`: it then runs
//! the `unavez` command line itself, so the dispatcher under test is the
//! product's code built with the harness's failpoints, while the shipped
//! `unavez` binary has none.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use clap::Parser as _;
use unavez_chaos::chaos::{self, CHILD_ARG, backend::Backend, plan::Options};

#[derive(Debug, clap::Parser)]
#[command(
    name = "unavez-chaos",
    about = "Chaos harness: kill dispatchers, inject faults, check the history"
)]
pub struct ChaosArgs {
    /// Intentions the imported booking events plan (about).
    #[arg(long, default_value_t = 5000)]
    pub intentions: u64,
    /// Random kill waves: every dispatcher of such a wave is SIGKILLed at a
    /// seeded moment (the deterministic kill points, store faults,
    /// terminated connections and the freeze come on top).
    #[arg(long, default_value_t = 25)]
    pub kills: u32,
    /// Seed of every fault decision: the same seed replays the same faults.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Working directory (ledger, simulator log, child logs); default a new
    /// directory under the system temp dir, kept for inspection.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The ledger: a SQLite file (default `ledger.db` in the run's
    /// directory) or a `postgres://` URL, in whose database the run makes a
    /// schema of its own (password from PGPASSWORD, never in the URL).
    #[arg(long)]
    pub db: Option<String>,
    /// Dispatcher processes (`unavez serve`) on the one ledger.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub dispatchers: u16,
    /// Keep a PostgreSQL run's schema when the run passes (a failing run's
    /// is always kept, for inspection).
    #[arg(long)]
    pub keep_schema: bool,
    /// Longest wait for everything to settle after the last fault.
    #[arg(long, default_value_t = 120)]
    pub settle_secs: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let me = args.next();
    let mut rest = args.peekable();
    let result = if rest.peek().is_some_and(|a| a == CHILD_ARG) {
        rest.next();
        chaos::child(me.into_iter().chain(rest))
    } else {
        run(ChaosArgs::parse())
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: ChaosArgs) -> anyhow::Result<ExitCode> {
    let bin = std::env::current_exe().context("locating the chaos binary for the child processes")?;
    let dir = a
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("unavez-chaos-seed{}-{}", a.seed, std::process::id())));
    if dir.join("ledger.db").exists() || dir.join("sent.jsonl").exists() {
        anyhow::bail!("{} already holds a chaos run; pass another --dir", dir.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let backend = Backend::prepare(a.db.as_deref(), &dir, a.seed)?;
    let opts = Options {
        intentions: a.intentions,
        kills: a.kills,
        seed: a.seed,
        dispatchers: usize::from(a.dispatchers),
        postgres: backend.is_pg(),
    };
    let mut report = match chaos::run(&opts, &bin, &dir, &backend, Duration::from_secs(a.settle_secs)) {
        Ok(r) => r,
        Err(e) => {
            let kept = if backend.is_pg() {
                format!(" (ledger kept: {})", backend.shown())
            } else {
                String::new()
            };
            return Err(anyhow::Error::new(e).context(format!("chaos run in {}{kept}", dir.display())));
        }
    };
    if backend.is_pg() {
        let keep = a.keep_schema || report.failed();
        if !keep {
            backend.drop_schema()?;
        }
        report.stats.schema_kept = Some(keep);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
