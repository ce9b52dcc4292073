use axum::http::HeaderValue;

use super::*;
use crate::domain::alert::{Measures, Thresholds};
use crate::domain::state::IntentionState;
use crate::store::Histogram;

fn snapshot(now: DateTime<Utc>) -> MetricsSnapshot {
    MetricsSnapshot {
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
    }
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn exposition_is_well_formed() {
    let now = Utc::now();
    let scrape = Scrape {
        now,
        snap: snapshot(now),
        ..Scrape::default()
    };
    let text = scrape.into_body(Format::Prometheus).unwrap();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
        assert!(name.starts_with("unavez_"), "{line}");
        assert_eq!(name.matches('{').count(), name.matches('}').count(), "{line}");
    }
    assert!(
        text.contains("# TYPE unavez_duplicates_blocked_total counter\n"),
        "{text}"
    );
    assert!(
        text.contains("unavez_duplicates_blocked_total{kind=\"keys\"} 3\n"),
        "{text}"
    );
    assert!(text.contains("unavez_duplicates_blocked_total{kind=\"webhook_events\",source=\"cloud\"} 0\n"));
    assert_eq!(value(&text, "unavez_oldest_uncertain_age_seconds"), Some(90.0));
    // Bounds as Prometheus writes them; each bucket counts everything below.
    assert!(
        text.contains("unavez_latency_to_acceptance_seconds_bucket{le=\"1\"} 2\n"),
        "{text}"
    );
    assert!(text.contains("unavez_latency_to_acceptance_seconds_bucket{le=\"+Inf\"} 3\n"));
    assert_eq!(text.matches("le=\"+Inf\"").count(), 1, "{text}");
    assert_eq!(value(&text, "unavez_latency_to_acceptance_seconds_sum"), Some(4.5));
    assert!(text.contains("unavez_latency_to_acceptance_seconds_count 3\n"));
    assert!(text.contains("template=\"recordatorio \\\"24h\\\"\""), "{text}");
    assert!(text.contains("unavez_webhook_rejected_total{source=\"cloud\",reason=\"signature\"} 2\n"));
    assert!(text.contains("unavez_read 0\n"), "{text}");
    // No blocked template, no backups configured, no feeds: no family.
    for absent in ["unavez_template_blocked", "unavez_backup_", "unavez_feed_"] {
        assert!(!text.contains(absent), "{absent} in {text}");
    }
    assert!(!text.contains("# EOF"));
}

#[test]
fn openmetrics_names_counters_without_total_and_ends_with_eof() {
    let now = Utc::now();
    let scrape = Scrape {
        now,
        snap: snapshot(now),
        ..Scrape::default()
    };
    let text = scrape.into_body(Format::OpenMetrics).unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(text.contains("# TYPE unavez_duplicates_blocked counter\n"), "{text}");
    // The samples keep the names the rules and dashboards use.
    assert!(
        text.contains("unavez_duplicates_blocked_total{kind=\"keys\"} 3\n"),
        "{text}"
    );
    assert!(text.contains("unavez_latency_to_acceptance_seconds_bucket{le=\"+Inf\"} 3\n"));
    assert_eq!(text.matches("le=\"+Inf\"").count(), 1, "{text}");
}

#[test]
fn the_scraper_chooses_the_format() {
    let with = |accept: &str| {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
        Format::negotiate(&h)
    };
    assert_eq!(Format::negotiate(&HeaderMap::new()), Format::Prometheus);
    // What Prometheus sends.
    let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,\
                      text/plain;version=0.0.4;q=0.4,*/*;q=0.1";
    assert_eq!(with(prometheus), Format::OpenMetrics);
    assert_eq!(with("text/plain;version=0.0.4"), Format::Prometheus);
    assert_eq!(
        with("application/openmetrics-text; q=0, text/plain"),
        Format::Prometheus
    );
    assert_eq!(with("*/*"), Format::Prometheus);
    assert!(
        Format::OpenMetrics
            .content_type()
            .starts_with("application/openmetrics-text")
    );
    assert!(Format::Prometheus.content_type().contains("version=0.0.4"));
}

#[test]
fn alerts_and_dispatchers_are_gauges_by_kind_and_state() {
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
    let beats = vec![
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
    let scrape = Scrape {
        now,
        readings: alert::evaluate(&m, &thresholds, now),
        beats,
        ..Scrape::default()
    };
    let text = scrape.into_body(Format::Prometheus).unwrap();
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
    // The help texts are the ones operators read.
    assert!(text.contains(
        "# HELP unavez_alert 1 while an [alerts] threshold is crossed (a blocked template always is), else 0.\n"
    ));
}
