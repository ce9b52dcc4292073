//! `GET /metrics`: Prometheus text exposition (format 0.0.4) of the
//! ledger's figures, the alerts (`[alerts]`) and the dispatchers'
//! heartbeats, read in one snapshot. `assets/prometheus-alerts.yml` alerts
//! on these names.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use super::{ApiError, AppState};
use crate::domain::alert::{self, Reading};
use crate::domain::backup::BackupMeasure;
use crate::domain::counter::{Counter, Source};
use crate::domain::fault::ChannelFault;
use crate::domain::heartbeat::{self, DispatcherState, Heartbeat, Liveness};
use crate::store::{FeedRow, LATENCY_BUCKETS_MS, MetricsSnapshot, StoreError};

/// How far back heartbeat rows are read: far beyond any dispatcher's
/// window of three missed beats, so a run that died recently still shows
/// as `gone`.
const HEARTBEAT_LOOKBACK: chrono::Duration = chrono::Duration::minutes(10);

pub async fn render(State(state): State<AppState>) -> Result<Response, ApiError> {
    let now = Utc::now();
    let thresholds = state.config().alerts.thresholds();
    let grace = thresholds.due_grace;
    // One read: the figures, the alerts' measures and the dispatchers'
    // heartbeats come from the same snapshot.
    let (mut snap, mut measures, beats, feeds) = state
        .blocking(move |_, store| {
            store.read(|tx| {
                Ok::<_, StoreError>((
                    tx.metrics_snapshot()?,
                    tx.alert_measures(now, grace)?,
                    tx.heartbeats(now - HEARTBEAT_LOOKBACK)?,
                    tx.feeds()?,
                ))
            })
        })
        .await??;
    // Rejections not flushed yet count too.
    super::limits::merge_counters(&mut snap.counters, state.rejections().pending());
    let mut body = exposition(&snap, now);
    // Templates WhatsApp rejected, paused or disabled (issue 14): one alert
    // per template, with the planned messages held in review for it.
    family(
        &mut body,
        "unavez_template_blocked",
        "gauge",
        "Templates WhatsApp reports rejected, paused or disabled, with their messages held in review.",
    );
    for b in &measures.blocked_templates {
        let _ = writeln!(
            body,
            "unavez_template_blocked{{template=\"{}\",language=\"{}\",status=\"{}\"}} {}",
            esc(&b.name),
            esc(&b.language),
            esc(&b.status),
            b.held
        );
    }
    measures.paused_channels = heartbeat::paused_channels(&beats, now);
    measures.backup = state.backups().map(|m| m.measure());
    alert_families(&mut body, &alert::evaluate(&measures, &thresholds, now));
    backup_families(&mut body, measures.backup.as_ref());
    dispatcher_families(&mut body, &beats, now);
    channel_families(&mut body, &beats, now);
    feed_families(&mut body, &feeds);
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    )
        .into_response())
}

/// Each alert's verdict, measure and threshold (`[alerts]`), as the console's
/// banner judges them (`domain::alert`): `assets/prometheus-alerts.yml`
/// alerts on `unavez_alert == 1`.
pub fn alert_families(out: &mut String, readings: &[Reading]) {
    family(
        out,
        "unavez_alert",
        "gauge",
        "1 while an [alerts] threshold is crossed (a blocked template always is), else 0.",
    );
    for r in readings {
        let _ = writeln!(
            out,
            "unavez_alert{{kind=\"{}\"}} {}",
            r.kind.as_str(),
            u8::from(r.crossed)
        );
    }
    family(
        out,
        "unavez_alert_value",
        "gauge",
        "What each alert measures: seconds for oldest_uncertain, a count otherwise.",
    );
    for r in readings {
        let _ = writeln!(out, "unavez_alert_value{{kind=\"{}\"}} {}", r.kind.as_str(), r.value);
    }
    family(
        out,
        "unavez_alert_threshold",
        "gauge",
        "Each alert's threshold in its value's unit; absent while the alert is off.",
    );
    for r in readings {
        if let Some(t) = r.threshold {
            let _ = writeln!(out, "unavez_alert_threshold{{kind=\"{}\"}} {t}", r.kind.as_str());
        }
    }
}

/// The periodic backups `serve` runs (`[backup]`): when the last one
/// succeeded and failed, as Unix times. No samples without backups
/// configured; no failure sample before a first failure.
pub fn backup_families(out: &mut String, backup: Option<&BackupMeasure>) {
    family(
        out,
        "unavez_backup_last_success_timestamp_seconds",
        "gauge",
        "Unix time of the newest good backup of [backup] (0: none yet); absent without [backup].",
    );
    if let Some(b) = backup {
        let at = b.last_success.map_or(0, |t| t.timestamp());
        let _ = writeln!(out, "unavez_backup_last_success_timestamp_seconds {at}");
    }
    family(
        out,
        "unavez_backup_last_failure_timestamp_seconds",
        "gauge",
        "Unix time of the last failed backup of [backup] (0: none since the start); absent without [backup].",
    );
    if let Some(b) = backup {
        let at = b.last_failure.map_or(0, |t| t.timestamp());
        let _ = writeln!(out, "unavez_backup_last_failure_timestamp_seconds {at}");
    }
}

/// Dispatchers by what their heartbeat rows say (`domain::heartbeat`):
/// running and paused ones that beat within three of their intervals, and
/// the ones that stopped beating without a goodbye (crashed, killed) in the
/// last ten minutes.
pub fn dispatcher_families(out: &mut String, beats: &[Heartbeat], now: DateTime<Utc>) {
    family(
        out,
        "unavez_dispatchers",
        "gauge",
        "Dispatchers on this ledger by heartbeat: running, paused, or gone (stopped beating, no clean shutdown) in the last 10 minutes.",
    );
    let count = |want: Liveness| beats.iter().filter(|b| b.liveness(now) == want).count();
    for (state, n) in [
        ("running", count(Liveness::Alive(DispatcherState::Running))),
        ("paused", count(Liveness::Alive(DispatcherState::Paused))),
        ("gone", count(Liveness::Gone)),
    ] {
        let _ = writeln!(out, "unavez_dispatchers{{state=\"{state}\"}} {n}");
    }
}

/// Live dispatchers whose channel refused them, by fault (docs/design.md,
/// "A channel that refuses us"): every fault has a line, 0 when none.
pub fn channel_families(out: &mut String, beats: &[Heartbeat], now: DateTime<Utc>) {
    family(
        out,
        "unavez_channel_paused",
        "gauge",
        "Live dispatchers that paused sending because the channel refused them, by fault (credential_rejected, instance_unknown, instance_disconnected, tls).",
    );
    for fault in ChannelFault::ALL {
        let n = beats
            .iter()
            .filter(|b| matches!(b.liveness(now), Liveness::Alive(_)))
            .filter(|b| b.channel.as_ref().is_some_and(|c| c.fault == fault))
            .count();
        let _ = writeln!(out, "unavez_channel_paused{{code=\"{}\"}} {n}", fault.as_str());
    }
}

/// Escapes a label value (`\`, `"` and newlines).
/// A per-feed gauge: its name, help text and value.
type FeedGauge = (&'static str, &'static str, fn(&FeedRow) -> i64);

/// Each calendar feed by name (never its URL): when it last succeeded and
/// failed (Unix seconds, 0 for never), what its last body held and
/// changed, and what it holds for review.
pub fn feed_families(out: &mut String, feeds: &[FeedRow]) {
    fn secs(t: Option<DateTime<Utc>>) -> i64 {
        t.map_or(0, |t| t.timestamp())
    }
    let gauges: [FeedGauge; 5] = [
        (
            "unavez_feed_last_success_seconds",
            "When the calendar feed last answered with a usable body or 304 (Unix time; 0: never).",
            |f| secs(f.last_success_at),
        ),
        (
            "unavez_feed_last_failure_seconds",
            "When a poll of the calendar feed last failed or could not be trusted (Unix time; 0: never).",
            |f| secs(f.last_failure_at),
        ),
        (
            "unavez_feed_events_seen",
            "VEVENTs in the calendar feed's last imported body.",
            |f| f.events_seen,
        ),
        (
            "unavez_feed_events_applied",
            "Events of the calendar feed's last imported body that changed an appointment (vanished ones cancelled included).",
            |f| f.events_applied,
        ),
        (
            "unavez_feed_held",
            "Appointments the calendar feed lost at once, held for `unavez feeds confirm|discard`.",
            |f| f.held,
        ),
    ];
    for (name, help, value) in gauges {
        family(out, name, "gauge", help);
        for f in feeds {
            let _ = writeln!(out, "{name}{{feed=\"{}\"}} {}", esc(&f.name), value(f));
        }
    }
}

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The text body for a snapshot taken at `now`.
pub fn exposition(s: &MetricsSnapshot, now: DateTime<Utc>) -> String {
    let mut o = String::new();
    duplicates_family(&mut o, s);
    intention_families(&mut o, s, now);
    latency_family(&mut o, s);
    outcome_families(&mut o, s);
    webhook_families(&mut o, s);
    o
}

/// A stored counter's value by name (0 before it first counts).
fn counter(s: &MetricsSnapshot, name: &str) -> i64 {
    s.counters.iter().find(|(n, _)| n == name).map(|c| c.1).unwrap_or(0)
}

/// Keys and events presented again, blocked (in total and per webhook
/// source).
fn duplicates_family(o: &mut String, s: &MetricsSnapshot) {
    family(
        o,
        "unavez_duplicates_blocked_total",
        "counter",
        "Duplicates blocked: keys presented again, events received again.",
    );
    let _ = writeln!(
        o,
        "unavez_duplicates_blocked_total{{kind=\"keys\"}} {}",
        counter(s, &Counter::DuplicateKeys.name())
    );
    let _ = writeln!(
        o,
        "unavez_duplicates_blocked_total{{kind=\"events\"}} {}",
        counter(s, &Counter::DuplicateEvents.name())
    );
    for src in [Source::Cloud, Source::Motor] {
        let _ = writeln!(
            o,
            "unavez_duplicates_blocked_total{{kind=\"webhook_events\",source=\"{src}\"}} {}",
            counter(s, &Counter::DuplicateEventsFrom(src).name())
        );
    }
}

/// Intentions by state, and how long the oldest uncertain one has waited.
fn intention_families(o: &mut String, s: &MetricsSnapshot, now: DateTime<Utc>) {
    family(o, "unavez_intentions", "gauge", "Intentions by state.");
    for (st, n) in &s.by_state {
        let _ = writeln!(o, "unavez_intentions{{state=\"{}\"}} {n}", st.as_str());
    }

    family(
        o,
        "unavez_oldest_uncertain_age_seconds",
        "gauge",
        "Age of the oldest uncertain intention (0 if none).",
    );
    let age = s
        .oldest_uncertain_since
        .map(|t| (now - t).num_milliseconds().max(0) as f64 / 1000.0)
        .unwrap_or(0.0);
    let _ = writeln!(o, "unavez_oldest_uncertain_age_seconds {age}");
}

/// The histogram from due time to the first evidence of acceptance.
fn latency_family(o: &mut String, s: &MetricsSnapshot) {
    family(
        o,
        "unavez_latency_to_acceptance_seconds",
        "histogram",
        "From due time to the first evidence of acceptance, per intention.",
    );
    let h = &s.latency_to_acceptance;
    for (b, c) in LATENCY_BUCKETS_MS.iter().zip(&h.cumulative) {
        let _ = writeln!(
            o,
            "unavez_latency_to_acceptance_seconds_bucket{{le=\"{}\"}} {c}",
            *b as f64 / 1000.0
        );
    }
    let _ = writeln!(
        o,
        "unavez_latency_to_acceptance_seconds_bucket{{le=\"+Inf\"}} {}",
        h.count
    );
    let _ = writeln!(
        o,
        "unavez_latency_to_acceptance_seconds_sum {}",
        h.sum_ms as f64 / 1000.0
    );
    let _ = writeln!(o, "unavez_latency_to_acceptance_seconds_count {}", h.count);
}

/// How sends ended: channel errors, delivered and read, opt-outs and
/// closures.
fn outcome_families(o: &mut String, s: &MetricsSnapshot) {
    family(
        o,
        "unavez_errors_total",
        "counter",
        "Channel errors by template and code (attempts and failure webhooks).",
    );
    for (t, code, n) in &s.errors {
        let _ = writeln!(
            o,
            "unavez_errors_total{{template=\"{}\",code=\"{}\"}} {n}",
            esc(t),
            esc(code)
        );
    }

    family(
        o,
        "unavez_delivered",
        "gauge",
        "Intentions with delivery evidence (delivered or read).",
    );
    let _ = writeln!(o, "unavez_delivered {}", s.delivered);
    family(o, "unavez_read", "gauge", "Intentions read by the customer.");
    let _ = writeln!(o, "unavez_read {}", s.read);

    family(o, "unavez_opt_outs", "gauge", "Contacts opted out, by category.");
    let _ = writeln!(o, "unavez_opt_outs{{category=\"marketing\"}} {}", s.opt_outs_marketing);
    let _ = writeln!(
        o,
        "unavez_opt_outs{{category=\"transactional\"}} {}",
        s.opt_outs_transactional
    );

    family(o, "unavez_closures", "gauge", "Cancelled intentions by reason.");
    for (reason, n) in &s.closures {
        let _ = writeln!(o, "unavez_closures{{reason=\"{}\"}} {n}", esc(reason));
    }
}

/// Webhook events stored by status, and requests or events refused.
fn webhook_families(o: &mut String, s: &MetricsSnapshot) {
    family(
        o,
        "unavez_channel_events",
        "gauge",
        "Webhook events stored, by source, kind and processing status.",
    );
    for (src, kind, status, n) in &s.channel_events {
        let _ = writeln!(
            o,
            "unavez_channel_events{{source=\"{}\",kind=\"{}\",status=\"{}\"}} {n}",
            esc(src),
            esc(kind),
            esc(status)
        );
    }

    family(
        o,
        "unavez_webhook_rejected_total",
        "counter",
        "Requests or events refused, by source and reason.",
    );
    for (name, n) in &s.counters {
        if let Some(Counter::WebhookRejected(src, reason)) = Counter::parse(name) {
            let _ = writeln!(
                o,
                "unavez_webhook_rejected_total{{source=\"{src}\",reason=\"{}\"}} {n}",
                reason.as_str()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::state::IntentionState;
    use crate::store::Histogram;

    #[test]
    fn exposition_is_well_formed() {
        let now = Utc::now();
        let snap = MetricsSnapshot {
            counters: vec![
                ("duplicate_keys".into(), 3),
                ("duplicate_events".into(), 5),
                ("webhook_rejected:cloud:signature".into(), 2),
            ],
            by_state: IntentionState::ALL.iter().map(|s| (*s, 1)).collect(),
            oldest_uncertain_since: Some(now - chrono::Duration::seconds(90)),
            latency_to_acceptance: Histogram {
                cumulative: LATENCY_BUCKETS_MS.iter().map(|_| 2).collect(),
                count: 3,
                sum_ms: 4_500,
            },
            errors: vec![("recordatorio \"24h\"".into(), "131026".into(), 1)],
            ..MetricsSnapshot::default()
        };
        let text = exposition(&snap, now);
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(name.starts_with("unavez_"), "{line}");
            assert_eq!(name.matches('{').count(), name.matches('}').count(), "{line}");
        }
        assert!(text.contains("unavez_duplicates_blocked_total{kind=\"keys\"} 3"));
        assert!(text.contains("unavez_oldest_uncertain_age_seconds 90"));
        assert!(text.contains("unavez_latency_to_acceptance_seconds_bucket{le=\"+Inf\"} 3"));
        assert!(text.contains("unavez_latency_to_acceptance_seconds_sum 4.5"));
        assert!(text.contains("template=\"recordatorio \\\"24h\\\"\""));
        assert!(text.contains("unavez_webhook_rejected_total{source=\"cloud\",reason=\"signature\"} 2"));
    }

    #[test]
    fn alerts_and_dispatchers_are_gauges_by_kind_and_state() {
        use crate::domain::alert::{Measures, Thresholds};
        let now = Utc::now();
        let thresholds = Thresholds {
            oldest_uncertain: Some(chrono::Duration::minutes(20)),
            review: None,
            due_unsent: Some(5),
            due_grace: chrono::Duration::minutes(10),
            refused_events: Some(1),
            feed_stale: None,
        };
        let m = Measures {
            due_unsent: 7,
            review: 3,
            ..Measures::default()
        };
        let mut text = String::new();
        alert_families(&mut text, &alert::evaluate(&m, &thresholds, now));
        let beat = |id: &str, state, ago| Heartbeat {
            id: id.into(),
            host: "h".into(),
            pid: 1,
            owner: None,
            state,
            last_error: None,
            last_error_at: None,
            started_at: now,
            beat_at: now - chrono::Duration::seconds(ago),
            interval: chrono::Duration::seconds(5),
            channel: None,
            channel_instance: None,
        };
        let beats = [
            beat("a", DispatcherState::Running, 1),
            beat("b", DispatcherState::Running, 60),
            beat("c", DispatcherState::Stopped, 1),
            Heartbeat {
                channel: Some(crate::domain::fault::ChannelPause {
                    fault: ChannelFault::CredentialRejected,
                    secret_env: Some("UNAVEZ_MOTOR_API_KEY".into()),
                }),
                ..beat("d", DispatcherState::Running, 1)
            },
        ];
        dispatcher_families(&mut text, &beats, now);
        channel_families(&mut text, &beats, now);
        for want in [
            "unavez_alert{kind=\"due_unsent\"} 1",
            "unavez_alert{kind=\"review\"} 0",
            "unavez_alert_value{kind=\"review\"} 3",
            "unavez_alert_threshold{kind=\"due_unsent\"} 5",
            "unavez_alert_threshold{kind=\"oldest_uncertain\"} 1200",
            "unavez_alert_threshold{kind=\"template_blocked\"} 1",
            "unavez_dispatchers{state=\"running\"} 2",
            "unavez_channel_paused{code=\"credential_rejected\"} 1",
            "unavez_channel_paused{code=\"tls\"} 0",
            "unavez_dispatchers{state=\"paused\"} 0",
            "unavez_dispatchers{state=\"gone\"} 1",
        ] {
            assert!(text.lines().any(|l| l == want), "{want} in:\n{text}");
        }
        // An alert that is off has no threshold line.
        assert!(!text.contains("unavez_alert_threshold{kind=\"review\"}"));
    }
}
