//! `unavez demo`: the demo clinic, the built-in engine simulator, the
//! dispatcher, reconciler and webhook server, and the console, in one
//! process, on a SQLite file of its own or on an empty PostgreSQL
//! database.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::Utc;

use super::Ctx;
use super::background::Background;
use crate::config::Role;
use crate::demo::{self, DemoOptions};
use crate::ledger::Ledger;
use crate::store::{OpenOptions, Store, StoreError};
use crate::tui::{ConsoleOptions, run};
use unavez_ledger::location::Location;
use unavez_ledger::pg::PgUrl;

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

/// A PostgreSQL demo ledger: created (migrated) in the database the URL
/// names, which must hold no ledger rows. Nothing tells a demo's rows from
/// a clinic's there, so unlike a demo file it is never emptied: a database
/// that already holds a ledger is refused, whoever filled it.
fn demo_pg(url: &PgUrl) -> anyhow::Result<Store> {
    let location = Location::Postgres(Box::new(url.clone()));
    let mut store = Store::open_location(&location, &OpenOptions::CREATE)
        .with_context(|| format!("creating the demo ledger in {url}"))?;
    let held = store.read(|tx| {
        let intentions: i64 = tx.count_by_state()?.iter().map(|(_, n)| n).sum();
        Ok::<_, StoreError>([
            ("commitments", tx.list_commitments(1, 0)?.len() as i64),
            ("intentions", intentions),
            ("operator actions", tx.operator_actions(1)?.len() as i64),
        ])
    })?;
    if let Some((what, _)) = held.iter().find(|(_, n)| *n > 0) {
        bail!(
            "{url} already holds a ledger (it has {what}): the demo seeds an empty PostgreSQL database only, \
             never one with a ledger in it; point --db at a new database or schema \
             (e.g. postgres://user@host/db?options=-c%20search_path%3Ddemo after CREATE SCHEMA demo)"
        );
    }
    Ok(store)
}

pub fn demo(ctx: &Ctx, a: DemoArgs) -> anyhow::Result<ExitCode> {
    // Only a ledger named for this run is used: the configured one is
    // never seeded with a demo clinic.
    let explicit = ctx.db != ctx.config.database;
    let mut store = match &ctx.location {
        Location::Postgres(url) if explicit => demo_pg(url)?,
        _ => {
            let db = demo_db(ctx, explicit)?;
            Store::open(&db).with_context(|| format!("creating demo database {}", db.display()))?
        }
    };
    let shown = store.location().to_string();
    let now = Utc::now();
    let seeded = demo::seed_clinic(
        &mut store,
        &ctx.planner(),
        now,
        DemoOptions {
            appointments: a.appointments,
            seed: a.seed,
            ..DemoOptions::default()
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
        "demo clinic at {shown}: {} booking events ({} rejected at the door), {} intentions planned, {} closed; \
         engine simulator at {} with faults on",
        seeded.events, seeded.rejected, seeded.planned, seeded.closed, config.channel.motor.base_url
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
            // The demo is a single-user installation: identity does not
            // matter there, so nothing says it is unverified.
            identity_verified: true,
            account: String::new(),
            read_only: false,
            refresh: Duration::from_secs(1),
            dispatcher_running: Some(true),
            dispatcher_error: None,
            dispatcher_stop: None,
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
    print_summary(&ledger)?;
    Ok(ExitCode::SUCCESS)
}

fn print_summary(ledger: &Ledger) -> anyhow::Result<()> {
    let counts = ledger.with(|store| store.read(|tx| tx.count_by_state()))??;
    println!("{:<12} {:>7}", "STATE", "COUNT");
    for (s, n) in counts {
        println!("{:<12} {:>7}", s.as_str(), n);
    }
    Ok(())
}
