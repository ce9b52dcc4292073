//! The background services the console embeds: the dispatcher and the
//! reconciler of [`crate::dispatch`] (the same code as `unavez serve`), and
//! for `unavez demo` the engine simulator of [`crate::sim`] and the webhook
//! server of [`crate::server`], in-process.
//!
//! They run on their own tokio runtime; the console's render loop stays a
//! plain thread and only reads their effects from the ledger.

use std::sync::Arc;
use tokio_util::sync::CancellationToken;

use crate::channel::Channel;
use crate::channel::motor::MotorChannel;
use crate::config::Config;
use crate::dispatch::{Activity, Control, DispatchError, ServiceReport, Services, Settings};
use crate::ledger::Ledger;
use crate::server::{self, ServerHandle};
use crate::sim::{self, DEV_WEBHOOK_SECRET, FaultSpec, SimHandle, SimOptions, SimStats};
use crate::templates::Templates;

/// Faults of the demo engine: timeouts after processing, 5xx, resets,
/// ambiguous commands and reordered, duplicated webhooks.
pub const DEMO_FAULTS: &str = "timeout_after=0.12,error5xx=0.1,reset=0.03,ambiguous=0.04,latency_ms=20..200,hold_ms=4000,webhook_dup=0.2,webhook_reorder=true";

#[derive(Debug, thiserror::Error)]
pub enum BackgroundError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("engine simulator: {0}")]
    Sim(String),
    #[error("channel: {0}")]
    Channel(String),
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
}

/// Running background services; [`Background::stop`] shuts them down
/// gracefully (sends in flight are waited for, unknown ones recorded as
/// uncertain).
pub struct Background {
    rt: tokio::runtime::Runtime,
    services: Option<Services>,
    sim: Option<SimHandle>,
    /// The demo's webhook server and the switch that stops it.
    server: Option<(ServerHandle, CancellationToken)>,
    pub channel: Arc<dyn Channel>,
    control: Control,
}

fn runtime() -> Result<tokio::runtime::Runtime, BackgroundError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("unavez-background")
        .build()
        .map_err(BackgroundError::Runtime)
}

impl Background {
    /// The dispatcher and reconciler against the configured channel;
    /// `operator`, the console's, is named on the dispatcher's heartbeat
    /// row.
    pub fn start(ledger: &Ledger, config: &Config, operator: Option<&str>) -> Result<Background, BackgroundError> {
        let channel =
            crate::channel::from_config(&config.channel).map_err(|e| BackgroundError::Channel(e.to_string()))?;
        let rt = runtime()?;
        let mut settings = Settings::from_config(config);
        if let Some(op) = operator {
            settings.run_by = Some(op.to_string());
        }
        Background::launch(rt, ledger, settings, channel, Control::new(), None, None)
    }

    /// The demo: an in-process engine simulator with faults on, and the
    /// dispatcher and reconciler sending to it. `config`'s engine section
    /// is pointed at the simulator.
    pub fn start_demo(
        ledger: &Ledger,
        config: &mut Config,
        templates: &Templates,
        seed: u64,
    ) -> Result<Background, BackgroundError> {
        let rt = runtime()?;
        // The webhook server first: the simulator posts its signed status
        // events (duplicated and reordered by the faults) to it.
        let stop = CancellationToken::new();
        // One activity counter for the webhook server and the services: the
        // console refreshes when either commits something.
        let activity = Activity::new();
        let server_activity = activity.clone();
        let server = rt
            .block_on(async {
                let listener = server::bind("127.0.0.1:0").await?;
                let secrets = server::Secrets {
                    motor_webhook_secret: Some(DEV_WEBHOOK_SECRET.into()),
                    ..Default::default()
                };
                let state = server::AppState::on_ledger(config.clone(), templates.clone(), ledger.clone(), secrets);
                server::spawn_notifying(state, listener, stop.clone().cancelled_owned(), Some(server_activity))
            })
            .map_err(|e| BackgroundError::Sim(format!("webhook server: {e}")))?;
        let faults = FaultSpec::parse(DEMO_FAULTS).map_err(|e| BackgroundError::Sim(e.to_string()))?;
        let webhook = format!("http://{}/webhooks/motor", server.addr);
        let sim = rt
            .block_on(sim::spawn(SimOptions {
                seed,
                faults,
                webhook: Some(webhook),
                webhook_secret: DEV_WEBHOOK_SECRET.as_bytes().to_vec(),
                ..SimOptions::default()
            }))
            .map_err(|e| BackgroundError::Sim(e.to_string()))?;
        config.channel.kind = crate::config::ChannelKind::Motor;
        config.channel.motor.base_url = sim.base_url();
        // Shorter than the simulator's hold, so a held response becomes an
        // uncertain send the newcomer can watch being reconciled.
        config.channel.motor.timeout_ms = 1_500;
        let channel: Arc<dyn Channel> = Arc::new(
            MotorChannel::with_api_key(&config.channel.motor, "demo")
                .map_err(|e| BackgroundError::Channel(e.to_string()))?,
        );
        let settings = Settings::from_config(config);
        let control = Control::with_activity(activity);
        Background::launch(rt, ledger, settings, channel, control, Some(sim), Some((server, stop)))
    }

    /// Starts the dispatcher and reconciler on `rt` (they spawn onto the
    /// runtime they are started in) and keeps them with what else runs:
    /// the demo's simulator and webhook server.
    fn launch(
        rt: tokio::runtime::Runtime,
        ledger: &Ledger,
        settings: Settings,
        channel: Arc<dyn Channel>,
        control: Control,
        sim: Option<SimHandle>,
        server: Option<(ServerHandle, CancellationToken)>,
    ) -> Result<Background, BackgroundError> {
        let services = {
            let _enter = rt.enter();
            Services::start_on(ledger, settings, channel.clone(), control.clone())?
        };
        Ok(Background {
            rt,
            services: Some(services),
            sim,
            server,
            channel,
            control,
        })
    }

    /// Pause/resume, status and activity of the embedded services.
    /// The runtime the services (and their channel's HTTP client) run on,
    /// for the console's own async work.
    pub fn handle(&self) -> tokio::runtime::Handle {
        self.rt.handle().clone()
    }

    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// The simulator's counters (demo only).
    pub fn sim_stats(&self) -> Option<SimStats> {
        self.sim.as_ref().map(|s| s.stats())
    }

    /// Graceful stop of everything; returns what the services did.
    pub fn stop(mut self) -> Result<ServiceReport, BackgroundError> {
        let report = match self.services.take() {
            Some(s) => self.rt.block_on(s.stop())?,
            None => ServiceReport::default(),
        };
        if let Some(sim) = self.sim.take() {
            self.rt.block_on(sim.shutdown());
        }
        if let Some((server, stop)) = self.server.take() {
            stop.cancel();
            let _ = self.rt.block_on(server.wait());
        }
        Ok(report)
    }
}
