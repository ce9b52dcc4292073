//! `unavez sim`: the WhatsApp engine simulator as a process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use super::Ctx;
use crate::sim::{self, DEV_WEBHOOK_SECRET, FaultSpec, SimOptions, SimTiming};

/// Env var with the only accepted bearer key (any non-empty one if unset).
const API_KEY_ENV: &str = "UNAVEZ_MOTOR_API_KEY";
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
}

pub fn run(_ctx: &Ctx, args: SimArgs) -> anyhow::Result<ExitCode> {
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
