//! `GET /metrics`: the ledger's figures, the alerts (`[alerts]`) and the
//! dispatchers' heartbeats, read in one snapshot and encoded by
//! `prometheus-client`: the Prometheus text format (0.0.4), or OpenMetrics
//! when the scraper's `Accept` asks for it. `assets/prometheus-alerts.yml`
//! alerts on these names.
//!
//! The figures live in the ledger, not in this process (several processes
//! write it), so every scrape reads them afresh and a [`Scrape`] is the
//! registry's collector for that one read. Counters are described without
//! their `_total`: the encoder appends it to the samples' names.

use std::fmt;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeGaugeValue, MetricEncoder, NoLabelSet, prometheus_text, text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::{ApiError, AppState};
use crate::domain::alert::{self, BlockedTemplate, Reading};
use crate::domain::backup::BackupMeasure;
use crate::domain::counter::{Counter, Source};
use crate::domain::fault::ChannelFault;
use crate::domain::heartbeat::{self, DispatcherState, Heartbeat, Liveness};
use crate::store::{FeedRow, LATENCY_BUCKETS_MS, MetricsSnapshot, StoreError};

/// How far back heartbeat rows are read: far beyond any dispatcher's
/// window of three missed beats, so a run that died recently still shows
/// as `gone`.
const HEARTBEAT_LOOKBACK: chrono::Duration = chrono::Duration::minutes(10);

/// The OpenMetrics text format's media type (the crate names only the
/// Prometheus one).
const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub async fn render(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
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
    measures.paused_channels = heartbeat::paused_channels(&beats, now);
    measures.backup = state.backups().map(|m| m.measure());
    let scrape = Scrape {
        now,
        readings: alert::evaluate(&measures, &thresholds, now),
        blocked: measures.blocked_templates,
        backup: measures.backup,
        snap,
        beats,
        feeds,
    };
    let format = Format::negotiate(&headers);
    let body = scrape
        .into_body(format)
        .map_err(|e| ApiError::internal(format!("encoding /metrics: {e}")))?;
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, format.content_type())], body).into_response())
}

/// The exposition formats `/metrics` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4: what any scraper reads.
    Prometheus,
    /// OpenMetrics 1.0 text, which Prometheus asks for first.
    OpenMetrics,
}

impl Format {
    /// OpenMetrics when `Accept` lists it (with a non-zero `q`), the
    /// Prometheus text format otherwise.
    pub fn negotiate(headers: &HeaderMap) -> Format {
        let wants_openmetrics = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media = parts.next().unwrap_or_default();
                let refused = parts
                    .filter_map(|p| p.strip_prefix("q="))
                    .any(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0));
                media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
            });
        if wants_openmetrics {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

/// Everything one scrape read, at `now`.
#[derive(Debug, Default)]
pub struct Scrape {
    pub now: DateTime<Utc>,
    pub snap: MetricsSnapshot,
    /// Templates WhatsApp rejected, paused or disabled (issue 14).
    pub blocked: Vec<BlockedTemplate>,
    /// Each alert's verdict, as the console's banner judges it.
    pub readings: Vec<Reading>,
    /// `None`: no `[backup]` configured.
    pub backup: Option<BackupMeasure>,
    pub beats: Vec<Heartbeat>,
    pub feeds: Vec<FeedRow>,
}

impl Scrape {
    /// The response body in `format`.
    pub fn into_body(self, format: Format) -> Result<String, fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut body = String::new();
        match format {
            Format::Prometheus => prometheus_text::encode(&mut body, &registry)?,
            Format::OpenMetrics => text::encode(&mut body, &registry)?,
        }
        Ok(body)
    }

    /// A stored counter's value by name (0 before it first counts).
    fn counter(&self, c: &Counter) -> i64 {
        let name = c.name();
        self.snap.counters.iter().find(|(n, _)| *n == name).map_or(0, |c| c.1)
    }
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        duplicates_family(&mut e, self)?;
        intention_families(&mut e, self)?;
        latency_family(&mut e, &self.snap)?;
        outcome_families(&mut e, &self.snap)?;
        webhook_families(&mut e, &self.snap)?;
        template_family(&mut e, &self.blocked)?;
        alert_families(&mut e, &self.readings)?;
        backup_families(&mut e, self.backup.as_ref())?;
        dispatcher_families(&mut e, &self.beats, self.now)?;
        channel_families(&mut e, &self.beats, self.now)?;
        feed_families(&mut e, &self.feeds)
    }
}

/// A sample's labels, in the order they are written.
type Labels<'a> = Vec<(&'static str, &'a str)>;

/// A family of gauges. One without samples is left out whole, as the
/// library's registry leaves out its own empty families.
fn gauges<'a, V: EncodeGaugeValue>(
    e: &mut DescriptorEncoder,
    name: &'static str,
    help: &str,
    samples: impl IntoIterator<Item = (Labels<'a>, V)>,
) -> fmt::Result {
    family(e, name, help, MetricType::Gauge, samples, |m, v| m.encode_gauge(v))
}

/// A family of counters, named without `_total` (the encoder adds it).
fn counters<'a>(
    e: &mut DescriptorEncoder,
    name: &'static str,
    help: &str,
    samples: impl IntoIterator<Item = (Labels<'a>, i64)>,
) -> fmt::Result {
    let samples = samples.into_iter().map(|(l, v)| (l, u64::try_from(v).unwrap_or(0)));
    family(e, name, help, MetricType::Counter, samples, |m, v| {
        m.encode_counter::<NoLabelSet, _, u64>(v, None)
    })
}

fn family<'a, V>(
    e: &mut DescriptorEncoder,
    name: &'static str,
    help: &str,
    kind: MetricType,
    samples: impl IntoIterator<Item = (Labels<'a>, V)>,
    put: impl Fn(&mut MetricEncoder<'_>, &V) -> fmt::Result,
) -> fmt::Result {
    let samples: Vec<_> = samples.into_iter().collect();
    if samples.is_empty() {
        return Ok(());
    }
    let mut m = e.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in &samples {
        put(&mut m.encode_family(labels)?, v)?;
    }
    Ok(())
}

/// Keys and events presented again, blocked (in total and per webhook
/// source).
fn duplicates_family(e: &mut DescriptorEncoder, s: &Scrape) -> fmt::Result {
    let mut samples = vec![
        (vec![("kind", "keys")], s.counter(&Counter::DuplicateKeys)),
        (vec![("kind", "events")], s.counter(&Counter::DuplicateEvents)),
    ];
    for src in [Source::Cloud, Source::Motor] {
        samples.push((
            vec![("kind", "webhook_events"), ("source", src.as_str())],
            s.counter(&Counter::DuplicateEventsFrom(src)),
        ));
    }
    counters(
        e,
        "unavez_duplicates_blocked",
        "Duplicates blocked: keys presented again, events received again.",
        samples,
    )
}

/// Intentions by state, and how long the oldest uncertain one has waited.
fn intention_families(e: &mut DescriptorEncoder, s: &Scrape) -> fmt::Result {
    gauges(
        e,
        "unavez_intentions",
        "Intentions by state.",
        s.snap.by_state.iter().map(|(st, n)| (vec![("state", st.as_str())], *n)),
    )?;
    let age = s
        .snap
        .oldest_uncertain_since
        .map_or(0.0, |t| (s.now - t).num_milliseconds().max(0) as f64 / 1000.0);
    gauges(
        e,
        "unavez_oldest_uncertain_age_seconds",
        "Age of the oldest uncertain intention (0 if none).",
        [(vec![], age)],
    )
}

/// The histogram from due time to the first evidence of acceptance.
fn latency_family(e: &mut DescriptorEncoder, s: &MetricsSnapshot) -> fmt::Result {
    let h = &s.latency_to_acceptance;
    // The ledger counts cumulatively, the encoder wants each bucket's own
    // count; the `+Inf` bucket is given so both formats write it.
    let mut below = 0;
    let mut buckets: Vec<(f64, u64)> = LATENCY_BUCKETS_MS
        .iter()
        .zip(&h.cumulative)
        .map(|(bound, up_to)| {
            let own = (up_to - below).max(0);
            below = *up_to;
            (*bound as f64 / 1000.0, own.unsigned_abs())
        })
        .collect();
    buckets.push((f64::INFINITY, (h.count - below).max(0).unsigned_abs()));
    e.encode_descriptor(
        "unavez_latency_to_acceptance_seconds",
        "From due time to the first evidence of acceptance, per intention.",
        None,
        MetricType::Histogram,
    )?
    .encode_histogram::<NoLabelSet>(h.sum_ms as f64 / 1000.0, h.count.max(0).unsigned_abs(), &buckets, None)
}

/// How sends ended: channel errors, delivered and read, opt-outs and
/// closures.
fn outcome_families(e: &mut DescriptorEncoder, s: &MetricsSnapshot) -> fmt::Result {
    counters(
        e,
        "unavez_errors",
        "Channel errors by template and code (attempts and failure webhooks).",
        s.errors
            .iter()
            .map(|(t, code, n)| (vec![("template", t.as_str()), ("code", code.as_str())], *n)),
    )?;
    gauges(
        e,
        "unavez_delivered",
        "Intentions with delivery evidence (delivered or read).",
        [(vec![], s.delivered)],
    )?;
    gauges(e, "unavez_read", "Intentions read by the customer.", [(vec![], s.read)])?;
    gauges(
        e,
        "unavez_opt_outs",
        "Contacts opted out, by category.",
        [
            (vec![("category", "marketing")], s.opt_outs_marketing),
            (vec![("category", "transactional")], s.opt_outs_transactional),
        ],
    )?;
    gauges(
        e,
        "unavez_closures",
        "Cancelled intentions by reason.",
        s.closures
            .iter()
            .map(|(reason, n)| (vec![("reason", reason.as_str())], *n)),
    )
}

/// Webhook events stored by status, and requests or events refused.
fn webhook_families(e: &mut DescriptorEncoder, s: &MetricsSnapshot) -> fmt::Result {
    gauges(
        e,
        "unavez_channel_events",
        "Webhook events stored, by source, kind and processing status.",
        s.channel_events.iter().map(|(src, kind, status, n)| {
            (
                vec![
                    ("source", src.as_str()),
                    ("kind", kind.as_str()),
                    ("status", status.as_str()),
                ],
                *n,
            )
        }),
    )?;
    counters(
        e,
        "unavez_webhook_rejected",
        "Requests or events refused, by source and reason.",
        s.counters.iter().filter_map(|(name, n)| match Counter::parse(name) {
            Some(Counter::WebhookRejected(src, reason)) => {
                Some((vec![("source", src.as_str()), ("reason", reason.as_str())], *n))
            }
            _ => None,
        }),
    )
}

/// Templates WhatsApp rejected, paused or disabled (issue 14): one sample
/// per template, with the planned messages held in review for it.
fn template_family(e: &mut DescriptorEncoder, blocked: &[BlockedTemplate]) -> fmt::Result {
    gauges(
        e,
        "unavez_template_blocked",
        "Templates WhatsApp reports rejected, paused or disabled, with their messages held in review.",
        blocked.iter().map(|b| {
            (
                vec![
                    ("template", b.name.as_str()),
                    ("language", b.language.as_str()),
                    ("status", b.status.as_str()),
                ],
                b.held,
            )
        }),
    )
}

/// Each alert's verdict, measure and threshold (`[alerts]`), as the console's
/// banner judges them (`domain::alert`): `assets/prometheus-alerts.yml`
/// alerts on `unavez_alert == 1`.
fn alert_families(e: &mut DescriptorEncoder, readings: &[Reading]) -> fmt::Result {
    let by_kind = |r: &Reading| vec![("kind", r.kind.as_str())];
    gauges(
        e,
        "unavez_alert",
        "1 while an [alerts] threshold is crossed (a blocked template always is), else 0.",
        readings.iter().map(|r| (by_kind(r), i64::from(r.crossed))),
    )?;
    gauges(
        e,
        "unavez_alert_value",
        "What each alert measures: seconds for oldest_uncertain, a count otherwise.",
        readings.iter().map(|r| (by_kind(r), r.value)),
    )?;
    gauges(
        e,
        "unavez_alert_threshold",
        "Each alert's threshold in its value's unit; absent while the alert is off.",
        readings.iter().filter_map(|r| Some((by_kind(r), r.threshold?))),
    )
}

/// The periodic backups `serve` runs (`[backup]`): when the last one
/// succeeded and failed, as Unix times. No samples without backups
/// configured; 0 before a first success or failure.
fn backup_families(e: &mut DescriptorEncoder, backup: Option<&BackupMeasure>) -> fmt::Result {
    let unix = |t: Option<DateTime<Utc>>| t.map_or(0, |t| t.timestamp());
    gauges(
        e,
        "unavez_backup_last_success_timestamp_seconds",
        "Unix time of the newest good backup of [backup] (0: none yet); absent without [backup].",
        backup.map(|b| (vec![], unix(b.last_success))),
    )?;
    gauges(
        e,
        "unavez_backup_last_failure_timestamp_seconds",
        "Unix time of the last failed backup of [backup] (0: none since the start); absent without [backup].",
        backup.map(|b| (vec![], unix(b.last_failure))),
    )
}

/// Dispatchers by what their heartbeat rows say (`domain::heartbeat`):
/// running and paused ones that beat within three of their intervals, and
/// the ones that stopped beating without a goodbye (crashed, killed) in the
/// last ten minutes.
fn dispatcher_families(e: &mut DescriptorEncoder, beats: &[Heartbeat], now: DateTime<Utc>) -> fmt::Result {
    let count = |want: Liveness| beats.iter().filter(|b| b.liveness(now) == want).count();
    gauges(
        e,
        "unavez_dispatchers",
        "Dispatchers on this ledger by heartbeat: running, paused, or gone (stopped beating, no clean shutdown) in the last 10 minutes.",
        [
            ("running", count(Liveness::Alive(DispatcherState::Running))),
            ("paused", count(Liveness::Alive(DispatcherState::Paused))),
            ("gone", count(Liveness::Gone)),
        ]
        .map(|(state, n)| (vec![("state", state)], n)),
    )
}

/// Live dispatchers whose channel refused them, by fault (docs/design.md,
/// "A channel that refuses us"): every fault has a sample, 0 when none.
fn channel_families(e: &mut DescriptorEncoder, beats: &[Heartbeat], now: DateTime<Utc>) -> fmt::Result {
    let paused = |fault: ChannelFault| {
        beats
            .iter()
            .filter(|b| matches!(b.liveness(now), Liveness::Alive(_)))
            .filter(|b| b.channel.as_ref().is_some_and(|c| c.fault == fault))
            .count()
    };
    gauges(
        e,
        "unavez_channel_paused",
        "Live dispatchers that paused sending because the channel refused them, by fault (credential_rejected, instance_unknown, instance_disconnected, tls).",
        ChannelFault::ALL.map(|fault| (vec![("code", fault.as_str())], paused(fault))),
    )
}

/// A per-feed gauge: its name, help text and value.
type FeedGauge = (&'static str, &'static str, fn(&FeedRow) -> i64);

/// Each calendar feed by name (never its URL): when it last succeeded and
/// failed (Unix seconds, 0 for never), what its last body held and
/// changed, and what it holds for review.
fn feed_families(e: &mut DescriptorEncoder, feeds: &[FeedRow]) -> fmt::Result {
    fn secs(t: Option<DateTime<Utc>>) -> i64 {
        t.map_or(0, |t| t.timestamp())
    }
    let per_feed: [FeedGauge; 5] = [
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
    for (name, help, value) in per_feed {
        gauges(
            e,
            name,
            help,
            feeds.iter().map(|f| (vec![("feed", f.name.as_str())], value(f))),
        )?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
