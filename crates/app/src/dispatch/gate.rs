//! A channel that refuses us (docs/design.md, "A channel that refuses
//! us"): the first answer that says the channel refused *us* — a rejected
//! credential, an engine instance it does not have or has no phone linked
//! to, a failed TLS handshake — pauses sending on that channel. The
//! message it was about stays `planned` (`domain::finish`), so does every
//! other, and nothing is claimed while the channel is paused. Every
//! `[dispatcher] channel_probe_ms` a probe that sends nothing asks the
//! channel again; when it passes, sending resumes by itself.
//!
//! The pause lives on [`Control`], next to the operator's own pause: the
//! heartbeat row, the console's header and `/metrics` read it from there.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use super::control::ChannelHold;
use super::{Control, Settings};
use crate::channel::{Channel, ProbeOutcome, SendOutcome};
use crate::domain::fault::{ChannelFault, ChannelPause};

/// The dispatcher's view of its channel's pause: when to probe next.
pub(crate) struct Gate {
    every: Duration,
    secret_env: Option<String>,
    next_probe: Option<Instant>,
}

impl Gate {
    pub(crate) fn new(settings: &Settings) -> Gate {
        Gate {
            every: settings.channel_probe,
            secret_env: settings.secret_env.clone(),
            next_probe: None,
        }
    }

    /// Whether sending is paused on the channel.
    pub(crate) fn down(&self, ctl: &Control) -> bool {
        ctl.channel_hold().is_some()
    }

    /// Looks at answers about to be recorded: the first refusal of us
    /// pauses the channel (later ones only keep it paused).
    pub(crate) fn note<'a>(&mut self, answers: impl IntoIterator<Item = &'a SendOutcome>, ctl: &Control) {
        for a in answers {
            if let SendOutcome::ChannelDown { fault, detail, .. } = a {
                self.pause(*fault, detail, ctl);
            }
        }
    }

    fn pause(&mut self, fault: ChannelFault, detail: &str, ctl: &Control) {
        let hold = ChannelHold {
            pause: ChannelPause {
                fault,
                secret_env: self.secret_env.clone(),
            },
            since: Utc::now(),
            detail: explain(fault, self.secret_env.as_deref(), detail, Some(self.every)),
        };
        if ctl.channel_down(hold.clone()) {
            tracing::error!("{}", hold.detail);
        }
        if self.next_probe.is_none() {
            self.next_probe = Some(Instant::now() + self.every);
        }
    }

    /// How long until the next probe, while paused.
    pub(crate) fn until_probe(&self, ctl: &Control) -> Option<Duration> {
        if !self.down(ctl) {
            return None;
        }
        Some(
            self.next_probe
                .map_or(Duration::ZERO, |t| t.saturating_duration_since(Instant::now())),
        )
    }

    /// Before a claim: while paused, a one-shot run (`dispatch`,
    /// reprocess) ends once its sends are in (`true`), and `serve` probes
    /// when the probe is due.
    pub(crate) async fn ends_run(
        &mut self,
        channel: &Arc<dyn Channel>,
        ctl: &Control,
        one_shot: bool,
        idle: bool,
    ) -> bool {
        if !self.down(ctl) {
            return false;
        }
        if one_shot {
            return idle;
        }
        self.probe_if_due(channel, ctl).await;
        false
    }

    /// Probes the paused channel when the probe is due: a pass resumes
    /// sending, a refusal keeps it paused until the next probe.
    async fn probe_if_due(&mut self, channel: &Arc<dyn Channel>, ctl: &Control) {
        if !self.down(ctl) || self.next_probe.is_some_and(|t| t > Instant::now()) {
            return;
        }
        self.next_probe = Some(Instant::now() + self.every);
        match channel.probe().await {
            ProbeOutcome::Ok => {
                if ctl.channel_up() {
                    tracing::warn!("the channel takes our requests again: sending resumes");
                }
                self.next_probe = None;
            }
            ProbeOutcome::Down { fault, detail } => {
                tracing::debug!("channel probe: still refused ({fault}): {detail}");
                self.pause(fault, &detail, ctl);
            }
            ProbeOutcome::Unavailable { detail } => {
                tracing::debug!("channel probe: could not tell ({detail}); still paused");
            }
        }
    }
}

/// The paused channel's message (the heartbeat's last error, the log): what
/// refused us, what to check, and that a key fixed in unavez's environment
/// needs a restart (a running process never sees its environment change).
/// `every`: how often `serve` probes; `None` for a one-shot run, which
/// leaves it to the next run.
pub fn explain(fault: ChannelFault, secret_env: Option<&str>, detail: &str, every: Option<Duration>) -> String {
    let var = secret_env.unwrap_or("the channel's secret variable");
    let fix = match fault {
        ChannelFault::CredentialRejected => format!(
            "the channel rejected the credential: check {var}; a key fixed in unavez's environment needs a restart \
             of unavez, a key fixed at the provider is picked up by the next probe"
        ),
        ChannelFault::InstanceUnknown => {
            "the engine has no such instance: check [channel.motor] instance_id, then restart unavez".into()
        }
        ChannelFault::InstanceDisconnected => {
            "the engine instance has no phone linked: link it again in the engine; sending resumes by itself".into()
        }
        ChannelFault::Tls => {
            "the TLS handshake with the channel failed: check its certificate and base_url, then restart unavez".into()
        }
    };
    let next = match every {
        Some(every) => format!("probing every {} s", every.as_secs().max(1)),
        None => "the next run tries again".into(),
    };
    format!("channel paused, nothing is sent and messages stay planned: {fix}; {next} ({detail})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_variable_and_says_restart() {
        let m = explain(
            ChannelFault::CredentialRejected,
            Some("UNAVEZ_MOTOR_API_KEY"),
            "HTTP 401 Unauthorized: no_autorizado",
            Some(Duration::from_secs(60)),
        );
        assert!(
            m.contains("UNAVEZ_MOTOR_API_KEY") && m.contains("restart") && m.contains("60 s"),
            "{m}"
        );
        assert!(m.contains("HTTP 401"), "{m}");
    }
}
