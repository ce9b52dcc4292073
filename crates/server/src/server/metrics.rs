//! `GET /metrics`: Prometheus text exposition (format 0.0.4) of the
//! ledger's figures, read in one snapshot.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use super::{ApiError, AppState};
use crate::domain::counter::{Counter, Source};
use crate::store::{LATENCY_BUCKETS_MS, MetricsSnapshot};

pub async fn render(State(state): State<AppState>) -> Result<Response, ApiError> {
    let mut snap = state
        .blocking(|_, store| store.read(|tx| tx.metrics_snapshot()))
        .await??;
    // Rejections not flushed yet count too.
    super::limits::merge_counters(&mut snap.counters, state.rejections().pending());
    let blocked = state
        .blocking(|_, store| store.read(|tx| tx.blocked_templates()))
        .await??;
    let mut body = exposition(&snap, Utc::now());
    // Templates WhatsApp rejected, paused or disabled (issue 14): one alert
    // per template, with the planned messages held in review for it.
    family(
        &mut body,
        "unavez_template_blocked",
        "gauge",
        "Templates WhatsApp reports rejected, paused or disabled, with their messages held in review.",
    );
    for (name, language, status, held) in blocked {
        let _ = writeln!(
            body,
            "unavez_template_blocked{{template=\"{}\",language=\"{}\",status=\"{}\"}} {held}",
            esc(&name),
            esc(&language),
            esc(&status)
        );
    }
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    )
        .into_response())
}

/// Escapes a label value (`\`, `"` and newlines).
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
    let counter = |name: &str| s.counters.iter().find(|(n, _)| n == name).map(|c| c.1).unwrap_or(0);

    family(
        &mut o,
        "unavez_duplicates_blocked_total",
        "counter",
        "Duplicates blocked: keys presented again, events received again.",
    );
    let _ = writeln!(
        o,
        "unavez_duplicates_blocked_total{{kind=\"keys\"}} {}",
        counter(&Counter::DuplicateKeys.name())
    );
    let _ = writeln!(
        o,
        "unavez_duplicates_blocked_total{{kind=\"events\"}} {}",
        counter(&Counter::DuplicateEvents.name())
    );
    for src in [Source::Cloud, Source::Motor] {
        let _ = writeln!(
            o,
            "unavez_duplicates_blocked_total{{kind=\"webhook_events\",source=\"{src}\"}} {}",
            counter(&Counter::DuplicateEventsFrom(src).name())
        );
    }

    family(&mut o, "unavez_intentions", "gauge", "Intentions by state.");
    for (st, n) in &s.by_state {
        let _ = writeln!(o, "unavez_intentions{{state=\"{}\"}} {n}", st.as_str());
    }

    family(
        &mut o,
        "unavez_oldest_uncertain_age_seconds",
        "gauge",
        "Age of the oldest uncertain intention (0 if none).",
    );
    let age = s
        .oldest_uncertain_since
        .map(|t| (now - t).num_milliseconds().max(0) as f64 / 1000.0)
        .unwrap_or(0.0);
    let _ = writeln!(o, "unavez_oldest_uncertain_age_seconds {age}");

    family(
        &mut o,
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

    family(
        &mut o,
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
        &mut o,
        "unavez_delivered",
        "gauge",
        "Intentions with delivery evidence (delivered or read).",
    );
    let _ = writeln!(o, "unavez_delivered {}", s.delivered);
    family(&mut o, "unavez_read", "gauge", "Intentions read by the customer.");
    let _ = writeln!(o, "unavez_read {}", s.read);

    family(&mut o, "unavez_opt_outs", "gauge", "Contacts opted out, by category.");
    let _ = writeln!(o, "unavez_opt_outs{{category=\"marketing\"}} {}", s.opt_outs_marketing);
    let _ = writeln!(
        o,
        "unavez_opt_outs{{category=\"transactional\"}} {}",
        s.opt_outs_transactional
    );

    family(&mut o, "unavez_closures", "gauge", "Cancelled intentions by reason.");
    for (reason, n) in &s.closures {
        let _ = writeln!(o, "unavez_closures{{reason=\"{}\"}} {n}", esc(reason));
    }

    family(
        &mut o,
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
        &mut o,
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
    o
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
}
