//! `unavez serve`, `unavez dispatch`, `unavez reprocess`.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

use super::Ctx;
use super::progress::Progress;
use crate::channel::Channel;
use crate::config::{ChannelKind, Config};
use crate::dispatch::heartbeat::Beating;
use crate::dispatch::{self, Control, Db, ServiceState, ServiceStatus, Settings, reprocess};
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;
use crate::domain::text::inert;
use crate::i18n::fill;
use crate::ledger::Ledger;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Print the final report as JSON on shutdown.
    #[arg(long)]
    pub json: bool,
    /// Run only the dispatcher and reconciler, without the HTTP server
    /// (webhooks, booking ingest, metrics) — e.g. a second dispatcher on
    /// the same host.
    #[arg(long)]
    pub no_server: bool,
}

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {
    /// Keep dispatching until nothing is due and nothing is in flight
    /// (default: one claimed batch).
    #[arg(long)]
    pub until_idle: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ReprocessArgs {
    /// Operating day, YYYY-MM-DD in the configured time zone.
    #[arg(long)]
    pub day: OperatingDay,
    /// Only intentions in these states (repeatable); default: all states.
    #[arg(long = "state")]
    pub states: Vec<IntentionState>,
    /// Show what would happen, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Who runs it (an operator in the configuration; with operators
    /// mapped to OS accounts, the account decides and this may be left out).
    #[arg(long)]
    pub operator: Option<String>,
    /// Why (recorded with the operator action).
    #[arg(long)]
    pub reason: String,
    #[arg(long)]
    pub json: bool,
}

/// The channel the configuration names, with its secret read from the
/// environment variable the configuration names.
pub fn channel_from_config(cfg: &Config) -> anyhow::Result<Arc<dyn Channel>> {
    Ok(crate::channel::from_config(&cfg.channel)?)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn check_lease(cfg: &Config) {
    let timeout_ms = match cfg.channel.kind {
        ChannelKind::Motor => cfg.channel.motor.timeout_ms,
        ChannelKind::Cloud => cfg.channel.cloud.timeout_ms,
    };
    if cfg.policy.lease_seconds.saturating_mul(1000) <= timeout_ms {
        tracing::warn!(
            "policy.lease_seconds ({} s) is not longer than the channel timeout ({timeout_ms} ms): \
             slow sends will be reconciled as uncertain",
            cfg.policy.lease_seconds
        );
    }
}

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed when this is
/// called, not when it is first awaited: a SIGTERM that arrives while the
/// services start (their heartbeat already says running) stops them
/// gracefully instead of killing the process. Call it inside the runtime.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

pub fn serve(ctx: &Ctx, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let channel = channel_from_config(&ctx.config)?;
    check_lease(&ctx.config);
    // Open once up front so a bad path or schema, a damaged or read-only
    // ledger fails before we announce; the HTTP server and the services
    // share this one handle.
    let ledger = Ledger::from_store(ctx.open_serviceable(true)?);
    let periodic = periodic_backups(ctx)?;
    let settings = Settings::from_config(&ctx.config);
    let owner = settings.owner.clone();
    eprintln!(
        "unavez serve: dispatcher and reconciler on {} (channel {}, owner {}); Ctrl-C or SIGTERM stops gracefully",
        ctx.location,
        channel.kind(),
        settings.owner
    );
    let rt = runtime()?;
    let report = rt.block_on(async {
        let shutdown = shutdown_signal();
        // The calendar feeds first: a missing URL variable fails the start
        // before anything else runs.
        let feeds = crate::feed::Feeds::start(&ledger, &ctx.config, &ctx.templates, &owner)
            .context("starting the calendar feeds ([[import.feed]])")?;
        // One signal stops everything: the HTTP server, then the services.
        let stop = CancellationToken::new();
        let server = if args.no_server {
            None
        } else {
            let stopped = stop.clone().cancelled_owned();
            let monitor = periodic.as_ref().map(|(_, m)| m.clone());
            let handle = crate::server::start_with_backups(
                ctx.config.clone(),
                ctx.templates.clone(),
                ledger.clone(),
                monitor,
                stopped,
            )
            .await
            .context("starting the HTTP server (webhooks, ingest, metrics); --no-server runs without it")?;
            eprintln!("unavez serve: HTTP server listening on http://{}", handle.addr);
            Some(handle)
        };
        let services = dispatch::Services::start_on(&ledger, settings, channel, Control::new())?;
        // `[backup]`: its own task, stopped by the same signal; a backup in
        // progress is finished before `serve` exits.
        let backups = periodic.map(|(p, monitor)| {
            eprintln!(
                "unavez serve: backups every {} min into {} (keep {})",
                p.every.num_minutes(),
                p.dir.display(),
                p.keep
            );
            tokio::spawn(crate::backup::run_every(
                ctx.location.clone(),
                p,
                monitor,
                stop.clone().cancelled_owned(),
            ))
        });
        if !feeds.names().is_empty() {
            eprintln!(
                "unavez serve: polling {} calendar feed(s): {}",
                feeds.names().len(),
                feeds.names().join(", ")
            );
        }
        shutdown.await;
        stop.cancel();
        feeds.stop().await;
        let report = services.stop().await?;
        if let Some(b) = backups {
            let _ = b.await;
        }
        if let Some(h) = server {
            h.wait().await?;
        }
        Ok::<_, anyhow::Error>(report)
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let d = &report.dispatch;
        let r = &report.reconcile;
        println!(
            "stopped: claimed {}, accepted {}, failed {}, uncertain {}, retried {}, review {}, cancelled {}, deferred {}, not sent (moved before sending) {}, abandoned as uncertain {}",
            d.claimed,
            d.accepted,
            d.failed,
            d.uncertain,
            d.retried,
            d.review,
            d.cancelled,
            d.deferred,
            d.not_sent,
            d.abandoned
        );
        println!("{}", reconciled_line(r));
    }
    Ok(ExitCode::SUCCESS)
}

/// `[backup]` and the monitor `/metrics` reads, or `None` without it.
/// Refused on a PostgreSQL ledger, which unavez does not copy: the error
/// gives the pg_dump command to schedule instead.
fn periodic_backups(ctx: &Ctx) -> anyhow::Result<Option<(crate::config::Periodic, crate::backup::Monitor)>> {
    let Some(p) = ctx.config.backup.periodic() else {
        return Ok(None);
    };
    if let unavez_ledger::location::Location::Postgres(url) = &ctx.location {
        anyhow::bail!(
            "[backup] copies a SQLite ledger; {url} is PostgreSQL: remove [backup] and schedule pg_dump instead: {}",
            crate::backup::pg_dump_command(url, &p.dir, chrono::Utc::now())
        );
    }
    let monitor = crate::backup::Monitor::new(&p, chrono::Utc::now());
    Ok(Some((p, monitor)))
}

pub fn dispatch(ctx: &Ctx, args: DispatchArgs) -> anyhow::Result<ExitCode> {
    let channel = channel_from_config(&ctx.config)?;
    check_lease(&ctx.config);
    let ledger = Ledger::from_store(ctx.open_existing()?);
    let settings = Arc::new(Settings::from_config(&ctx.config));
    let rt = runtime()?;
    let (d, r) = rt.block_on(async {
        let db = Db::session(&ledger)?;
        // A one-shot run is a running dispatcher while it lasts: consoles
        // show it from its heartbeat row, which says stopped at the end.
        let tracker = TaskTracker::new();
        let beating = Beating::start(&ledger, &settings, Control::new(), &tracker)?;
        let out = if args.until_idle {
            dispatch::dispatch_until_idle(db, settings, channel).await
        } else {
            dispatch::dispatch_once(db, settings, channel).await
        };
        let last_error = out.as_ref().err().map(|e| (chrono::Utc::now(), e.to_string()));
        beating
            .stop(ServiceStatus {
                state: ServiceState::Stopped,
                last_error,
                channel: None,
            })
            .await;
        tracker.close();
        tracker.wait().await;
        out
    })?;
    if args.json {
        println!("{}", serde_json::json!({"dispatch": d, "reconcile": r}));
    } else {
        println!(
            "claimed {}, accepted {}, failed {}, uncertain {}, retried {}, review {}, cancelled {}, deferred {}, not sent (moved before sending) {}",
            d.claimed, d.accepted, d.failed, d.uncertain, d.retried, d.review, d.cancelled, d.deferred, d.not_sent
        );
        println!("{}", reconciled_line(&r));
    }
    if let Some(p) = &d.channel_paused {
        // A one-shot run stops at a channel that refuses us: the messages
        // stay planned for the next run, and cron sees the failure.
        eprintln!(
            "unavez dispatch: {}",
            dispatch::gate::explain(p.fault, p.secret_env.as_deref(), "see the attempts' error", None)
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The reconciler's summary line: repeats sent, and those validity refused
/// or the pre-send check stopped (nothing sent for either).
fn reconciled_line(r: &dispatch::ReconcileReport) -> String {
    format!(
        "reconciled: expired leases {}, resolved {}, still waiting {}, review {}, repeats {}, repeats refused by validity {}, repeats stopped before sending {}, orphaned attempts closed {}, status polls {} (moved {})",
        r.expired_leases,
        r.resolved,
        r.waiting,
        r.review,
        r.repeats,
        r.repeats_refused,
        r.repeats_not_sent,
        r.orphans_closed,
        r.polled,
        r.polled_moved
    )
}

pub fn reprocess(ctx: &Ctx, args: ReprocessArgs) -> anyhow::Result<ExitCode> {
    let op = ctx
        .identity(args.operator.as_deref(), crate::ops::OpKind::Reprocess.as_str())
        .map_err(|e| super::errors::identity(ctx, &e))?
        .operator;
    let req = reprocess::Request {
        day: args.day,
        states: args.states.clone(),
        dry_run: args.dry_run,
        operator: op.name.clone(),
        role: Some(op.role),
        reason: args.reason.clone(),
    };
    if req.reason.trim().is_empty() {
        let t = crate::i18n::strings(ctx.config.language);
        let message = fill(t.cli.reason_required, &[("action", t.act_reprocess)]);
        return Err(super::errors::Said::new("reason_required", message, 2).into());
    }
    reprocess::validate(&req)?;
    // The dry run needs no channel; the real run does.
    let channel: Arc<dyn Channel> = if args.dry_run {
        Arc::new(NoChannel)
    } else {
        channel_from_config(&ctx.config)?
    };
    let db = Db::from_store(ctx.open_existing()?);
    let settings = Arc::new(Settings::from_config(&ctx.config));
    let rt = runtime()?;
    // A real run on a terminal shows how far it is (stderr only); the dry
    // run only reads, at once.
    let bar = Progress::start(args.json || args.dry_run, &format!("reprocessing {}", req.day));
    let on_progress = |p: reprocess::Progress| bar.set(p.done, p.total);
    let report = rt.block_on(reprocess::run_with_progress(
        &db,
        &settings,
        &channel,
        &req,
        &on_progress,
    ));
    drop(bar);
    let report = report?;
    if let Some(p) = report.dispatch.as_ref().and_then(|d| d.channel_paused.as_ref()) {
        eprintln!(
            "unavez reprocess: {}",
            dispatch::gate::explain(p.fault, p.secret_env.as_deref(), "see the attempts' error", None)
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_reprocess(ctx, &req, &report);
    Ok(ExitCode::SUCCESS)
}

/// Stands in for a channel in a dry run, which never sends or asks.
struct NoChannel;

impl Channel for NoChannel {
    fn kind(&self) -> &'static str {
        "none"
    }
    fn capabilities(&self) -> crate::channel::Capabilities {
        crate::channel::Capabilities {
            idempotent_keys: false,
            command_lookup: false,
            cancel: false,
        }
    }
    fn send<'a>(
        &'a self,
        _req: &'a crate::channel::SendRequest,
    ) -> crate::channel::async_trait_shim::BoxFuture<'a, crate::channel::SendOutcome> {
        Box::pin(async {
            crate::channel::SendOutcome::Retry {
                detail: "dry run: no channel".into(),
                http_status: None,
                retry_after_secs: None,
            }
        })
    }
    fn lookup<'a>(
        &'a self,
        _req: &'a crate::channel::SendRequest,
        _command_id: Option<&'a str>,
    ) -> crate::channel::async_trait_shim::BoxFuture<'a, crate::channel::LookupOutcome> {
        Box::pin(async {
            crate::channel::LookupOutcome::Unavailable {
                detail: "dry run: no channel".into(),
            }
        })
    }
    fn cancel<'a>(
        &'a self,
        _command_id: &'a str,
    ) -> crate::channel::async_trait_shim::BoxFuture<'a, crate::channel::CancelOutcome> {
        Box::pin(async { crate::channel::CancelOutcome::Unsupported })
    }
    fn probe(&self) -> crate::channel::async_trait_shim::BoxFuture<'_, crate::channel::ProbeOutcome> {
        Box::pin(async {
            crate::channel::ProbeOutcome::Unavailable {
                detail: "dry run: no channel".into(),
            }
        })
    }
}

/// A reprocess run's report in the configured language: what each
/// message was and what was done with it, then the totals.
fn print_reprocess(ctx: &Ctx, req: &reprocess::Request, report: &reprocess::Report) {
    let t = crate::i18n::strings(ctx.config.language);
    let c = t.cli;
    let (now, tz) = (chrono::Utc::now(), ctx.config.tz());
    let states = if report.states.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = report.states.iter().map(|s| t.state(s.as_str())).collect();
        fill(c.reprocess_states, &[("states", &names.join(", "))])
    };
    let day = report.day.to_string();
    let n = report.items.len().to_string();
    let head = if report.dry_run {
        c.reprocess_dry
    } else {
        c.reprocess_done
    };
    println!("{}", fill(head, &[("day", &day), ("n", &n), ("states", &states)]));
    for i in &report.items {
        let result = i
            .result
            .map(|r| fill(c.reprocess_now, &[("state", t.state(r.as_str()))]))
            .unwrap_or_default();
        println!(
            "  #{:<6} {:<40} {:<11} {:<15} {}{result}",
            i.id,
            inert(&i.key),
            t.state(i.state.as_str()),
            t.reprocess_action(i.action),
            inert(&t.reprocess_why(&i.because, now, tz))
        );
    }
    let summary: Vec<String> = report
        .summary
        .iter()
        .map(|(a, n)| format!("{} {n}", t.reprocess_action(*a)))
        .collect();
    let what = if summary.is_empty() {
        c.reprocess_nothing.to_string()
    } else {
        summary.join(", ")
    };
    println!("{}", fill(c.reprocess_summary, &[("what", &what)]));
    match report.operator_action_id {
        Some(id) => println!(
            "{}",
            fill(
                c.reprocess_recorded,
                &[
                    ("id", &id.to_string()),
                    ("operator", &inert(&req.operator)),
                    ("role", req.role.map(|r| t.role(r)).unwrap_or_default()),
                ],
            )
        ),
        None => println!("{}", c.reprocess_unchanged),
    }
}
