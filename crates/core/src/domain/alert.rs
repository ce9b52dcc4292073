//! Alerts on accumulation (seed 001: "Establece alertas por acumulación"):
//! what is measured, and when a measure has crossed its threshold.
//!
//! The ledger measures everything in one read; this module decides,
//! purely, which thresholds are crossed. The console's header banner,
//! `/metrics` (`unavez_alert{kind}`) and the Prometheus rules shipped in
//! `assets/prometheus-alerts.yml` all read the same [`Reading`]s, so they
//! can not disagree about whether something is wrong.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::backup::BackupMeasure;
use super::fault::ChannelPause;

/// One thing that can pile up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// Seconds since the oldest `uncertain` intention became uncertain:
    /// reconciliation is not settling outcomes.
    OldestUncertain,
    /// Intentions in `review` that no person has handled yet.
    Review,
    /// Planned intentions claimable for longer than the grace and still not
    /// claimed: no dispatcher is draining the queue, or it cannot keep up.
    DueUnsent,
    /// Booking events refused as conflicts that no newer version settled
    /// and nobody handled.
    RefusedEvents,
    /// Templates WhatsApp rejected, paused or disabled. Always an alert:
    /// every message that uses one waits in review.
    TemplateBlocked,
    /// A live dispatcher paused its channel: the channel refused us (a
    /// rejected credential, an unknown or unlinked engine instance, TLS).
    /// Always an alert: nothing goes out until someone fixes the channel.
    ChannelPaused,
    /// The last periodic backup (`[backup]` in `serve`) failed. Always an
    /// alert while backups are configured; off without them.
    BackupFailing,
    /// No good backup for two of `[backup] every`: seconds since the
    /// newest one.
    BackupStale,
    /// Appointments a calendar feed lost at once, held for a person
    /// (`domain::feed`): the value is how many. Always an alert: their
    /// messages wait until someone confirms or discards.
    FeedHeld,
    /// Calendar feeds failing for longer than `[alerts] feed_stale_minutes`:
    /// the agenda unavez sees is getting old.
    FeedStale,
}

impl AlertKind {
    /// In the order the banner lists them (the most urgent first).
    pub const ALL: [AlertKind; 10] = [
        AlertKind::ChannelPaused,
        AlertKind::FeedHeld,
        AlertKind::TemplateBlocked,
        AlertKind::DueUnsent,
        AlertKind::OldestUncertain,
        AlertKind::Review,
        AlertKind::RefusedEvents,
        AlertKind::BackupFailing,
        AlertKind::BackupStale,
        AlertKind::FeedStale,
    ];

    /// The `kind` label on `/metrics` and in the Prometheus rules.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::OldestUncertain => "oldest_uncertain",
            AlertKind::Review => "review",
            AlertKind::DueUnsent => "due_unsent",
            AlertKind::RefusedEvents => "refused_events",
            AlertKind::TemplateBlocked => "template_blocked",
            AlertKind::ChannelPaused => "channel_paused",
            AlertKind::BackupFailing => "backup_failing",
            AlertKind::BackupStale => "backup_stale",
            AlertKind::FeedHeld => "feed_held",
            AlertKind::FeedStale => "feed_stale",
        }
    }
}

/// A template WhatsApp stopped, and the messages waiting for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedTemplate {
    pub name: String,
    pub language: String,
    /// `REJECTED`, `PAUSED` or `DISABLED`, as Meta reported it.
    pub status: String,
    /// Its intentions waiting in `review`.
    pub held: i64,
}

/// Everything the alerts look at, read in one ledger snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Measures {
    /// When the oldest uncertain intention became uncertain.
    pub oldest_uncertain_since: Option<DateTime<Utc>>,
    pub review: i64,
    pub due_unsent: i64,
    pub refused_events: i64,
    pub blocked_templates: Vec<BlockedTemplate>,
    /// Channels live dispatchers paused (read from their heartbeat rows:
    /// `heartbeat::paused_channels`, filled in by whoever read the rows).
    pub paused_channels: Vec<ChannelPause>,
    /// The periodic backups, where the reader knows them (`serve` runs
    /// them); `None`: no backups configured, both backup alerts off.
    pub backup: Option<BackupMeasure>,
    /// Each calendar feed's health, from its status row.
    pub feeds: Vec<FeedHealth>,
}

/// What the alerts read of one calendar feed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FeedHealth {
    pub name: String,
    /// The first failure since its last success.
    pub failing_since: Option<DateTime<Utc>>,
    /// Disappearances held for a person.
    pub held: i64,
}

/// The thresholds (`[alerts]`); `None` turns an alert off. A measure at or
/// above its threshold has crossed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub oldest_uncertain: Option<Duration>,
    pub review: Option<i64>,
    pub due_unsent: Option<i64>,
    /// How long a planned intention may be claimable before it counts as
    /// due but unsent (a dispatcher polls, claims in batches and may be
    /// deferring for the daily cap).
    pub due_grace: Duration,
    pub refused_events: Option<i64>,
    /// How long a feed may fail before it is stale.
    pub feed_stale: Option<Duration>,
}

/// One alert's measure, threshold and verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reading {
    pub kind: AlertKind,
    /// Seconds for [`AlertKind::OldestUncertain`], a count otherwise.
    pub value: i64,
    /// In the value's unit; `None`: the alert is off.
    pub threshold: Option<i64>,
    pub crossed: bool,
}

/// Every alert's reading, in [`AlertKind::ALL`] order. Pure: the same
/// measures, thresholds and clock give the same verdicts.
pub fn evaluate(m: &Measures, t: &Thresholds, now: DateTime<Utc>) -> Vec<Reading> {
    AlertKind::ALL
        .into_iter()
        .map(|kind| {
            let (value, threshold) = match kind {
                AlertKind::OldestUncertain => (
                    m.oldest_uncertain_since
                        .map(|s| (now - s).num_seconds().max(0))
                        .unwrap_or(0),
                    t.oldest_uncertain.map(|d| d.num_seconds()),
                ),
                AlertKind::Review => (m.review, t.review),
                AlertKind::DueUnsent => (m.due_unsent, t.due_unsent),
                AlertKind::RefusedEvents => (m.refused_events, t.refused_events),
                AlertKind::TemplateBlocked => (m.blocked_templates.len() as i64, Some(1)),
                AlertKind::ChannelPaused => (m.paused_channels.len() as i64, Some(1)),
                AlertKind::BackupFailing => (m.backup.map_or(0, |b| i64::from(b.failing())), m.backup.map(|_| 1)),
                AlertKind::BackupStale => (
                    m.backup.map_or(0, |b| b.age(now).num_seconds()),
                    m.backup.map(|b| b.stale_after().num_seconds()),
                ),
                AlertKind::FeedHeld => (m.feeds.iter().map(|f| f.held.max(0)).sum(), Some(1)),
                AlertKind::FeedStale => (
                    m.feeds
                        .iter()
                        .filter(|f| {
                            t.feed_stale
                                .zip(f.failing_since)
                                .is_some_and(|(d, since)| now - since >= d)
                        })
                        .count() as i64,
                    t.feed_stale.map(|_| 1),
                ),
            };
            // A threshold of 0 or less would be crossed by nothing at all
            // (an alert that is always on says nothing): it is off.
            let threshold = threshold.filter(|t| *t > 0);
            Reading {
                kind,
                value,
                threshold,
                crossed: threshold.is_some_and(|t| value >= t),
            }
        })
        .collect()
}

/// The readings that crossed their thresholds, most urgent first.
pub fn crossed(m: &Measures, t: &Thresholds, now: DateTime<Utc>) -> Vec<Reading> {
    evaluate(m, t, now).into_iter().filter(|r| r.crossed).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).unwrap()
    }

    fn thresholds() -> Thresholds {
        Thresholds {
            oldest_uncertain: Some(Duration::minutes(30)),
            review: Some(10),
            due_unsent: Some(20),
            due_grace: Duration::minutes(15),
            refused_events: Some(1),
            feed_stale: Some(Duration::minutes(30)),
        }
    }

    fn kinds(r: &[Reading]) -> Vec<AlertKind> {
        r.iter().map(|r| r.kind).collect()
    }

    #[test]
    fn nothing_piled_up_crosses_nothing() {
        let all = evaluate(&Measures::default(), &thresholds(), now());
        assert_eq!(kinds(&all), AlertKind::ALL);
        assert!(all.iter().all(|r| !r.crossed && r.value == 0), "{all:?}");
    }

    #[test]
    fn each_threshold_is_crossed_at_its_value_not_before() {
        let t = thresholds();
        let just_below = Measures {
            oldest_uncertain_since: Some(now() - Duration::minutes(30) + Duration::seconds(1)),
            review: 9,
            due_unsent: 19,
            refused_events: 0,
            blocked_templates: vec![],
            paused_channels: vec![],
            backup: None,
            feeds: vec![],
        };
        assert!(crossed(&just_below, &t, now()).is_empty());
        let at = Measures {
            oldest_uncertain_since: Some(now() - Duration::minutes(30)),
            review: 10,
            due_unsent: 20,
            refused_events: 1,
            blocked_templates: vec![],
            paused_channels: vec![],
            backup: None,
            feeds: vec![],
        };
        assert_eq!(
            kinds(&crossed(&at, &t, now())),
            [
                AlertKind::DueUnsent,
                AlertKind::OldestUncertain,
                AlertKind::Review,
                AlertKind::RefusedEvents
            ]
        );
        let age = evaluate(&at, &t, now())[4];
        assert_eq!(
            (age.kind, age.value, age.threshold),
            (AlertKind::OldestUncertain, 1800, Some(1800))
        );
    }

    #[test]
    fn a_blocked_template_is_always_an_alert() {
        let off = Thresholds {
            oldest_uncertain: None,
            review: None,
            due_unsent: None,
            due_grace: Duration::zero(),
            refused_events: None,
            feed_stale: None,
        };
        let m = Measures {
            blocked_templates: vec![BlockedTemplate {
                name: "cita_recordatorio".into(),
                language: "es".into(),
                status: "PAUSED".into(),
                held: 4,
            }],
            review: 1_000,
            ..Measures::default()
        };
        let got = crossed(&m, &off, now());
        assert_eq!(kinds(&got), [AlertKind::TemplateBlocked]);
        assert_eq!((got[0].value, got[0].threshold), (1, Some(1)));
    }

    #[test]
    fn a_paused_channel_is_always_the_first_alert() {
        use crate::domain::fault::ChannelFault;
        let m = Measures {
            paused_channels: vec![ChannelPause {
                fault: ChannelFault::CredentialRejected,
                secret_env: Some("UNAVEZ_MOTOR_API_KEY".into()),
            }],
            blocked_templates: vec![BlockedTemplate {
                name: "x".into(),
                language: "es".into(),
                status: "PAUSED".into(),
                held: 1,
            }],
            ..Measures::default()
        };
        let off = Thresholds {
            oldest_uncertain: None,
            review: None,
            due_unsent: None,
            due_grace: Duration::zero(),
            refused_events: None,
            feed_stale: None,
        };
        let got = crossed(&m, &off, now());
        assert_eq!(kinds(&got), [AlertKind::ChannelPaused, AlertKind::TemplateBlocked]);
        assert_eq!((got[0].value, got[0].threshold), (1, Some(1)));
    }

    #[test]
    fn a_held_feed_is_always_an_alert_and_a_failing_one_after_its_minutes() {
        let feed = |name: &str, failing: Option<i64>, held: i64| FeedHealth {
            name: name.into(),
            failing_since: failing.map(|m| now() - Duration::minutes(m)),
            held,
        };
        let m = Measures {
            feeds: vec![feed("a", None, 37), feed("b", Some(29), 0), feed("c", Some(31), 0)],
            ..Measures::default()
        };
        let got = crossed(&m, &thresholds(), now());
        assert_eq!(kinds(&got), [AlertKind::FeedHeld, AlertKind::FeedStale]);
        assert_eq!((got[0].value, got[1].value), (37, 1));
        let off = Thresholds {
            feed_stale: None,
            ..thresholds()
        };
        assert_eq!(kinds(&crossed(&m, &off, now())), [AlertKind::FeedHeld]);
        let healthy = Measures {
            feeds: vec![feed("a", None, 0)],
            ..Measures::default()
        };
        assert!(crossed(&healthy, &thresholds(), now()).is_empty());
    }

    #[test]
    fn off_and_zero_thresholds_never_cross() {
        let mut t = thresholds();
        t.review = Some(0);
        t.due_unsent = None;
        let m = Measures {
            review: 50,
            due_unsent: 50,
            ..Measures::default()
        };
        let all = evaluate(&m, &t, now());
        let review = all.iter().find(|r| r.kind == AlertKind::Review).unwrap();
        assert_eq!((review.threshold, review.crossed), (None, false));
        assert!(crossed(&m, &t, now()).is_empty());
    }

    #[test]
    fn an_uncertain_case_from_the_future_is_zero_seconds_old() {
        let m = Measures {
            oldest_uncertain_since: Some(now() + Duration::minutes(5)),
            ..Measures::default()
        };
        let r = evaluate(&m, &thresholds(), now())[4];
        assert_eq!((r.kind, r.value), (AlertKind::OldestUncertain, 0));
    }

    #[test]
    fn backup_alerts_are_off_without_backups_and_judge_by_their_own_period() {
        let t = thresholds();
        let all = evaluate(&Measures::default(), &t, now());
        for kind in [AlertKind::BackupFailing, AlertKind::BackupStale] {
            let r = all.iter().find(|r| r.kind == kind).unwrap();
            assert_eq!((r.value, r.threshold, r.crossed), (0, None, false), "{kind:?}");
        }
        let measure = BackupMeasure {
            every: Duration::hours(1),
            watched_since: now() - Duration::hours(5),
            last_success: Some(now() - Duration::hours(2)),
            last_failure: Some(now() - Duration::minutes(5)),
        };
        let m = Measures {
            backup: Some(measure),
            ..Measures::default()
        };
        assert_eq!(
            kinds(&crossed(&m, &t, now())),
            [AlertKind::BackupFailing, AlertKind::BackupStale]
        );
        let fresh = Measures {
            backup: Some(BackupMeasure {
                last_success: Some(now() - Duration::minutes(1)),
                ..measure
            }),
            ..Measures::default()
        };
        assert!(crossed(&fresh, &t, now()).is_empty());
        let stale = evaluate(&fresh, &t, now())
            .into_iter()
            .find(|r| r.kind == AlertKind::BackupStale);
        assert_eq!(stale.map(|r| (r.value, r.threshold)), Some((60, Some(7200))));
    }
}
