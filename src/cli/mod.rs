//! The command line: argument parsing (clap) and one small handler per
//! command group. This is the binary's edge, so errors become `anyhow`
//! here and nowhere else.

mod background;
mod backup;
mod copy;
mod demo;
mod dispatch;
mod doctor;
pub mod errors;
mod feeds;
mod intents_ops;
mod ledger;
mod progress;
mod resend;
mod show;
mod sim;
mod templates;
mod tui;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::ops::identity::{self, Identity, IdentityError};
use crate::planner::Planner;
use crate::store::{OpenOptions, Store};
use crate::templates::Templates;
use unavez_ledger::location::Location;

#[derive(Debug, Parser)]
#[command(
    name = "unavez",
    version,
    about = "One business intention, at most one WhatsApp message"
)]
pub struct Cli {
    /// The ledger: a SQLite file, or a postgres:// URL (default: `database`
    /// from the config, `unavez.db`).
    #[arg(long, global = true, env = "UNAVEZ_DB")]
    pub db: Option<PathBuf>,
    /// Configuration file (see config.example.toml); defaults apply without one.
    #[arg(long, global = true, env = "UNAVEZ_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create (or migrate) the ledger database.
    Init,
    /// Import booking events from a .jsonl, .csv or .ics file.
    Import(ledger::ImportArgs),
    /// Commitments (appointments, orders).
    #[command(subcommand)]
    Commitments(ledger::CommitmentsCmd),
    /// Intentions (one per business message).
    #[command(subcommand)]
    Intents(IntentsCmd),
    /// Run the demo clinic: simulator, dispatcher and console.
    Demo(demo::DemoArgs),
    /// Open the operator console.
    Tui(tui::TuiArgs),
    /// Run the WhatsApp engine simulator (docs/design.md, "The WhatsApp engine contract") over HTTP.
    Sim(sim::SimArgs),
    /// Headless service: dispatcher, reconciler, webhook server and the
    /// calendar feeds of `[[import.feed]]`.
    Serve(dispatch::ServeArgs),
    /// Calendar feeds: their state; `confirm`/`discard` a mass
    /// disappearance held for review.
    Feeds(feeds::FeedsArgs),
    /// Dispatch due intentions once (for cron and tests).
    Dispatch(dispatch::DispatchArgs),
    /// Re-evaluate one operating day's intentions by state.
    Reprocess(dispatch::ReprocessArgs),
    /// The ledger itself: back up or restore a SQLite ledger, copy one to PostgreSQL.
    #[command(subcommand)]
    Ledger(copy::LedgerCmd),
    /// Check everything the service needs (configuration, secrets, ledger,
    /// channel, templates, webhooks, listen address, dispatchers), each
    /// with a fix. Exit 0 all ok, 3 when a check warns or fails.
    Doctor(doctor::DoctorArgs),
    /// Message templates against Meta's (Cloud API): check, or pull a skeleton.
    #[command(subcommand)]
    Templates(templates::TemplatesCmd),
}

/// `unavez intents …`: the listings, and the operator actions that have a
/// command-line twin.
#[derive(Debug, Subcommand)]
pub enum IntentsCmd {
    #[command(flatten)]
    Ledger(ledger::IntentsCmd),
    /// Authorize a resend of a message (supervisors), with the console's guard.
    ///
    /// Creates a NEW intention related to the original. Refused while an
    /// earlier one is planned, dispatching or uncertain, over
    /// `[policy] max_resends_per_day`, or, without --acknowledge-delivered,
    /// when an earlier one was delivered or read. Exit 0 created, 3 refused,
    /// 2 unknown key, operator or blank reason.
    Resend(resend::ResendArgs),
    /// Cancel the send of a message that has not left (not the appointment).
    /// Exit 0 done, 3 refused, 2 unknown key, operator or blank reason.
    Cancel(intents_ops::CaseArgs),
    /// Record what the customer said: received or not received.
    Verify(intents_ops::VerifyArgs),
    /// Record a manual contact (staff reached the customer): closes the
    /// equivalent pending reminders.
    Contact(intents_ops::CaseArgs),
    /// Mark the case handled ("marcar atendido"): it leaves Atención until
    /// something new happens to it.
    Resolve(intents_ops::CaseArgs),
    /// Ask a supervisor to authorize a resend (the front desk, which may
    /// not resend). Refused when a resend would be refused now, or a request
    /// is already open. Exit 0 asked, 3 refused, 2 unknown key, operator or
    /// blank reason.
    RequestResend(intents_ops::CaseArgs),
    /// Decline the front desk's open request for a resend (supervisors),
    /// saying why. Exit 0 declined, 3 refused (no open request), 2 as above.
    DeclineResend(intents_ops::CaseArgs),
    /// Record what came of a call to the patient: confirmo, no_contesta,
    /// reprogramar or numero_equivocado (the outcome is the reason).
    /// Exit 0 done, 3 refused, 2 unknown key, operator or outcome.
    CallOutcome(intents_ops::CallArgs),
    /// Reopen a case marked handled (a compensating action; the mark's
    /// action stays in the log). Exit 0 done, 3 refused (not handled),
    /// 2 unknown key, operator or blank reason.
    Reopen(intents_ops::CaseArgs),
}

/// What every command needs: configuration, database path and templates.
pub struct Ctx {
    pub config: Config,
    /// The ledger setting as given (a path, or a URL).
    pub db: PathBuf,
    /// What it names.
    pub location: Location,
    pub templates: Templates,
    /// `[storage] group`, resolved: new ledger files are shared with it.
    pub gid: Option<u32>,
}

impl Ctx {
    pub fn load(cli: &Cli) -> anyhow::Result<Ctx> {
        let config = match &cli.config {
            Some(p) => Config::load(p)?,
            None => Config::default(),
        };
        let templates = config.load_templates()?;
        let db = cli.db.clone().unwrap_or_else(|| config.database.clone());
        let location = Location::parse(&db)?;
        let gid = config.storage_gid()?;
        Ok(Ctx {
            config,
            db,
            location,
            templates,
            gid,
        })
    }

    /// Opens the ledger, creating it (private, see `store::files`) if the
    /// file does not exist: for the commands that make one (`init`,
    /// `import`, `serve`).
    pub fn open_store(&self) -> anyhow::Result<Store> {
        self.open(true)
    }

    /// Opens an existing ledger; a missing file is an error naming the
    /// path, never a new empty database (a mistyped `--db`).
    pub fn open_existing(&self) -> anyhow::Result<Store> {
        self.open(false)
    }

    fn open(&self, create: bool) -> anyhow::Result<Store> {
        let opts = OpenOptions {
            create,
            group: self.gid,
        };
        let store = Store::open_location(&self.location, &opts).map_err(|e| self.ledger_error(e))?;
        if store.is_pg() {
            return Ok(store);
        }
        if let Some(mode) = crate::store::files::readable_by_others(&self.db) {
            tracing::warn!(
                "ledger {} is readable by every account on this host (mode {mode:o}): it holds names and phones; \
                 chmod 600 it (or 660 with [storage] group)",
                self.db.display()
            );
        }
        Ok(store)
    }

    /// A ledger that cannot be opened, said for a person: a missing file in
    /// the configured language ("no existe …; créelo con `unavez init`"),
    /// anything else with the path.
    pub fn ledger_error(&self, e: crate::store::StoreError) -> anyhow::Error {
        match e {
            crate::store::StoreError::Missing { path } => anyhow::anyhow!(crate::i18n::fill(
                crate::i18n::strings(self.config.language).missing_ledger,
                &[("path", &path.display().to_string())],
            )),
            e => anyhow::Error::new(e).context(format!("opening ledger {}", self.location)),
        }
    }

    /// [`Ctx::open_store`] or [`Ctx::open_existing`] for a long-running
    /// process (`serve`, `tui`): refused on a ledger that fails
    /// `PRAGMA quick_check` or that this account cannot write.
    pub fn open_serviceable(&self, create: bool) -> anyhow::Result<Store> {
        let store = self.open(create)?;
        store.check_serviceable()?;
        Ok(store)
    }

    /// Who is acting (see `ops::identity`). A refusal is recorded in the
    /// ledger's operator actions (when the ledger opens) and returned.
    pub fn identity(&self, flag: Option<&str>, action: &str) -> Result<Identity, IdentityError> {
        let account = identity::current_account()?;
        let err = match identity::resolve(&self.config, flag, &account) {
            Ok(id) => return Ok(id),
            // A name that is not configured is a typo, not a refusal.
            Err(e @ (IdentityError::UnknownOperator { .. } | IdentityError::FlagRequired { .. })) => return Err(e),
            Err(e) => e,
        };
        let recorded = self.open_existing().ok().map(|mut store| {
            store.write(|tx| identity::record_refusal(tx, &account, flag, action, &err, chrono::Utc::now()))
        });
        if let Some(Err(e)) = recorded {
            tracing::warn!(error = %e, "could not record the refused identity");
        }
        Err(err)
    }

    pub fn planner(&self) -> Planner<'_> {
        Planner::new(&self.config.policy, &self.templates, self.config.tz())
    }
}

/// Parses the process's command line and runs the command.
pub fn run() -> anyhow::Result<ExitCode> {
    run_from(std::env::args_os())
}

/// Parses `args` (program name first) and runs the command: the chaos
/// harness runs its children through this, in its own binary.
pub fn run_from<I, T>(args: I) -> anyhow::Result<ExitCode>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    errors::set_json(args.iter().skip(1).any(|a| a == "--json"));
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        // Help and version are not errors; a usage error with --json is
        // a JSON document like every other error.
        Err(e) if errors::json() && e.use_stderr() => {
            let message = e.kind().to_string();
            let detail = e.to_string();
            let first = detail.lines().next().unwrap_or(&message).trim_start_matches("error: ");
            return Ok(errors::fail("usage", first, 2));
        }
        Err(e) => e.exit(),
    };
    init_tracing(matches!(cli.command, Command::Tui(_) | Command::Demo(_)));
    // Doctor reports a configuration that does not load as a check.
    if let Command::Doctor(a) = &cli.command {
        return doctor::run(&cli, a);
    }
    let ctx = Ctx::load(&cli)?;
    match cli.command {
        Command::Init => {
            let store = ctx.open_store()?;
            println!("ledger ready at {}", store.path().display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(a) => ledger::import(&ctx, a),
        Command::Commitments(c) => ledger::commitments(&ctx, c),
        Command::Intents(IntentsCmd::Ledger(c)) => ledger::intents(&ctx, c),
        Command::Intents(IntentsCmd::Resend(a)) => resend::run(&ctx, a),
        Command::Intents(IntentsCmd::Cancel(a)) => intents_ops::run(&ctx, intents_ops::Twin::Cancel, a),
        Command::Intents(IntentsCmd::Verify(a)) => {
            intents_ops::run(&ctx, intents_ops::Twin::Verify(a.outcome.into()), a.case)
        }
        Command::Intents(IntentsCmd::Contact(a)) => intents_ops::run(&ctx, intents_ops::Twin::Contact, a),
        Command::Intents(IntentsCmd::Resolve(a)) => intents_ops::run(&ctx, intents_ops::Twin::Resolve, a),
        Command::Intents(IntentsCmd::RequestResend(a)) => intents_ops::run(&ctx, intents_ops::Twin::RequestResend, a),
        Command::Intents(IntentsCmd::DeclineResend(a)) => intents_ops::run(&ctx, intents_ops::Twin::DeclineResend, a),
        Command::Intents(IntentsCmd::CallOutcome(a)) => {
            let (twin, case) = a.into_case();
            intents_ops::run(&ctx, twin, case)
        }
        Command::Intents(IntentsCmd::Reopen(a)) => intents_ops::run(&ctx, intents_ops::Twin::Reopen, a),
        Command::Demo(a) => demo::demo(&ctx, a),
        Command::Tui(a) => tui::tui(&ctx, a),
        Command::Sim(a) => sim::run(&ctx, a),
        Command::Serve(a) => dispatch::serve(&ctx, a),
        Command::Feeds(a) => feeds::run(&ctx, a),
        Command::Dispatch(a) => dispatch::dispatch(&ctx, a),
        Command::Reprocess(a) => dispatch::reprocess(&ctx, a),
        Command::Ledger(c) => copy::run(&ctx, c),
        Command::Templates(c) => templates::run(&ctx, c),
        Command::Doctor(_) => Err(anyhow::anyhow!("doctor runs before the context loads")),
    }
}

/// Logs go to stderr (never to the console's screen), filtered by
/// `RUST_LOG`; interactive commands stay quiet unless asked.
fn init_tracing(interactive: bool) {
    use std::io::IsTerminal as _;
    let default = if interactive { "off" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour codes only for a person at a terminal, never in a journal or
    // a log file.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
