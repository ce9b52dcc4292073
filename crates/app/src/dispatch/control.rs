//! What the console (or any embedder) can see and switch on the running
//! background services: pause/resume dispatch, a status snapshot, and a
//! cheap "the ledger changed" signal.
//!
//! Pausing stops **new claims** only. Sends already in flight finish and
//! their results are recorded (abandoning them would turn them into
//! `uncertain` for no reason), and the reconciler keeps resolving evidence:
//! settling an outcome that is already out there is not a new message, and
//! an operator who pauses because something looks wrong wants the picture
//! to keep getting clearer, not to freeze. A repeat the reconciler sends to
//! an idempotent channel carries the original command's key, so the engine
//! answers with the command it already has instead of sending again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::watch;

use crate::domain::fault::ChannelPause;

/// A counter bumped after each committed batch of results (dispatcher,
/// reconciler, webhook server). Readers only learn "something changed":
/// they re-read the ledger, so a missed or coalesced bump costs nothing.
#[derive(Clone)]
pub struct Activity(Arc<watch::Sender<u64>>);

impl Default for Activity {
    fn default() -> Self {
        Activity::new()
    }
}

impl Activity {
    pub fn new() -> Activity {
        Activity(Arc::new(watch::channel(0).0))
    }

    /// Notes one committed change.
    pub fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver whose `has_changed` turns true after the next bump.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// Whether the services are dispatching: the domain's typed state, the
/// same one the heartbeat rows store.
pub use crate::domain::heartbeat::DispatcherState as ServiceState;

/// A snapshot for the console's header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceStatus {
    pub state: ServiceState,
    /// The last error a service survived (or died of), and when.
    pub last_error: Option<(DateTime<Utc>, String)>,
    /// The channel refused us and sending on it is paused until a probe
    /// passes (docs/design.md, "A channel that refuses us").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelHold>,
}

/// A channel paused because it refused us: why, since when, and what the
/// channel said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChannelHold {
    pub pause: ChannelPause,
    pub since: DateTime<Utc>,
    pub detail: String,
}

struct Shared {
    paused: watch::Sender<bool>,
    /// Bumped on every change of state or last error: the heartbeat writes
    /// its row at once instead of waiting for its next beat.
    changes: watch::Sender<u64>,
    stopped: AtomicBool,
    last_error: Mutex<Option<(DateTime<Utc>, String)>>,
    /// Sending paused because the channel refused us; claims wait for it
    /// to clear as they wait for `paused`.
    channel: watch::Sender<Option<ChannelHold>>,
    activity: Activity,
    /// The run's heartbeat id, once services run under this control: a
    /// console leaves its own row out of the others it shows.
    run_id: Mutex<Option<String>>,
}

/// A cheap, cloneable handle on running [`super::Services`].
#[derive(Clone)]
pub struct Control(Arc<Shared>);

impl Default for Control {
    fn default() -> Self {
        Control::new()
    }
}

impl Control {
    /// Running, with its own activity counter.
    pub fn new() -> Control {
        Control::with_activity(Activity::new())
    }

    /// Running, bumping `activity` (shared with e.g. the webhook server).
    pub fn with_activity(activity: Activity) -> Control {
        Control(Arc::new(Shared {
            paused: watch::channel(false).0,
            changes: watch::channel(0).0,
            stopped: AtomicBool::new(false),
            last_error: Mutex::new(None),
            channel: watch::channel(None).0,
            activity,
            run_id: Mutex::new(None),
        }))
    }

    /// Stops new claims. Returns whether the state changed.
    pub fn pause(&self) -> bool {
        let changed = self.0.paused.send_if_modified(|p| !std::mem::replace(p, true));
        self.changed(changed)
    }

    /// Claims again. Returns whether the state changed.
    pub fn resume(&self) -> bool {
        let changed = self.0.paused.send_if_modified(|p| std::mem::replace(p, false));
        self.changed(changed)
    }

    fn changed(&self, changed: bool) -> bool {
        if changed {
            self.0.changes.send_modify(|n| *n = n.wrapping_add(1));
        }
        changed
    }

    /// A receiver that sees every change of state or last error.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.0.changes.subscribe()
    }

    pub fn is_paused(&self) -> bool {
        *self.0.paused.borrow()
    }

    pub fn status(&self) -> ServiceStatus {
        let state = if self.0.stopped.load(Ordering::Acquire) {
            ServiceState::Stopped
        } else if self.is_paused() {
            ServiceState::Paused
        } else {
            ServiceState::Running
        };
        let last_error = self.0.last_error.lock().map(|e| e.clone()).unwrap_or(None);
        ServiceStatus {
            state,
            last_error,
            channel: self.channel_hold(),
        }
    }

    /// The channel's pause, while it refuses us.
    pub fn channel_hold(&self) -> Option<ChannelHold> {
        self.0.channel.borrow().clone()
    }

    /// Pauses sending on the channel (or updates why); the first pause is
    /// also the last error. Returns whether it was running before.
    pub(crate) fn channel_down(&self, hold: ChannelHold) -> bool {
        let was_up = self.0.channel.borrow().is_none();
        let changed = self.0.channel.send_if_modified(|h| match h {
            Some(old) if old.pause == hold.pause && old.detail == hold.detail => false,
            _ => {
                *h = Some(ChannelHold {
                    since: h.as_ref().map_or(hold.since, |o| o.since),
                    ..hold.clone()
                });
                true
            }
        });
        if was_up {
            self.error(&hold.detail);
        } else {
            self.changed(changed);
        }
        was_up
    }

    /// The probe passed: sending resumes. Returns whether it was paused.
    pub(crate) fn channel_up(&self) -> bool {
        let changed = self.0.channel.send_if_modified(|h| h.take().is_some());
        self.changed(changed)
    }

    /// The heartbeat id of the services this control drives (`None`
    /// before they start).
    pub fn run_id(&self) -> Option<String> {
        self.0.run_id.lock().map(|g| g.clone()).unwrap_or(None)
    }

    pub(crate) fn set_run_id(&self, id: &str) {
        if let Ok(mut g) = self.0.run_id.lock() {
            *g = Some(id.to_string());
        }
    }

    /// The activity counter the services bump.
    pub fn activity(&self) -> &Activity {
        &self.0.activity
    }

    pub(crate) fn paused_rx(&self) -> watch::Receiver<bool> {
        self.0.paused.subscribe()
    }

    pub(crate) fn bump(&self) {
        self.0.activity.bump();
    }

    pub(crate) fn error(&self, e: &dyn std::fmt::Display) {
        if let Ok(mut g) = self.0.last_error.lock() {
            *g = Some((Utc::now(), e.to_string()));
        }
        self.changed(true);
    }

    pub(crate) fn set_stopped(&self) {
        let was = self.0.stopped.swap(true, Ordering::AcqRel);
        self.changed(!was);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_and_resume_report_changes_and_status() {
        let c = Control::new();
        assert_eq!(c.status().state, ServiceState::Running);
        assert!(c.pause());
        assert!(!c.pause());
        assert_eq!(c.status().state, ServiceState::Paused);
        assert!(c.resume());
        assert!(!c.resume());
        let mut changes = c.changes();
        c.error(&"boom");
        c.set_stopped();
        assert!(changes.has_changed().unwrap());
        assert_eq!(*changes.borrow_and_update(), 4);
        let s = c.status();
        assert_eq!(s.state, ServiceState::Stopped);
        assert_eq!(s.last_error.map(|e| e.1).as_deref(), Some("boom"));
    }

    #[test]
    fn a_channel_pause_is_part_of_the_status_until_it_clears() {
        use crate::domain::fault::ChannelFault;
        let c = Control::new();
        let hold = |detail: &str| ChannelHold {
            pause: ChannelPause {
                fault: ChannelFault::CredentialRejected,
                secret_env: Some("UNAVEZ_MOTOR_API_KEY".into()),
            },
            since: Utc::now(),
            detail: detail.into(),
        };
        let mut changes = c.changes();
        assert!(c.channel_down(hold("HTTP 401")));
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        let first = c.status().channel.unwrap();
        // The same refusal again changes nothing and keeps its start.
        assert!(!c.channel_down(hold("HTTP 401")));
        assert!(!changes.has_changed().unwrap());
        assert_eq!(c.status().channel.unwrap().since, first.since);
        assert_eq!(c.status().last_error.unwrap().1, "HTTP 401");
        // The operator's pause is another switch.
        assert_eq!(c.status().state, ServiceState::Running);
        assert!(c.channel_up());
        assert!(!c.channel_up());
        assert_eq!(c.status().channel, None);
    }

    #[test]
    fn a_bump_is_seen_by_subscribers() {
        let a = Activity::new();
        let mut rx = a.subscribe();
        assert!(!rx.has_changed().unwrap());
        a.bump();
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        assert!(!rx.has_changed().unwrap());
    }
}
