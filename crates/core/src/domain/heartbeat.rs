//! Dispatchers announce themselves: every running dispatcher (in `serve`,
//! `dispatch`, a console, the demo) keeps one heartbeat row in the ledger,
//! and whoever reads those rows decides here whether each one is alive.
//!
//! The ledger stores and returns rows; the decision "is it alive?" lives
//! here so a console, `/metrics` and (later) a PostgreSQL ledger shared by
//! several hosts all answer it the same way (docs/design.md,
//! "Observability").

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::fault::ChannelPause;

/// What a dispatcher says it is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatcherState {
    /// Claiming and sending.
    Running,
    /// No new claims; in-flight sends finish, reconciliation continues.
    Paused,
    /// Shut down cleanly (or its dispatch task ended on an error).
    Stopped,
}

impl DispatcherState {
    pub const ALL: [DispatcherState; 3] = [
        DispatcherState::Running,
        DispatcherState::Paused,
        DispatcherState::Stopped,
    ];

    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            DispatcherState::Running => "running",
            DispatcherState::Paused => "paused",
            DispatcherState::Stopped => "stopped",
        }
    }
}

impl fmt::Display for DispatcherState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored state that is none of [`DispatcherState::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dispatcher state {0:?}")]
pub struct UnknownDispatcherState(pub String);

impl FromStr for DispatcherState {
    type Err = UnknownDispatcherState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DispatcherState::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| UnknownDispatcherState(s.to_string()))
    }
}

/// How often a dispatcher beats by default. Three missed beats and it
/// counts as gone.
pub const DEFAULT_INTERVAL: Duration = Duration::seconds(5);

/// Beats a dispatcher may miss before it counts as gone (crashed, killed,
/// its host unplugged): one late beat is a busy disk, three are a death.
pub const MISSED_BEATS: i32 = 3;

/// One dispatcher run as its heartbeat row tells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Heartbeat {
    /// Unique per process run (also the lease owner of its claims).
    pub id: String,
    pub host: String,
    pub pid: u32,
    /// Who runs it: the console's operator, else the OS account, when known.
    pub owner: Option<String>,
    pub state: DispatcherState,
    /// The last error it survived (or died of), and when.
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    pub started_at: DateTime<Utc>,
    pub beat_at: DateTime<Utc>,
    /// How often it promised to beat: the reader judges it by its own
    /// promise, not by the reader's configuration.
    pub interval: Duration,
    /// Its channel refused it and it paused sending on it (`None`: the
    /// channel works, as far as it knows): stored as `channel_state`
    /// `paused` with the fault's code (docs/design.md, "A channel that
    /// refuses us").
    pub channel: Option<ChannelPause>,
    /// The channel instance it sends through (`motor/<instance_id>`,
    /// `cloud/<phone_number_id>`); `None` on rows written before it was
    /// recorded.
    pub channel_instance: Option<String>,
}

/// Whether a heartbeat row stands for a dispatcher that is working now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Beating, in this state (running or paused).
    Alive(DispatcherState),
    /// Said goodbye: a clean shutdown.
    Stopped,
    /// Stopped beating without a goodbye: crashed or killed.
    Gone,
}

impl Heartbeat {
    /// Alive while its last beat is younger than [`MISSED_BEATS`] of its
    /// own intervals. A beat from the future (another host's clock ahead)
    /// counts as fresh: only a missing beat makes a dispatcher gone.
    pub fn liveness(&self, now: DateTime<Utc>) -> Liveness {
        if self.state == DispatcherState::Stopped {
            return Liveness::Stopped;
        }
        let window = self.interval.max(Duration::seconds(1)) * MISSED_BEATS;
        if now - self.beat_at > window {
            Liveness::Gone
        } else {
            Liveness::Alive(self.state)
        }
    }
}

/// The live dispatchers among `beats`, the most recent beat first, leaving
/// out `own` (the reader's own run, which it knows better than its row).
pub fn live<'a>(beats: &'a [Heartbeat], own: Option<&str>, now: DateTime<Utc>) -> Vec<&'a Heartbeat> {
    let mut out: Vec<&Heartbeat> = beats
        .iter()
        .filter(|b| Some(b.id.as_str()) != own)
        .filter(|b| matches!(b.liveness(now), Liveness::Alive(_)))
        .collect();
    out.sort_by(|a, b| b.beat_at.cmp(&a.beat_at).then_with(|| a.id.cmp(&b.id)));
    out
}

/// The channels live dispatchers paused, once per fault and variable: what
/// the `channel_paused` alert counts and names.
pub fn paused_channels(beats: &[Heartbeat], now: DateTime<Utc>) -> Vec<ChannelPause> {
    let mut out: Vec<ChannelPause> = Vec::new();
    for b in beats {
        if let (Liveness::Alive(_), Some(p)) = (b.liveness(now), &b.channel)
            && !out.contains(p)
        {
            out.push(p.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).unwrap()
    }

    fn beat(id: &str, state: DispatcherState, ago_s: i64) -> Heartbeat {
        Heartbeat {
            id: id.into(),
            host: "recepcion-1".into(),
            pid: 42,
            owner: None,
            state,
            last_error: None,
            last_error_at: None,
            started_at: now() - Duration::hours(1),
            beat_at: now() - Duration::seconds(ago_s),
            interval: DEFAULT_INTERVAL,
            channel: None,
            channel_instance: None,
        }
    }

    #[test]
    fn only_live_dispatchers_report_their_paused_channel_once() {
        use super::super::fault::ChannelFault;
        let pause = ChannelPause {
            fault: ChannelFault::CredentialRejected,
            secret_env: Some("UNAVEZ_MOTOR_API_KEY".into()),
        };
        let paused = |id, ago| Heartbeat {
            channel: Some(pause.clone()),
            ..beat(id, DispatcherState::Running, ago)
        };
        let beats = vec![
            paused("a", 0),
            paused("b", 1),
            paused("dead", 60),
            beat("ok", DispatcherState::Running, 0),
        ];
        assert_eq!(paused_channels(&beats, now()), vec![pause.clone()]);
        assert!(paused_channels(&beats[2..], now()).is_empty());
    }

    #[test]
    fn states_round_trip_as_text() {
        for s in DispatcherState::ALL {
            assert_eq!(s.as_str().parse::<DispatcherState>(), Ok(s));
        }
        assert!("dancing".parse::<DispatcherState>().is_err());
    }

    #[test]
    fn three_missed_beats_make_a_dispatcher_gone() {
        use DispatcherState::*;
        assert_eq!(beat("a", Running, 0).liveness(now()), Liveness::Alive(Running));
        assert_eq!(beat("a", Paused, 14).liveness(now()), Liveness::Alive(Paused));
        // The edge is inclusive: exactly three intervals is still alive.
        assert_eq!(beat("a", Running, 15).liveness(now()), Liveness::Alive(Running));
        assert_eq!(beat("a", Running, 16).liveness(now()), Liveness::Gone);
        assert_eq!(beat("a", Stopped, 0).liveness(now()), Liveness::Stopped);
        // A clock ahead of ours is not a death.
        assert_eq!(beat("a", Running, -30).liveness(now()), Liveness::Alive(Running));
    }

    #[test]
    fn each_row_is_judged_by_its_own_interval() {
        let mut slow = beat("slow", DispatcherState::Running, 50);
        slow.interval = Duration::seconds(20);
        assert_eq!(slow.liveness(now()), Liveness::Alive(DispatcherState::Running));
        slow.interval = Duration::zero();
        // A zero interval in a row still gets a window (one second each).
        assert_eq!(slow.liveness(now()), Liveness::Gone);
    }

    #[test]
    fn live_leaves_out_the_reader_the_dead_and_the_stopped() {
        use DispatcherState::*;
        let beats = vec![
            beat("old", Running, 4),
            beat("own", Running, 0),
            beat("new", Paused, 1),
            beat("dead", Running, 60),
            beat("bye", Stopped, 0),
        ];
        let ids: Vec<&str> = live(&beats, Some("own"), now()).iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["new", "old"]);
        assert_eq!(live(&beats, None, now()).len(), 3);
    }
}
