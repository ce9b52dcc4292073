//! `unavez tui` and `unavez demo`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use chrono::Utc;

use super::Ctx;
use crate::config::Role;
use crate::demo::{self, DemoOptions};
use crate::store::Store;
use crate::tui::{ConsoleOptions, run};

#[derive(Debug, clap::Args)]
pub struct TuiArgs {
    /// Who is at the keyboard; must be an `[[operator]]` of the config.
    #[arg(long)]
    pub operator: String,
    /// Hide and refuse every action (for wall screens and audits).
    #[arg(long)]
    pub read_only: bool,
    /// Do not run the embedded dispatcher and reconciler.
    #[arg(long)]
    pub no_dispatch: bool,
}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Run without the console and print a summary by state at the end.
    #[arg(long)]
    pub headless: bool,
    /// How long the headless demo runs.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// Appointments to book in the demo clinic.
    #[arg(long, default_value_t = 300)]
    pub appointments: usize,
}

pub fn tui(ctx: &Ctx, a: TuiArgs) -> anyhow::Result<ExitCode> {
    let Some(op) = ctx.config.operator(&a.operator) else {
        let known: Vec<&str> = ctx.config.operators.iter().map(|o| o.name.as_str()).collect();
        bail!(
            "unknown operator {:?}: add it as [[operator]] in the config (known: {})",
            a.operator,
            known.join(", ")
        );
    };
    // Open once here so a bad path or a too-new schema is reported before
    // the terminal switches to the alternate screen.
    drop(ctx.open_store()?);
    run(ConsoleOptions {
        config: ctx.config.clone(),
        templates: ctx.templates.clone(),
        db: ctx.db.clone(),
        operator: op.name.clone(),
        role: op.role,
        read_only: a.read_only,
        refresh: Duration::from_secs(2),
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The demo database: `--db` if given, else `unavez-demo.db`. Only files
/// that look like demo databases are replaced, never a real ledger.
fn demo_db(ctx: &Ctx, explicit: bool) -> anyhow::Result<PathBuf> {
    let path = if explicit {
        ctx.db.clone()
    } else {
        PathBuf::from("unavez-demo.db")
    };
    if path.exists() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.contains("demo") {
            bail!(
                "{} exists and is not a demo database; pass --db with a new file (its name must contain \"demo\")",
                path.display()
            );
        }
        for suffix in ["", "-wal", "-shm"] {
            let p = PathBuf::from(format!("{}{suffix}", path.display()));
            if p.exists() {
                std::fs::remove_file(&p).with_context(|| format!("removing old demo database {}", p.display()))?;
            }
        }
    }
    Ok(path)
}

pub fn demo(ctx: &Ctx, a: DemoArgs) -> anyhow::Result<ExitCode> {
    let explicit = ctx.db != ctx.config.database;
    let db = demo_db(ctx, explicit)?;
    let mut store = Store::open(&db).with_context(|| format!("creating demo database {}", db.display()))?;
    let now = Utc::now();
    let seeded = demo::seed_clinic(
        &mut store,
        &ctx.planner(),
        now,
        DemoOptions {
            appointments: a.appointments,
            seed: 42,
        },
    )?;
    // No embedded dispatcher in this build yet: give the due notices the
    // outcomes a working day produces, marked as demo fixtures in history.
    let shown = demo::showcase_outcomes(&mut store, now)?;
    drop(store);
    if a.headless {
        eprintln!(
            "demo clinic at {}: {} events, {} intentions planned, {} closed, {} rejected; {shown} outcomes simulated",
            db.display(),
            seeded.events,
            seeded.planned,
            seeded.closed,
            seeded.rejected
        );
        std::thread::sleep(Duration::from_secs(a.seconds.min(3600)));
        print_summary(&db)?;
        return Ok(ExitCode::SUCCESS);
    }
    let op = ctx
        .config
        .operators
        .iter()
        .find(|o| o.role == Role::Supervisor)
        .map(|o| o.name.clone())
        .unwrap_or_else(|| "supervisora".into());
    run(ConsoleOptions {
        config: ctx.config.clone(),
        templates: ctx.templates.clone(),
        db: db.clone(),
        operator: op,
        role: Role::Supervisor,
        read_only: false,
        refresh: Duration::from_secs(1),
    })?;
    print_summary(&db)?;
    Ok(ExitCode::SUCCESS)
}

fn print_summary(db: &Path) -> anyhow::Result<()> {
    let mut store = Store::open(db)?;
    let counts = store.read(|tx| tx.count_by_state())?;
    println!("{:<12} {:>7}", "STATE", "COUNT");
    for (s, n) in counts {
        println!("{:<12} {:>7}", s.as_str(), n);
    }
    Ok(())
}
