//! `[alerts]`: when an accumulation becomes an alert (the console's banner,
//! `unavez_alert{kind}` on `/metrics`). The decision is
//! `domain::alert::evaluate`; this is only its thresholds, with defaults
//! for a clinic of a few hundred appointments a day.

use chrono::Duration;
use serde::{Deserialize, Serialize};

use crate::domain::alert::Thresholds;

/// `[alerts]`. Every count or age at or above its threshold is an alert;
/// `0` turns one off. A template WhatsApp blocked is always an alert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlertsConfig {
    /// Minutes since the oldest uncertain send became uncertain. The
    /// engine's reconciliation settles one in minutes, and a Cloud API send
    /// goes to review after `policy.uncertain_review_minutes`: one this old
    /// means reconciliation is stuck.
    pub oldest_uncertain_minutes: u32,
    /// Messages in review that no one marked handled.
    pub review: u32,
    /// Messages due (past any retry or quiet-hours wait) for longer than
    /// `due_grace_minutes` and still not sent: no dispatcher is running, or
    /// it cannot keep up.
    pub due_unsent: u32,
    /// How long a due message may wait for a dispatcher before it counts.
    pub due_grace_minutes: u32,
    /// Booking events refused as conflicts that no newer version settled
    /// and no one marked handled.
    pub refused_events: u32,
    /// Minutes a calendar feed (`[[import.feed]]`) may keep failing
    /// before it is an alert: the agenda unavez sees is getting old.
    pub feed_stale_minutes: u32,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        AlertsConfig {
            oldest_uncertain_minutes: 20,
            review: 10,
            due_unsent: 5,
            due_grace_minutes: 10,
            refused_events: 1,
            feed_stale_minutes: 30,
        }
    }
}

impl AlertsConfig {
    /// The thresholds the alert rule compares with.
    pub fn thresholds(&self) -> Thresholds {
        let on = |v: u32| (v > 0).then_some(i64::from(v));
        Thresholds {
            oldest_uncertain: on(self.oldest_uncertain_minutes).map(Duration::minutes),
            review: on(self.review),
            due_unsent: on(self.due_unsent),
            due_grace: Duration::minutes(i64::from(self.due_grace_minutes)),
            refused_events: on(self.refused_events),
            feed_stale: on(self.feed_stale_minutes).map(Duration::minutes),
        }
    }

    /// `(field, message)` of the first bad setting.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.due_grace_minutes == 0 {
            return Err((
                "due_grace_minutes",
                "must be at least 1: a message due this very instant is not late yet".into(),
            ));
        }
        if self.feed_stale_minutes > 7 * 24 * 60 {
            return Err((
                "feed_stale_minutes",
                format!("must be at most 10080 (a week), got {}", self.feed_stale_minutes),
            ));
        }
        // A week: beyond it the alert would only ever fire after the fact.
        if self.oldest_uncertain_minutes > 7 * 24 * 60 || self.due_grace_minutes > 7 * 24 * 60 {
            return Err((
                "oldest_uncertain_minutes",
                "oldest_uncertain_minutes and due_grace_minutes must be at most 10080 (a week)".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    #[test]
    fn the_section_is_read_checked_and_turned_into_thresholds() {
        let cfg = Config::parse(
            "[alerts]\noldest_uncertain_minutes = 0\nreview = 3\ndue_grace_minutes = 5\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let t = cfg.alerts.thresholds();
        assert_eq!(t.oldest_uncertain, None);
        assert_eq!((t.review, t.due_unsent, t.refused_events), (Some(3), Some(5), Some(1)));
        assert_eq!(t.due_grace, Duration::minutes(5));
        let d = Config::default().alerts.thresholds();
        assert_eq!(d.oldest_uncertain, Some(Duration::minutes(20)));
        for (bad, want) in [
            ("due_grace_minutes = 0", "alerts.due_grace_minutes"),
            ("oldest_uncertain_minutes = 20000", "alerts.oldest_uncertain_minutes"),
            ("review = -1", "c.toml:2:"),
            ("colour = 1", "colour"),
        ] {
            let e = Config::parse(&format!("[alerts]\n{bad}\n"), Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
