//! `unavez sim`: the WhatsApp engine simulator as a process; with
//! `--cloud`, the fake Cloud API (sends, the phone number's profile and the
//! account's message templates).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use super::Ctx;
use crate::sim::{self, DEV_WEBHOOK_SECRET, FaultSpec, SimOptions, SimTiming};

/// Env var with the only accepted bearer key (any non-empty one if unset).
const API_KEY_ENV: &str = "UNAVEZ_MOTOR_API_KEY";
/// Env var with the only accepted Cloud API token under `--cloud`.
const CLOUD_TOKEN_ENV: &str = "UNAVEZ_CLOUD_TOKEN";
/// Env var with the webhook signing secret.
const WEBHOOK_SECRET_ENV: &str = "UNAVEZ_MOTOR_WEBHOOK_SECRET";

#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Address to listen on (port 0 picks a free one; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8088")]
    pub listen: SocketAddr,
    /// Seed for every fault decision: the same seed and traffic give the same faults.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Faults, e.g. `timeout_after=0.3,error5xx=0.1,latency_ms=5..50` (see docs/reference/simulator.md).
    #[arg(long, default_value = "")]
    pub faults: String,
    /// Append one JSON line per message that actually went out (ground truth).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// POST signed engine events here.
    #[arg(long)]
    pub webhook: Option<String>,
    /// Journal of the engine's memory; a restart with the same file keeps every key.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// An instance this engine has (repeat the flag for more). Without it
    /// any instance id is one; with it, others get `404 instancia_desconocida`.
    #[arg(long = "instance")]
    pub instances: Vec<String>,
    /// Milliseconds from `en_cola` to `enviado`.
    #[arg(long, default_value_t = SimTiming::default().send_ms)]
    pub send_ms: u64,
    /// Milliseconds from `enviado` to `entregado`.
    #[arg(long, default_value_t = SimTiming::default().deliver_ms)]
    pub deliver_ms: u64,
    /// Milliseconds from `entregado` to `leido`.
    #[arg(long, default_value_t = SimTiming::default().read_ms)]
    pub read_ms: u64,
    /// Milliseconds until an `ambiguo` command is resolved.
    #[arg(long, default_value_t = SimTiming::default().resolve_ms)]
    pub resolve_ms: u64,
    /// Act as the WhatsApp Cloud API instead of the engine: messages, the
    /// phone number's profile and the account's message templates. Only
    /// the token in UNAVEZ_CLOUD_TOKEN is accepted when it is set (any
    /// other gets Graph error 190).
    #[arg(long)]
    pub cloud: bool,
    /// With --cloud: the account's templates, a JSON array of template
    /// objects in Meta's shape (default: the embedded templates, approved,
    /// plus a rejected, a paused and a named-parameter one).
    #[arg(long, requires = "cloud")]
    pub cloud_templates: Option<PathBuf>,
    /// With --cloud: templates per page when a request gives no `limit`.
    #[arg(long, requires = "cloud", default_value_t = sim::cloud_graph::DEFAULT_PAGE)]
    pub page_size: usize,
}

pub fn run(_ctx: &Ctx, args: SimArgs) -> anyhow::Result<ExitCode> {
    if args.cloud {
        return run_cloud(args);
    }
    let faults = FaultSpec::parse(&args.faults).context("--faults")?;
    let api_key = std::env::var(API_KEY_ENV).ok().filter(|s| !s.trim().is_empty());
    let webhook_secret = match std::env::var(WEBHOOK_SECRET_ENV) {
        Ok(s) if !s.trim().is_empty() => s.into_bytes(),
        _ => {
            if args.webhook.is_some() {
                eprintln!("sim: {WEBHOOK_SECRET_ENV} is not set; signing webhooks with the development secret");
            }
            DEV_WEBHOOK_SECRET.as_bytes().to_vec()
        }
    };
    let opts = SimOptions {
        listen: args.listen,
        seed: args.seed,
        faults,
        log: args.log,
        webhook: args.webhook,
        webhook_secret,
        api_key,
        instances: (!args.instances.is_empty()).then_some(args.instances),
        state: args.state,
        timing: SimTiming {
            send_ms: args.send_ms,
            deliver_ms: args.deliver_ms,
            read_ms: args.read_ms,
            resolve_ms: args.resolve_ms,
        },
    };
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(async move {
        let faults = opts.faults.to_string();
        let key_note = if opts.api_key.is_some() {
            "only the key in UNAVEZ_MOTOR_API_KEY"
        } else {
            "any bearer key"
        };
        let stop = stop_signal()?;
        let handle = sim::spawn(opts).await?;
        // The first stdout line is machine-readable for scripts and tests.
        println!("listening on {}", handle.addr());
        eprintln!("sim: accepting {key_note}; faults: {faults}");
        stop.await;
        eprintln!("sim: stopping");
        handle.shutdown().await;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `unavez sim --cloud`: the fake Cloud API until stopped.
fn run_cloud(args: SimArgs) -> anyhow::Result<ExitCode> {
    use sim::cloud_fake::{CloudFake, CloudFakeOptions};
    let token = std::env::var(CLOUD_TOKEN_ENV).ok().filter(|s| !s.trim().is_empty());
    let mut opts = CloudFakeOptions {
        listen: args.listen,
        log: args.log,
        token,
        page_size: args.page_size.max(1),
        ..CloudFakeOptions::default()
    };
    if let Some(p) = &args.cloud_templates {
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        opts.templates = serde_json::from_str::<Vec<serde_json::Value>>(&text)
            .with_context(|| format!("{}: expected a JSON array of templates in Meta's shape", p.display()))?;
    }
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(async move {
        let key_note = if opts.token.is_some() {
            "only the token in UNAVEZ_CLOUD_TOKEN"
        } else {
            "any bearer token"
        };
        let count = opts.templates.len();
        let stop = stop_signal()?;
        let fake = CloudFake::spawn(opts).await?;
        println!("listening on {}", fake.addr());
        eprintln!("sim: Cloud API; accepting {key_note}; {count} template(s)");
        stop.await;
        eprintln!("sim: stopping");
        fake.shutdown().await;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C, or SIGTERM on Unix (how service managers and test harnesses
/// stop it). Handlers are installed when this is called, so call it before
/// announcing the address: a signal right after the announcement is caught.
fn stop_signal() -> anyhow::Result<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        Ok(Box::pin(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }))
    }
    #[cfg(not(unix))]
    {
        Ok(Box::pin(async {
            let _ = tokio::signal::ctrl_c().await;
        }))
    }
}
