//! The run's webhook server: the real `unavez` server on loopback, taking
//! the engine's events into the ledger while dispatchers are killed.

use std::path::Path;
use std::time::Duration;

use super::backend::Backend;
use super::{ChaosError, PG_HOOK_CALLS, procs};
use crate::store::OpenOptions;

/// The webhook server of the run (engine events → ledger).
pub(super) struct Hooks {
    pub(super) rt: tokio::runtime::Runtime,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<crate::server::ServerHandle>,
}

impl Hooks {
    pub(super) fn start(
        config_path: &Path,
        backend: &Backend,
        listener: std::net::TcpListener,
    ) -> Result<Hooks, ChaosError> {
        let text = std::fs::read_to_string(config_path).map_err(|e| ChaosError::Io(e.to_string()))?;
        let config = crate::config::Config::parse(&text, config_path).map_err(|e| ChaosError::Io(e.to_string()))?;
        let secrets = crate::server::Secrets {
            motor_webhook_secret: Some(procs::WEBHOOK_SECRET.to_string()),
            ..Default::default()
        };
        // Each ledger call of a request holds a connection while it runs on
        // the blocking pool, and goes on running when the engine gives up
        // on the request (5 s) and repeats it. On PostgreSQL, while an
        // import or a claim holds the rows a webhook writes, those calls
        // pile up, each a server process of its own, until the server's
        // `max_connections` (100 by default) is gone for everyone; so at
        // most a few run at once and the rest wait their turn.
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        if backend.is_pg() {
            rt.max_blocking_threads(PG_HOOK_CALLS);
        }
        let rt = rt
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| ChaosError::Io(format!("starting the webhook runtime: {e}")))?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let ledger = unavez::ledger::Ledger::open_location(&backend.location("hooks")?, &OpenOptions::CREATE)?;
        let handle = rt.block_on(async move {
            let listener = listener
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpListener::from_std(listener))
                .map_err(|e| ChaosError::Io(format!("the webhook server's listener: {e}")))?;
            let state =
                crate::server::AppState::on_ledger(config, crate::templates::Templates::embedded(), ledger, secrets);
            crate::server::spawn(state, listener, async move {
                let _ = rx.await;
            })
            .map_err(|e| ChaosError::Io(format!("starting the webhook server: {e}")))
        })?;
        Ok(Hooks {
            rt,
            stop: Some(tx),
            handle: Some(handle),
        })
    }

    pub(super) fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), h.wait()).await });
        }
    }
}
