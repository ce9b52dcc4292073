//! `unavez tui` and `unavez demo`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::Utc;

use super::Ctx;
use super::background::Background;
use crate::config::Role;
use crate::demo::{self, DemoOptions};
use crate::ledger::Ledger;
use crate::store::{Store, StoreError};
use crate::tui::{ConsoleOptions, run};

#[derive(Debug, clap::Args)]
pub struct TuiArgs {
    /// Who is at the keyboard: an `[[operator]]` of the config. With
    /// operators mapped to OS accounts, the account decides and this may be
    /// left out.
    #[arg(long)]
    pub operator: Option<String>,
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
    /// Seed of the clinic and of the simulator's faults.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

pub fn tui(ctx: &Ctx, a: TuiArgs) -> anyhow::Result<ExitCode> {
    let identity = ctx.identity(a.operator.as_deref(), "console")?;
    let op = &identity.operator;
    // The process's one handle to the ledger: the console, and the
    // embedded dispatcher if it runs, take their connections from it.
    let ledger = Ledger::from_store(check_ledger(ctx)?);
    // A read-only console (a wall screen, an audit) never sends: it shows
    // the dispatchers of other processes from their heartbeat rows.
    let (background, error) = if a.read_only || a.no_dispatch || !ctx.config.dispatcher.embedded {
        (None, None)
    } else {
        match Background::start(&ledger, &ctx.config, Some(&op.name)) {
            Ok(b) => (Some(b), None),
            // The console is still useful without the dispatcher: say why
            // in the header instead of refusing to open.
            Err(e) => (None, Some(e.to_string())),
        }
    };
    let running = match (&background, &error) {
        (Some(_), _) => Some(true),
        (None, Some(_)) => Some(false),
        (None, None) => None,
    };
    let channel = match &background {
        Some(b) => Some(b.channel.clone()),
        None => crate::channel::from_config(&ctx.config.channel).ok(),
    };
    // Without embedded services the console still needs one runtime for its
    // channel calls and reprocessing, kept for the whole session.
    let own_runtime: tokio::runtime::Runtime;
    let runtime = match &background {
        Some(b) => b.handle(),
        None => {
            own_runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("starting the console's async runtime")?;
            own_runtime.handle().clone()
        }
    };
    let result = run(ConsoleOptions {
        channel,
        runtime,
        config: ctx.config.clone(),
        templates: ctx.templates.clone(),
        ledger: ledger.clone(),
        operator: op.name.clone(),
        role: op.role,
        identity_verified: identity.verified,
        read_only: a.read_only,
        refresh: Duration::from_secs(2),
        dispatcher_running: running,
        dispatcher_error: error,
        control: background.as_ref().map(|b| b.control()),
    });
    if let Some(b) = background {
        b.stop().context("stopping the embedded dispatcher")?;
    }
    result?;
    Ok(ExitCode::SUCCESS)
}

/// Checks the ledger before the terminal switches to the alternate screen,
/// so a missing file ("no existe …; créelo con `unavez init`"), a too-new
/// schema, a damaged or read-only ledger is reported on a plain terminal.
/// It is attached, not migrated: another process holding the write lock
/// (an import, a backup) never keeps the screen blank; the console shows
/// the lock instead. Only a ledger that needs a migration waits for it.
fn check_ledger(ctx: &Ctx) -> anyhow::Result<Store> {
    ctx.sqlite_only()?;
    let store = match Store::attach(&ctx.db) {
        Ok(store) => store,
        Err(StoreError::SchemaChanged { .. }) => return ctx.open_serviceable(false),
        Err(e) => return Err(ctx.ledger_error(e)),
    };
    store.check_serviceable().map_err(|e| ctx.ledger_error(e))?;
    Ok(store)
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
    if explicit {
        ctx.sqlite_only()?;
    }
    let db = demo_db(ctx, explicit)?;
    let mut store = Store::open(&db).with_context(|| format!("creating demo database {}", db.display()))?;
    let now = Utc::now();
    let seeded = demo::seed_clinic(
        &mut store,
        &ctx.planner(),
        now,
        DemoOptions {
            appointments: a.appointments,
            seed: a.seed,
        },
    )?;
    // One handle for the demo's console, dispatcher and webhook server.
    let ledger = Ledger::from_store(store);
    // The demo runs at any hour: quiet hours would hold every message
    // until the morning.
    let mut config = ctx.config.clone();
    config.policy.quiet_hours = None;
    let background = Background::start_demo(&ledger, &mut config, &ctx.templates, a.seed)
        .context("starting the demo engine and dispatcher")?;
    eprintln!(
        "demo clinic at {}: {} booking events ({} rejected at the door), {} intentions planned, {} closed; \
         engine simulator at {} with faults on",
        db.display(),
        seeded.events,
        seeded.rejected,
        seeded.planned,
        seeded.closed,
        config.channel.motor.base_url
    );
    let result = if a.headless {
        let end = Instant::now() + Duration::from_secs(a.seconds.min(24 * 3600));
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(200).min(end.saturating_duration_since(Instant::now())));
        }
        Ok(())
    } else {
        let op = config
            .operators
            .iter()
            .find(|o| o.role == Role::Supervisor)
            .map(|o| o.name.clone())
            .unwrap_or_else(|| "supervisora".into());
        run(ConsoleOptions {
            channel: Some(background.channel.clone()),
            runtime: background.handle(),
            config: config.clone(),
            templates: ctx.templates.clone(),
            ledger: ledger.clone(),
            operator: op,
            role: Role::Supervisor,
            // The demo is a single-user installation.
            identity_verified: false,
            read_only: false,
            refresh: Duration::from_secs(1),
            dispatcher_running: Some(true),
            dispatcher_error: None,
            control: Some(background.control()),
        })
    };
    let sim = background.sim_stats();
    let report = background.stop().context("stopping the demo engine and dispatcher")?;
    result?;
    let d = &report.dispatch;
    let r = &report.reconcile;
    println!(
        "dispatcher: claimed {}, accepted {}, failed {}, uncertain {}, retried {}, review {}, cancelled {}, deferred {}",
        d.claimed, d.accepted, d.failed, d.uncertain, d.retried, d.review, d.cancelled, d.deferred
    );
    println!(
        "reconciler: expired leases {}, resolved {}, still waiting {}, review {}, repeats {}",
        r.expired_leases, r.resolved, r.waiting, r.review, r.repeats
    );
    if let Some(s) = sim {
        println!(
            "engine: {} requests, {} commands, {} repeats answered with the stored command, {} messages out",
            s.requests, s.created, s.repeated, s.sent
        );
    }
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
