//! The operator console's screen queries. Each one is paginated and served
//! by an index or a derived table, so opening a screen costs about the same
//! with a thousand intentions as with a million:
//!
//! - Atención: `intentions_attention` (0002: uncertain/review/failed by the
//!   commitment's start time) walked from `now` both ways up to the page,
//!   `intentions_lease` for stuck dispatches, `commitments_reschedule` for
//!   reschedule requests, `refused_events_ref` (0003) for booking events
//!   refused as conflicts; the total from `intention_counts`;
//! - Próximas citas: `commitments_starts_at`, then `intentions_commitment`
//!   for the rows of one page only;
//! - Tablero: `intention_counts` (0002, kept by triggers) for one operating
//!   day, `intentions_day_state` for closures, `contacts_opt_out`.

use chrono::{DateTime, Duration, Utc};
use rusqlite::{Row, params};
use serde::Serialize;

use super::{Result, Tx, from_ms, ms};

/// What an attention row is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// An intention that needs a person (uncertain, review, failed, stuck).
    Intention,
    /// The customer asked to reschedule the commitment.
    RescheduleRequest,
    /// A booking event refused as a conflict (same version, other content),
    /// not yet settled by a newer version: a technician must look.
    RefusedEvent,
}

/// One row of the Atención list or of a Tablero drill-down.
#[derive(Debug, Clone, Serialize)]
pub struct AttentionRow {
    pub kind: RowKind,
    pub intention_id: Option<i64>,
    pub key: Option<String>,
    pub commitment_id: i64,
    pub commitment_ref: String,
    pub starts_at: Option<DateTime<Utc>>,
    /// Raw E.164; the console masks it before showing it.
    pub phone: Option<String>,
    pub purpose: String,
    /// The intention state, or `stuck` for a dispatch whose lease expired,
    /// `reschedule` for a reschedule request, `refused_event` for a refused
    /// booking event (then `purpose` is the event's type, `state_reason`
    /// the refusal and `last_event` its event id and the refusal).
    pub state: String,
    pub state_reason: Option<String>,
    /// Since when the row is in this situation.
    pub since: DateTime<Utc>,
    /// History rows that carry evidence (channel, webhook, reconciler or
    /// operator facts).
    pub evidence_count: i64,
    /// The latest history row, as `signal (cause): note`.
    pub last_event: Option<String>,
}

/// The Atención query's parameters.
#[derive(Debug, Clone)]
pub struct AttentionQuery {
    pub now: DateTime<Utc>,
    /// Substring of the commitment reference or intention key.
    pub filter: Option<String>,
    /// Failed intentions older than this (by due time) have left the desk.
    pub failed_window: Duration,
    /// Reschedule requests are shown for commitments starting in
    /// `[now - window, now + window]`.
    pub reschedule_window: Duration,
    pub limit: u32,
    pub offset: u32,
}

impl AttentionQuery {
    pub fn new(now: DateTime<Utc>) -> Self {
        AttentionQuery {
            now,
            filter: None,
            failed_window: Duration::days(3),
            reschedule_window: Duration::days(7),
            limit: 50,
            offset: 0,
        }
    }
}

/// A page of rows and the total behind it.
#[derive(Debug, Clone, Serialize)]
pub struct Page<T> {
    pub rows: Vec<T>,
    pub total: i64,
    pub offset: u32,
}

/// One appointment of the Próximas citas screen.
#[derive(Debug, Clone, Serialize)]
pub struct UpcomingRow {
    pub commitment_id: i64,
    pub commitment_ref: String,
    pub kind: String,
    pub status: String,
    pub version: i64,
    pub starts_at: Option<DateTime<Utc>>,
    pub phone: Option<String>,
    pub confirmed_at: Option<DateTime<Utc>>,
    pub manual_contact_at: Option<DateTime<Utc>>,
    pub reschedule_requested_at: Option<DateTime<Utc>>,
    pub notifications: Vec<NotificationCell>,
}

/// One intention of an upcoming appointment, as the desk sees it.
#[derive(Debug, Clone, Serialize)]
pub struct NotificationCell {
    pub intention_id: i64,
    pub purpose: String,
    pub version: i64,
    pub state: String,
    pub state_reason: Option<String>,
    pub is_resend: bool,
}

/// The Tablero for one operating day.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Board {
    pub day: String,
    pub by_state: Vec<(String, i64)>,
    pub closures: Vec<(String, i64)>,
    pub duplicate_keys: i64,
    pub duplicate_events: i64,
    pub opt_outs: i64,
    /// Median milliseconds from due time to the channel's acceptance, over
    /// the day's accepted attempts (a sample of at most 500: each one is
    /// an attempt lookup, and a busy day has ten thousand).
    pub latency_ms_median: Option<i64>,
    pub latency_samples: i64,
}

/// Which rows a Tablero counter stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CounterQuery {
    pub day: String,
    pub states: Vec<String>,
    /// Only cancelled intentions closed for this reason.
    pub reason: Option<String>,
}

const EVIDENCE_SIGNALS: &str = "('accepted','sent','delivered','read','failed')";

/// The latest history row of intention `i`, as `signal (cause): note`.
const LAST_EVENT: &str =
    "(SELECT h.signal || ' (' || h.cause || ')' || coalesce(': ' || coalesce(h.evidence, h.note), '')
        FROM intention_history h WHERE h.intention_id = i.id ORDER BY h.id DESC LIMIT 1)";

fn attention_row(r: &Row<'_>) -> rusqlite::Result<AttentionRow> {
    let kind: String = r.get(0)?;
    Ok(AttentionRow {
        kind: match kind.as_str() {
            "reschedule" => RowKind::RescheduleRequest,
            "refused" => RowKind::RefusedEvent,
            _ => RowKind::Intention,
        },
        intention_id: r.get(1)?,
        key: r.get(2)?,
        commitment_id: r.get(3)?,
        commitment_ref: r.get(4)?,
        starts_at: r.get::<_, Option<i64>>(5)?.map(from_ms),
        phone: r.get(6)?,
        purpose: r.get(7)?,
        state: r.get(8)?,
        state_reason: r.get(9)?,
        since: from_ms(r.get(10)?),
        evidence_count: r.get(11)?,
        last_event: r.get(12)?,
    })
}

/// Display columns of intention `i` (joined with commitment `c`) in the
/// attention shape. Only ever computed for one page of rows.
fn intention_cols() -> String {
    format!(
        "'intention', i.id, i.key, c.id, c.ref, c.starts_at, i.recipient, i.purpose,
            CASE WHEN i.state = 'dispatching' THEN 'stuck' ELSE i.state END, i.state_reason, i.state_changed_at,
            (SELECT count(*) FROM intention_history h WHERE h.intention_id = i.id
                AND (h.evidence IS NOT NULL OR h.signal IN {EVIDENCE_SIGNALS})),
            {LAST_EVENT}"
    )
}

impl Tx<'_> {
    /// The Atención list: uncertain, review, recently failed and stuck
    /// intentions plus reschedule requests and unsettled refused booking
    /// events; nearest upcoming commitment first (then the most recent past
    /// ones), then the least evidence.
    pub fn attention(&self, q: &AttentionQuery) -> Result<Page<AttentionRow>> {
        let now = ms(q.now);
        let failed_since = ms(q.now - q.failed_window);
        let (win_lo, win_hi) = (ms(q.now - q.reschedule_window), ms(q.now + q.reschedule_window));
        let like = q
            .filter
            .as_deref()
            .filter(|f| !f.trim().is_empty())
            .map(|f| format!("%{}%", f.trim()));
        // The page is computed from candidates, never from the whole
        // attention set. Uncertain/review/failed rows are walked through
        // `intentions_attention` (a partial index by the commitment's start
        // time, copied onto each intention by migration 0002's triggers),
        // upcoming ones ascending from `now`, past ones descending, and each
        // walk stops at the (offset + limit)-th row, keeping every row tied
        // with it: a row on the page has fewer than offset + limit rows
        // strictly before it, so it is a candidate of its own walk. Rows
        // without a start time (all tied) are only needed when the two walks
        // together hold fewer rows than that. Stuck dispatches and
        // reschedule requests are few and always candidates. Only then is
        // evidence counted, for the candidates alone.
        // ?5 is NULL when there is no filter; the OR short-circuits.
        let filter = "(?5 IS NULL OR c.ref LIKE ?5 OR i.key LIKE ?5)";
        let cond = format!(
            "(i.state IN ('uncertain', 'review')
                    OR (i.state = 'failed' AND i.due_at >= ?2)
                    OR (i.state = 'dispatching' AND i.lease_until < ?1))
                AND {filter}"
        );
        let resched = "c.starts_at BETWEEN ?3 AND ?4 AND c.reschedule_requested_at IS NOT NULL
                AND c.status != 'cancelled' AND (?5 IS NULL OR c.ref LIKE ?5)";
        // Few by nature (a conflict is a booking system's mistake), so all
        // are candidates; a newer version of the commitment settles one.
        let refused = "FROM refused_events r JOIN commitments c ON c.ref = r.commitment_ref
                WHERE c.version <= r.version AND (?5 IS NULL OR c.ref LIKE ?5 OR r.event_id LIKE ?5)";
        let keys = format!(
            "WITH att AS NOT MATERIALIZED (
                 SELECT i.id AS iid, i.commitment_id AS cid, i.starts_at AS s
                 FROM intentions i INDEXED BY intentions_attention JOIN commitments c ON c.id = i.commitment_id
                 WHERE i.state IN ('uncertain', 'review', 'failed')
                   AND (i.state != 'failed' OR i.due_at >= ?2) AND {filter}),
             up AS MATERIALIZED (SELECT * FROM att WHERE s >= ?1 AND s <= coalesce(
                 (SELECT s FROM att WHERE s >= ?1 ORDER BY s LIMIT 1 OFFSET ?6 + ?7 - 1), 9223372036854775807)),
             past AS MATERIALIZED (SELECT * FROM att WHERE s < ?1 AND s >= coalesce(
                 (SELECT s FROM att WHERE s < ?1 ORDER BY s DESC LIMIT 1 OFFSET ?6 + ?7 - 1), -9223372036854775808)),
             cand AS (
                 SELECT 'intention' AS kind, iid, cid, s AS starts FROM up
                 UNION ALL SELECT 'intention', iid, cid, s FROM past
                 UNION ALL SELECT 'intention', iid, cid, s FROM att
                     WHERE s IS NULL AND (SELECT count(*) FROM up) + (SELECT count(*) FROM past) < ?6 + ?7
                 UNION ALL SELECT 'intention', i.id, i.commitment_id, c.starts_at
                     FROM intentions i JOIN commitments c ON c.id = i.commitment_id
                     WHERE i.state = 'dispatching' AND i.lease_until < ?1 AND {filter}
                 UNION ALL SELECT 'reschedule', NULL, c.id, c.starts_at FROM commitments c WHERE {resched}
                 UNION ALL SELECT 'refused', r.id, c.id, c.starts_at {refused})
             SELECT kind, iid, cid, starts,
                 CASE WHEN kind = 'intention' THEN (SELECT count(*) FROM intention_history h
                     WHERE h.intention_id = cand.iid
                       AND (h.evidence IS NOT NULL OR h.signal IN {EVIDENCE_SIGNALS})) ELSE 0 END AS ev
             FROM cand"
        );
        let order = "ORDER BY CASE WHEN p.starts IS NULL THEN 2 WHEN p.starts >= ?1 THEN 0 ELSE 1 END,
                CASE WHEN p.starts >= ?1 THEN p.starts ELSE -p.starts END, p.ev, p.iid";
        let page_sql = format!(
            "SELECT p.kind, i.id, i.key, c.id, c.ref, c.starts_at, coalesce(i.recipient, k.phone),
                coalesce(i.purpose, r.type, 'reprogramar'),
                CASE WHEN p.kind = 'reschedule' THEN 'reschedule' WHEN p.kind = 'refused' THEN 'refused_event'
                     WHEN i.state = 'dispatching' THEN 'stuck' ELSE i.state END,
                coalesce(i.state_reason, r.reason),
                coalesce(i.state_changed_at, r.last_seen_at, c.reschedule_requested_at), p.ev,
                coalesce({LAST_EVENT}, r.event_id || ': ' || r.reason)
             FROM (SELECT * FROM ({keys}) p {order} LIMIT ?6 OFFSET ?7) p
             JOIN commitments c ON c.id = p.cid
             LEFT JOIN intentions i ON i.id = p.iid AND p.kind = 'intention'
             LEFT JOIN refused_events r ON r.id = p.iid AND p.kind = 'refused'
             LEFT JOIN contacts k ON k.id = c.contact_id
             {order}"
        );
        let limit = if q.limit == 0 { 50 } else { q.limit };
        let rows = self
            .conn()
            .prepare_cached(&page_sql)?
            .query_map(
                params![now, failed_since, win_lo, win_hi, like, limit, q.offset],
                attention_row,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        // Unfiltered, the total never touches the attention set row by
        // row: uncertain and review from `intention_counts`, recent failures
        // and stuck dispatches by index ranges, reschedule requests by their
        // partial index. (Every intention has its commitment: foreign key.)
        let total_sql = if like.is_none() {
            format!(
                "SELECT (SELECT coalesce(sum(n), 0) FROM intention_counts WHERE state IN ('uncertain', 'review'))
                      + (SELECT count(*) FROM intentions WHERE state = 'failed' AND due_at >= ?2)
                      + (SELECT count(*) FROM intentions WHERE state = 'dispatching' AND lease_until < ?1)
                      + (SELECT count(*) FROM commitments c WHERE {resched})
                      + (SELECT count(*) {refused})"
            )
        } else {
            format!(
                "SELECT (SELECT count(*) FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE {cond})
                      + (SELECT count(*) FROM commitments c WHERE {resched})
                      + (SELECT count(*) {refused})"
            )
        };
        let total: i64 = self
            .conn()
            .query_row(&total_sql, params![now, failed_since, win_lo, win_hi, like], |r| {
                r.get(0)
            })?;
        Ok(Page {
            rows,
            total,
            offset: q.offset,
        })
    }

    /// Appointments (and orders) starting in `[from, to)`, ordered by time,
    /// each with the status of its notifications.
    pub fn upcoming(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        filter: Option<&str>,
        limit: u32,
        offset: u32,
    ) -> Result<Page<UpcomingRow>> {
        let like = filter
            .filter(|f| !f.trim().is_empty())
            .map(|f| format!("%{}%", f.trim()));
        let limit = if limit == 0 { 50 } else { limit };
        let mut stmt = self.conn().prepare_cached(
            "SELECT c.id, c.ref, c.kind, c.status, c.version, c.starts_at, k.phone, c.confirmed_at,
                    c.manual_contact_at, c.reschedule_requested_at
             FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id
             WHERE c.starts_at >= ?1 AND c.starts_at < ?2 AND (?3 IS NULL OR c.ref LIKE ?3)
             ORDER BY c.starts_at, c.id LIMIT ?4 OFFSET ?5",
        )?;
        let mut rows: Vec<UpcomingRow> = stmt
            .query_map(params![ms(from), ms(to), like, limit, offset], |r| {
                Ok(UpcomingRow {
                    commitment_id: r.get(0)?,
                    commitment_ref: r.get(1)?,
                    kind: r.get(2)?,
                    status: r.get(3)?,
                    version: r.get(4)?,
                    starts_at: r.get::<_, Option<i64>>(5)?.map(from_ms),
                    phone: r.get(6)?,
                    confirmed_at: r.get::<_, Option<i64>>(7)?.map(from_ms),
                    manual_contact_at: r.get::<_, Option<i64>>(8)?.map(from_ms),
                    reschedule_requested_at: r.get::<_, Option<i64>>(9)?.map(from_ms),
                    notifications: Vec::new(),
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut cells = self.conn().prepare_cached(
            "SELECT id, purpose, commitment_version, state, state_reason, related_id IS NOT NULL
             FROM intentions WHERE commitment_id = ?1 ORDER BY id",
        )?;
        for row in &mut rows {
            row.notifications = cells
                .query_map([row.commitment_id], |r| {
                    Ok(NotificationCell {
                        intention_id: r.get(0)?,
                        purpose: r.get(1)?,
                        version: r.get(2)?,
                        state: r.get(3)?,
                        state_reason: r.get(4)?,
                        is_resend: r.get(5)?,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
        }
        let total: i64 = self.conn().query_row(
            "SELECT count(*) FROM commitments c WHERE c.starts_at >= ?1 AND c.starts_at < ?2 AND (?3 IS NULL OR c.ref LIKE ?3)",
            params![ms(from), ms(to), like],
            |r| r.get(0),
        )?;
        Ok(Page { rows, total, offset })
    }

    /// The Tablero's counters for one operating day (`YYYY-MM-DD`).
    pub fn board(&self, day: &str) -> Result<Board> {
        let by_state: Vec<(String, i64)> = self
            .conn()
            .prepare_cached("SELECT state, n FROM intention_counts WHERE day = ?1 AND n > 0 ORDER BY state")?
            .query_map([day], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let closures: Vec<(String, i64)> = self
            .conn()
            .prepare_cached(
                "SELECT coalesce(state_reason, '-'), count(*) FROM intentions WHERE day = ?1 AND state = 'cancelled'
                 GROUP BY 1 ORDER BY 2 DESC, 1",
            )?
            .query_map([day], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let opt_outs: i64 = self.conn().query_row(
            "SELECT count(*) FROM contacts WHERE opt_out_marketing_at IS NOT NULL OR opt_out_transactional_at IS NOT NULL",
            [],
            |r| r.get(0),
        )?;
        let mut latencies: Vec<i64> = self
            .conn()
            .prepare_cached(
                "SELECT a.ended_at - i.due_at FROM intentions i JOIN attempts a ON a.intention_id = i.id
                 WHERE i.day = ?1 AND i.state IN ('accepted','sent','delivered','read')
                   AND a.outcome = 'accepted' AND a.ended_at IS NOT NULL LIMIT 500",
            )?
            .query_map([day], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        latencies.sort_unstable();
        Ok(Board {
            day: day.to_string(),
            by_state,
            closures,
            duplicate_keys: self.counter("duplicate_keys")?,
            duplicate_events: self.counter("duplicate_events")? + self.counter("duplicate_channel_events")?,
            opt_outs,
            latency_ms_median: latencies.get(latencies.len() / 2).copied(),
            latency_samples: latencies.len() as i64,
        })
    }

    /// The intentions behind a Tablero counter, in the attention shape,
    /// oldest first.
    pub fn counter_rows(&self, q: &CounterQuery, limit: u32, offset: u32) -> Result<Page<AttentionRow>> {
        use rusqlite::types::Value;
        let states = if q.states.is_empty() {
            vec!["cancelled".to_string()]
        } else {
            q.states.clone()
        };
        let n = states.len();
        let placeholders = (0..n).map(|i| format!("?{}", i + 3)).collect::<Vec<_>>().join(",");
        // Without a reason the filter is served by the covering index
        // `intentions_day_state` alone (no table reads, even for a busy day).
        let reason_cond = if q.reason.is_some() {
            "i.state_reason = ?2"
        } else {
            "?2 IS NULL"
        };
        let cond = format!("i.day = ?1 AND i.state IN ({placeholders}) AND {reason_cond}");
        let mut args: Vec<Value> = vec![
            q.day.clone().into(),
            q.reason.clone().map(Into::into).unwrap_or(Value::Null),
        ];
        args.extend(states.iter().cloned().map(Into::into));
        let total: i64 = self.conn().query_row(
            &format!("SELECT count(*) FROM intentions i WHERE {cond}"),
            rusqlite::params_from_iter(args.iter()),
            |r| r.get(0),
        )?;
        // The page's ids first, in creation order straight from the index
        // (no per-row work before LIMIT), then the display columns for
        // those rows only.
        let sql = format!(
            "SELECT {cols} FROM (SELECT i.id FROM intentions i WHERE {cond} ORDER BY i.id
                                 LIMIT ?{l} OFFSET ?{o}) p
             JOIN intentions i ON i.id = p.id JOIN commitments c ON c.id = i.commitment_id
             ORDER BY i.id",
            cols = intention_cols(),
            l = n + 3,
            o = n + 4
        );
        args.push(i64::from(if limit == 0 { 50 } else { limit }).into());
        args.push(i64::from(offset).into());
        let rows = self
            .conn()
            .prepare_cached(&sql)?
            .query_map(rusqlite::params_from_iter(args.iter()), attention_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(Page { rows, total, offset })
    }

    /// How many resends of an intention exist (to number the next one).
    pub fn resend_count(&self, intention_id: i64) -> Result<i64> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM intentions WHERE related_id = ?1",
            [intention_id],
            |r| r.get(0),
        )?)
    }

    /// A resend of `intention_id` that has not left yet (planned or in
    /// flight), if any: a second authorization would be a duplicate.
    pub fn pending_resend(&self, intention_id: i64) -> Result<Option<(i64, String)>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .conn()
            .query_row(
                "SELECT id, key FROM intentions WHERE related_id = ?1 AND state IN ('planned', 'dispatching', 'uncertain')
                 ORDER BY id LIMIT 1",
                [intention_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }
}

impl Tx<'_> {
    /// Planned intentions already due: the dispatcher's queue.
    pub fn due_queue(&self, now: DateTime<Utc>) -> Result<i64> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM intentions WHERE state = 'planned' AND due_at <= ?1",
            [ms(now)],
            |r| r.get(0),
        )?)
    }
}

impl Tx<'_> {
    /// The most recent failed, retried, uncertain or conflicting attempt
    /// that ended at or after `since`, as `code: detail`; only the last few
    /// hundred attempts are looked at, so this stays cheap on any ledger.
    pub fn last_attempt_error(&self, since: DateTime<Utc>) -> Result<Option<String>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .conn()
            .query_row(
                "SELECT outcome || coalesce(' ' || error_code, '') || coalesce(': ' || error_detail, '')
                 FROM (SELECT * FROM attempts ORDER BY id DESC LIMIT 500)
                 WHERE outcome IN ('failed', 'retry', 'uncertain', 'conflict') AND ended_at >= ?1
                 ORDER BY id DESC LIMIT 1",
                [ms(since)],
                |r| r.get(0),
            )
            .optional()?)
    }
}

#[cfg(test)]
#[path = "console_tests.rs"]
mod tests;
