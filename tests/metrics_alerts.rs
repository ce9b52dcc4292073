//! `/metrics` exports every alert (`[alerts]`, issue 10) as a gauge with
//! its measure and threshold, and the dispatchers' heartbeats; the shipped
//! Prometheus rules (`assets/prometheus-alerts.yml`) name only metrics the
//! real server emits.

mod webhooks_support;

use std::collections::BTreeSet;

use chrono::{Duration, Utc};
use unavez::domain::fault::{ChannelFault, ChannelPause};
use unavez::domain::heartbeat::{DispatcherState, Heartbeat};
use unavez::store::{NewChannelEvent, NewRefusal, Recorded, StoreError, TemplateStatus};
use unavez_testkit::{Backend, on_both};
use webhooks_support::Harness;

const RULES: &str = include_str!("../assets/prometheus-alerts.yml");

/// Every `unavez_…` metric name in `text`.
fn names_in(text: &str) -> BTreeSet<String> {
    text.match_indices("unavez_")
        .map(|(i, _)| {
            text[i..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        })
        .collect()
}

/// The metric names /metrics has samples for.
fn emitted(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// A refused booking event, a template WhatsApp paused, and a dispatcher
/// beating now whose channel rejected its key.
fn seed(h: &Harness) {
    h.schedule("cita-1", 3);
    let now = Utc::now();
    let mut store = h.store();
    store
        .write(|tx| {
            let fields = vec!["location".to_string()];
            tx.record_refusal(
                &NewRefusal {
                    event_id: "evt-9",
                    commitment_ref: "cita-1",
                    event_type: "appointment.scheduled",
                    version: 1,
                    conflict: unavez::domain::event::ConflictKind::SameVersion,
                    fields: &fields,
                    reason: "cita-1 is already at version 1 with other content (location)",
                    source: "http",
                    payload: "{}",
                    fingerprint: "sha256:x",
                },
                now,
            )?;
            let Recorded::New(row) = tx.record_channel_event(
                &NewChannelEvent {
                    source: "cloud",
                    event_id: "tpl-1",
                    kind: "message_template_status_update",
                    message_id: None,
                    intention_key: None,
                    payload: "{}",
                },
                now,
            )?
            else {
                panic!("new event")
            };
            tx.set_template_status(
                &TemplateStatus {
                    name: "recordatorio_cita",
                    language: "es_PE",
                    status: Some("PAUSED"),
                    ..TemplateStatus::default()
                },
                row,
                now,
            )?;
            tx.beat(&Heartbeat {
                id: "dispatcher-1".into(),
                host: "caja".into(),
                pid: 7,
                owner: None,
                state: DispatcherState::Running,
                last_error: None,
                last_error_at: None,
                started_at: now - Duration::minutes(1),
                beat_at: now,
                interval: Duration::seconds(5),
                // Its channel rejected the key: sending is paused on it.
                channel: Some(ChannelPause {
                    fault: ChannelFault::CredentialRejected,
                    secret_env: Some("UNAVEZ_MOTOR_API_KEY".into()),
                }),
                channel_instance: None,
            })?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

async fn every_alert_is_a_gauge_and_the_rules_name_only_emitted_metrics(backend: Backend) {
    let h = Harness::start_with(backend, |c| {
        c.alerts.review = 0;
        c.alerts.due_unsent = 100;
    })
    .await;
    seed(&h);
    let m = h.metrics().await;
    for want in [
        "unavez_alert{kind=\"template_blocked\"} 1",
        "unavez_alert{kind=\"channel_paused\"} 1",
        "unavez_channel_paused{code=\"credential_rejected\"} 1",
        "unavez_channel_paused{code=\"instance_unknown\"} 0",
        "unavez_alert{kind=\"refused_events\"} 1",
        "unavez_alert{kind=\"due_unsent\"} 0",
        "unavez_alert{kind=\"oldest_uncertain\"} 0",
        "unavez_alert{kind=\"review\"} 0",
        "unavez_alert_value{kind=\"template_blocked\"} 1",
        "unavez_alert_value{kind=\"refused_events\"} 1",
        "unavez_alert_threshold{kind=\"due_unsent\"} 100",
        "unavez_alert_threshold{kind=\"oldest_uncertain\"} 1200",
        "unavez_alert_threshold{kind=\"refused_events\"} 1",
        "unavez_dispatchers{state=\"running\"} 1",
        "unavez_dispatchers{state=\"gone\"} 0",
    ] {
        assert!(m.lines().any(|l| l == want), "{want} in:\n{m}");
    }
    assert!(!m.contains("unavez_alert_threshold{kind=\"review\"}"), "review is off");
    assert!(m.contains("unavez_template_blocked{template=\"recordatorio_cita\",language=\"es_PE\",status=\"PAUSED\"}"));

    let named = names_in(RULES);
    assert!(named.len() >= 6, "{named:?}");
    let out = emitted(&m);
    let missing: Vec<&String> = named.iter().filter(|n| !out.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "the rules name metrics /metrics does not emit: {missing:?}"
    );
    // Every rule alerts on something this server says.
    for expr in RULES.lines().filter_map(|l| l.trim().strip_prefix("expr:")) {
        assert!(!names_in(expr).is_empty(), "{expr}");
    }
    h.stop().await;
}

on_both!(
    async:
    every_alert_is_a_gauge_and_the_rules_name_only_emitted_metrics,
);
