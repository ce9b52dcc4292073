//! Figures for `GET /metrics`, read in one snapshot. Everything is derived
//! from the ledger itself (plus the `counters` table for things that leave
//! no row, such as rejected webhooks and blocked duplicates), so the
//! numbers survive restarts and agree with what the console shows.

use chrono::{DateTime, Utc};
use rusqlite::OptionalExtension;

use super::{Result, Tx, from_ms};
use crate::domain::state::IntentionState;

/// Upper bounds (milliseconds) of the latency-to-acceptance histogram.
pub const LATENCY_BUCKETS_MS: [i64; 11] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 1_800_000,
];

#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Cumulative counts per bound of [`LATENCY_BUCKETS_MS`].
    pub cumulative: Vec<i64>,
    pub count: i64,
    pub sum_ms: i64,
}

#[derive(Debug, Clone, Default)]
pub struct MetricsSnapshot {
    /// Every named counter (duplicates blocked, rejections by reason…).
    pub counters: Vec<(String, i64)>,
    pub by_state: Vec<(IntentionState, i64)>,
    /// Since when the oldest `uncertain` intention has been uncertain.
    pub oldest_uncertain_since: Option<DateTime<Utc>>,
    /// From the due time (or creation, if later) to the first evidence of
    /// acceptance or better.
    pub latency_to_acceptance: Histogram,
    /// `(template, error code, count)` from attempts and failure webhooks.
    pub errors: Vec<(String, String, i64)>,
    /// Intentions with delivery evidence (delivered or read).
    pub delivered: i64,
    pub read: i64,
    pub opt_outs_marketing: i64,
    pub opt_outs_transactional: i64,
    /// `(source, kind, status, count)` of channel events.
    pub channel_events: Vec<(String, String, String, i64)>,
    /// `(reason, count)` of cancelled intentions.
    pub closures: Vec<(String, i64)>,
}

impl Tx<'_> {
    /// Reads every figure `/metrics` exposes.
    pub fn metrics_snapshot(&self) -> Result<MetricsSnapshot> {
        let c = self.conn()?;
        let counters = c
            .prepare_cached("SELECT name, value FROM counters ORDER BY name")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let oldest_uncertain_since = c
            .query_row(
                "SELECT min(state_changed_at) FROM intentions WHERE state = 'uncertain'",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .optional()?
            .flatten()
            .map(from_ms);

        let bucket_cols: Vec<String> = LATENCY_BUCKETS_MS
            .iter()
            .map(|b| format!("coalesce(sum(lat <= {b}), 0)"))
            .collect();
        let latency_sql = format!(
            "WITH acc AS (
                 SELECT max(0, min(h.at) - max(i.due_at, i.created_at)) AS lat
                 FROM intentions i JOIN intention_history h ON h.intention_id = i.id
                 WHERE h.applied = 1 AND h.to_state IN ('accepted', 'sent', 'delivered', 'read')
                 GROUP BY i.id)
             SELECT count(*), coalesce(sum(lat), 0), {} FROM acc",
            bucket_cols.join(", ")
        );
        let latency_to_acceptance = c.query_row(&latency_sql, [], |r| {
            let mut cumulative = Vec::with_capacity(LATENCY_BUCKETS_MS.len());
            for i in 0..LATENCY_BUCKETS_MS.len() {
                cumulative.push(r.get(2 + i)?);
            }
            Ok(Histogram {
                count: r.get(0)?,
                sum_ms: r.get(1)?,
                cumulative,
            })
        })?;

        let errors = c
            .prepare_cached(
                "SELECT template, code, count(*) FROM (
                     SELECT i.template AS template, a.error_code AS code
                     FROM attempts a JOIN intentions i ON i.id = a.intention_id WHERE a.error_code IS NOT NULL
                   UNION ALL
                     SELECT coalesce(i.template, '?'),
                            coalesce(CAST(json_extract(e.payload, '$.errors[0].code') AS TEXT), 'unknown')
                     FROM channel_events e LEFT JOIN intentions i ON i.id = e.intention_id
                     WHERE e.source = 'cloud' AND e.kind = 'status' AND json_valid(e.payload)
                       AND json_extract(e.payload, '$.status') = 'failed'
                   UNION ALL
                     SELECT coalesce(i.template, '?'), coalesce(json_extract(e.payload, '$.detail'), 'fallido')
                     FROM channel_events e LEFT JOIN intentions i ON i.id = e.intention_id
                     WHERE e.source = 'motor' AND json_valid(e.payload)
                       AND json_extract(e.payload, '$.estado') = 'fallido')
                 GROUP BY template, code ORDER BY template, code",
            )?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;

        let count = |sql: &str| -> Result<i64> { Ok(c.query_row(sql, [], |r| r.get(0))?) };
        let channel_events = c
            .prepare_cached(
                "SELECT source, kind, status, count(*) FROM channel_events GROUP BY source, kind, status
                 ORDER BY source, kind, status",
            )?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let closures = c
            .prepare_cached(
                "SELECT coalesce(state_reason, 'unknown'), count(*) FROM intentions WHERE state = 'cancelled'
                 GROUP BY 1 ORDER BY 1",
            )?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;

        Ok(MetricsSnapshot {
            counters,
            by_state: self.count_by_state()?,
            oldest_uncertain_since,
            latency_to_acceptance,
            errors,
            delivered: count("SELECT count(*) FROM intentions WHERE state IN ('delivered', 'read')")?,
            read: count("SELECT count(*) FROM intentions WHERE state = 'read'")?,
            opt_outs_marketing: count("SELECT count(*) FROM contacts WHERE opt_out_marketing_at IS NOT NULL")?,
            opt_outs_transactional: count("SELECT count(*) FROM contacts WHERE opt_out_transactional_at IS NOT NULL")?,
            channel_events,
            closures,
        })
    }
}
