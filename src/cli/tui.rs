//! `unavez tui`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use super::Ctx;
use super::background::Background;
use crate::ledger::Ledger;
use crate::store::{Store, StoreError};
use crate::tui::{ConsoleOptions, run};
use unavez_ledger::location::Location;

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
    /// Seconds between re-reads of the ledger when nothing says it changed.
    /// Changes refresh the console at once: on PostgreSQL every change
    /// committed by any process (the ledger announces them), on SQLite
    /// those of the embedded services.
    #[arg(long, value_name = "SECONDS", default_value_t = 2,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub refresh: u64,
}

pub fn tui(ctx: &Ctx, a: TuiArgs) -> anyhow::Result<ExitCode> {
    let identity = ctx
        .identity(a.operator.as_deref(), "console")
        .map_err(|e| super::errors::identity(ctx, &e))?;
    let op = &identity.operator;
    // The process's one handle to the ledger: the console, and the
    // embedded dispatcher if it runs, take their connections from it.
    let ledger = Ledger::from_store(check_ledger(ctx, a.read_only)?);
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
        // "Not verified" only where identity matters: operators are mapped
        // to OS accounts and this account is not the operator's.
        identity_verified: identity.verified || !ctx.config.identity_verified(),
        account: identity.account.clone(),
        read_only: a.read_only,
        refresh: Duration::from_secs(a.refresh),
        dispatcher_running: running,
        dispatcher_stop: error.as_ref().map(|e| stop_cause(ctx, e)),
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
/// so a missing file ("no existe …; créelo con `unavez init`"), an
/// unreachable server, a too-new schema, a damaged or read-only ledger is
/// reported on a plain terminal. It is attached, not migrated: another
/// process holding the write lock (an import, a backup) never keeps the
/// screen blank; the console shows the lock instead. Only a ledger that
/// needs a migration waits for it.
///
/// A read-only console on PostgreSQL gets connections the server keeps
/// read-only (`PgUrl::read_only`): every connection the console takes from
/// this handle, and its change listener, refuses writes at the server, not
/// only in the console's keys. (On SQLite a read-only console hides and
/// refuses every action and starts no dispatcher; the file stays writable
/// so the write-lock probe keeps working.)
fn check_ledger(ctx: &Ctx, read_only: bool) -> anyhow::Result<Store> {
    let location = match &ctx.location {
        Location::Postgres(url) if read_only => Location::Postgres(Box::new(url.read_only())),
        other => other.clone(),
    };
    let store = match Store::attach_location(&location) {
        Ok(store) => store,
        Err(StoreError::SchemaChanged { .. }) if matches!(location, Location::Sqlite(_)) => {
            return ctx.open_serviceable(false);
        }
        // A database without the ledger's tables is refused as a missing
        // file is: a mistyped URL never gets a ledger created by a console.
        Err(StoreError::SchemaChanged { path, found: 0, .. }) => {
            return Err(ctx.ledger_error(StoreError::Missing { path }));
        }
        // Migrated on an ordinary connection (as on SQLite, a console
        // brings the ledger to its version), then attached as asked.
        Err(StoreError::SchemaChanged { .. }) => {
            drop(ctx.open_serviceable(false)?);
            Store::attach_location(&location).map_err(|e| ctx.ledger_error(e))?
        }
        Err(e) => return Err(ctx.ledger_error(e)),
    };
    store.check_serviceable().map_err(|e| ctx.ledger_error(e))?;
    Ok(store)
}

/// Why the embedded dispatcher did not start, typed for the header's words:
/// a channel secret missing from its variable is the common case (the
/// channel says which variable); anything else as the error said it.
fn stop_cause(ctx: &Ctx, error: &str) -> crate::tui::app::StopCause {
    use crate::tui::app::StopCause;
    match crate::channel::from_config(&ctx.config.channel) {
        Err(crate::channel::ChannelError::MissingSecret { var, .. }) => StopCause::MissingKey { var },
        _ => StopCause::Other(error.to_string()),
    }
}
