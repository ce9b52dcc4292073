//! Figures for `GET /metrics`, read in one snapshot. Everything is derived
//! from the ledger itself (plus the `counters` table for things that leave
//! no row, such as rejected webhooks and blocked duplicates), so the
//! numbers survive restarts and agree with what the console shows.

use super::{Result, Tx};
use crate::domain::state::IntentionState;
use crate::rules_sql::{self, Sql};
use crate::sql::Db;
use chrono::{DateTime, Utc};

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
        let db = self.db();
        let counters = db.rows("SELECT name, value FROM counters ORDER BY name", &[], |r| {
            Ok((r.text(0)?, r.int(1)?))
        })?;
        let oldest_uncertain_since = db
            .row(
                "SELECT min(state_changed_at) FROM intentions WHERE state = 'uncertain'",
                &[],
                |r| r.opt_time(0),
            )?
            .flatten();
        let count = |sql: &str| -> Result<i64> { Ok(db.row(sql, &[], |r| r.int(0))?.unwrap_or(0)) };
        let mut channel_events = db.rows(
            "SELECT source, kind, status, count(*) FROM channel_events GROUP BY source, kind, status",
            &[],
            |r| Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.int(3)?)),
        )?;
        channel_events.sort();
        let mut closures = db.rows(
            "SELECT coalesce(state_reason, 'unknown'), count(*) FROM intentions WHERE state = 'cancelled'
             GROUP BY 1",
            &[],
            |r| Ok((r.text(0)?, r.int(1)?)),
        )?;
        closures.sort();
        Ok(MetricsSnapshot {
            counters,
            by_state: self.count_by_state()?,
            oldest_uncertain_since,
            latency_to_acceptance: latency_to_acceptance(&db)?,
            errors: errors(&db)?,
            delivered: count(&DELIVERED)?,
            read: count("SELECT count(*) FROM intentions WHERE state = 'read'")?,
            opt_outs_marketing: count("SELECT count(*) FROM contacts WHERE opt_out_marketing_at IS NOT NULL")?,
            opt_outs_transactional: count("SELECT count(*) FROM contacts WHERE opt_out_transactional_at IS NOT NULL")?,
            channel_events,
            closures,
        })
    }
}

/// Intentions whose message reached the customer.
static DELIVERED: Sql = Sql::new(|| {
    format!(
        "SELECT count(*) FROM intentions WHERE state IN {}",
        rules_sql::REACHED_STATES
    )
});

/// Due (or created, for an intention reserved late) to the first applied
/// move into an accepted state, as a cumulative histogram.
fn latency_to_acceptance(db: &Db<'_>) -> Result<Histogram> {
    let bucket_cols: Vec<String> = LATENCY_BUCKETS_MS
        .iter()
        .map(|b| format!("CAST(coalesce(sum(CASE WHEN lat <= {b} THEN 1 ELSE 0 END), 0) AS BIGINT)"))
        .collect();
    // Scalar max()/min() exist on SQLite only: CASE says the same on both.
    let sql = format!(
        "WITH acc AS (
             SELECT min(h.at) - CASE WHEN i.due_at > i.created_at THEN i.due_at ELSE i.created_at END AS wait
             FROM intentions i JOIN intention_history h ON h.intention_id = i.id
             WHERE h.applied = 1 AND h.to_state IN {accepted}
             GROUP BY i.id),
         clamped AS (SELECT CASE WHEN wait > 0 THEN wait ELSE 0 END AS lat FROM acc)
         SELECT count(*), CAST(coalesce(sum(lat), 0) AS BIGINT), {} FROM clamped",
        bucket_cols.join(", "),
        accepted = rules_sql::CHANNEL_EVIDENCE_STATES,
    );
    let histogram = db.row(&sql, &[], |r| {
        let mut cumulative = Vec::with_capacity(LATENCY_BUCKETS_MS.len());
        for i in 0..LATENCY_BUCKETS_MS.len() {
            cumulative.push(r.int(2 + i)?);
        }
        Ok(Histogram {
            count: r.int(0)?,
            sum_ms: r.int(1)?,
            cumulative,
        })
    })?;
    Ok(histogram.unwrap_or_default())
}

/// `(template, error code, count)` over failed attempts and failed status
/// events. The events' JSON is read with each engine's own functions (on
/// PostgreSQL through `unavez_json`, which reads a malformed body as NULL
/// as SQLite's `json_valid` guard does).
fn errors(db: &Db<'_>) -> Result<Vec<(String, String, i64)>> {
    let (cloud_code, cloud_failed, motor_detail, motor_failed) = if db.is_pg() {
        (
            "unavez_json(e.payload) #>> '{errors,0,code}'",
            "unavez_json(e.payload) ->> 'status' = 'failed'",
            "unavez_json(e.payload) ->> 'detail'",
            "unavez_json(e.payload) ->> 'estado' = 'fallido'",
        )
    } else {
        (
            "CAST(json_extract(e.payload, '$.errors[0].code') AS TEXT)",
            "json_valid(e.payload) AND json_extract(e.payload, '$.status') = 'failed'",
            "json_extract(e.payload, '$.detail')",
            "json_valid(e.payload) AND json_extract(e.payload, '$.estado') = 'fallido'",
        )
    };
    let sql = format!(
        "SELECT template, code, count(*) FROM (
             SELECT i.template AS template, a.error_code AS code
             FROM attempts a JOIN intentions i ON i.id = a.intention_id WHERE a.error_code IS NOT NULL
           UNION ALL
             SELECT coalesce(i.template, '?'), coalesce({cloud_code}, 'unknown')
             FROM channel_events e LEFT JOIN intentions i ON i.id = e.intention_id
             WHERE e.source = 'cloud' AND e.kind = 'status' AND {cloud_failed}
           UNION ALL
             SELECT coalesce(i.template, '?'), coalesce({motor_detail}, 'fallido')
             FROM channel_events e LEFT JOIN intentions i ON i.id = e.intention_id
             WHERE e.source = 'motor' AND {motor_failed}) AS failures
         GROUP BY template, code"
    );
    let mut rows = db.rows(&sql, &[], |r| Ok((r.text(0)?, r.text(1)?, r.int(2)?)))?;
    // Byte order on both engines (a database's collation may differ).
    rows.sort();
    Ok(rows)
}
