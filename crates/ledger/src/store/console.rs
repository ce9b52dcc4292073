//! The operator console's screen queries. Each one is paginated and served
//! by an index or a derived table, so opening a screen costs about the same
//! with a thousand intentions as with a million:
//!
//! - Atención: see `attention.rs` (the work queue built from the domain's
//!   attention rule);
//! - Próximas citas: `commitments_starts_at`, then `intentions_commitment`
//!   for the rows of one page only;
//! - Tablero: `intention_counts` (0002, kept by triggers) for one operating
//!   day, `intentions_day_state` for closures, `contacts_opt_out`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::attention::{AttentionRow, Search, attention_row, intention_keys, page_sql};
use super::search::{Matches, fuzzy_rank_sql, matched_commitments_sql};
use super::{Result, Tx, ms};
use crate::domain::commitment::{CommitmentKind, CommitmentStatus};
use crate::domain::counter::Counter;
use crate::domain::lifecycle::OperatingDay;
use crate::rows::Cols;
use crate::rules_sql::{self, Sql};
use crate::sql::Value;
use crate::vals;

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
    pub kind: CommitmentKind,
    pub status: CommitmentStatus,
    pub version: i64,
    pub starts_at: Option<DateTime<Utc>>,
    pub phone: Option<String>,
    pub confirmed_at: Option<DateTime<Utc>>,
    pub manual_contact_at: Option<DateTime<Utc>>,
    pub reschedule_requested_at: Option<DateTime<Utc>>,
    /// The patient's name, when the booking system gave one.
    pub name: Option<String>,
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
    /// When it entered its state: an action taken from the patient card
    /// is refused if the message changed since it was shown.
    pub state_changed_at: DateTime<Utc>,
    // --- issue 25 §3: what the guards read, on the patient card only ---
    /// The resend family (`Tx::families`); `None` on Próximas citas.
    pub family: Option<crate::domain::guard::Family>,
    /// The latest resend request, decline or authorization, as
    /// `action:operator:reason` (see `AttentionRow::resend_ask`).
    pub resend_ask: Option<String>,
}

/// The Tablero for one operating day.
#[derive(Debug, Clone, Serialize)]
pub struct Board {
    pub day: OperatingDay,
    pub by_state: Vec<(String, i64)>,
    pub closures: Vec<(String, i64)>,
    pub duplicate_keys: i64,
    pub duplicate_events: i64,
    pub opt_outs: i64,
    /// Median milliseconds from due time to the channel's acceptance, over
    /// the day's accepted attempts (a sample of at most 500: each one is
    /// an attempt lookup, and a busy day has ten thousand).
    pub latency_ms_median: Option<i64>,
    /// The 95th percentile of the same sample.
    pub latency_ms_p95: Option<i64>,
    pub latency_samples: i64,
}

/// How many of a day's messages reached an outcome in one hour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HourCount {
    /// Hours since the start of the operating day (0–23; 23–24 on a day
    /// with a daylight-saving change).
    pub hour: i64,
    /// `accepted`, `sent`, `delivered`, `read` or `failed`.
    pub state: String,
    pub n: i64,
}

/// Which rows a Tablero counter stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CounterQuery {
    pub day: OperatingDay,
    pub states: Vec<String>,
    /// Only cancelled intentions closed for this reason.
    pub reason: Option<String>,
}

/// Planned intentions due at `?1` (the dispatcher's queue, and what the
/// alerts call due but unsent). The `CASE` term repeats the first two for
/// PostgreSQL: it takes `state = 'planned'` and `due_at <= now` for
/// independent, expects a fifth of the table (most rows are past, few are
/// planned) and scans all of it; planned intentions are due in the future,
/// which only the statistics of this expression (PostgreSQL migration 0003,
/// with an index on it) tell it. On SQLite it filters rows the index
/// `intentions_state_due` already chose.
pub(super) const PLANNED_DUE: &str =
    "state = 'planned' AND due_at <= ?1 AND CASE WHEN state = 'planned' THEN due_at END <= ?1";

/// The day's summary rows: counts by state, closures, opt-outs, counters
/// and a sample of latencies of messages the channel took.
static DAY_PARTS: Sql = Sql::new(|| {
    format!(
        "SELECT 'state', state, n FROM intention_counts WHERE day = ?1 AND n > 0
             UNION ALL
             SELECT 'closure', coalesce(state_reason, '-'), count(*) FROM intentions
                 WHERE day = ?1 AND state = 'cancelled' GROUP BY 2
             UNION ALL
             SELECT 'opt_outs', '', count(*) FROM contacts
                 WHERE opt_out_marketing_at IS NOT NULL OR opt_out_transactional_at IS NOT NULL
             UNION ALL
             SELECT 'counter', name, value FROM counters WHERE name IN (?2, ?3, ?4)
             UNION ALL
             SELECT 'latency', '', ms FROM (
                 SELECT a.ended_at - i.due_at AS ms FROM intentions i JOIN attempts a ON a.intention_id = i.id
                 WHERE i.day = ?1 AND i.state IN {}
                   AND a.outcome = 'accepted' AND a.ended_at IS NOT NULL LIMIT 500) AS sample",
        rules_sql::CHANNEL_EVIDENCE_STATES
    )
});

/// The day's messages by outcome and hour.
static BOARD_HOURS: Sql = Sql::new(|| {
    format!(
        "SELECT (state_changed_at - ?2) / 3600000 AS h, state, count(*) FROM intentions
             WHERE day = ?1 AND state IN {}
               AND state_changed_at >= ?2
             GROUP BY h, state",
        rules_sql::OUTCOME_STATES
    )
});

/// A resend of `?1` whose outcome is still to come.
static PENDING_RESEND: Sql = Sql::new(|| {
    format!(
        "SELECT id, key FROM intentions WHERE related_id = ?1 AND state IN {}
             ORDER BY id LIMIT 1",
        rules_sql::AWAITING_STATES
    )
});

/// The latest attempt error among the last few hundred attempts.
static LAST_ATTEMPT_ERROR: Sql = Sql::new(|| {
    format!(
        "SELECT outcome || coalesce(' ' || error_code, '') || coalesce(': ' || error_detail, '')
             FROM (SELECT * FROM attempts ORDER BY id DESC LIMIT 500) AS recent
             WHERE outcome IN {} AND ended_at >= ?1
             ORDER BY id DESC LIMIT 1",
        rules_sql::ERROR_OUTCOMES
    )
});

/// Appointments whose notifications one statement reads (see
/// [`Tx::fill_notifications`]): a page of Próximas citas.
const NOTIFICATION_BATCH: usize = 50;

pub(super) fn upcoming_row(r: &dyn Cols) -> std::result::Result<UpcomingRow, String> {
    Ok(UpcomingRow {
        commitment_id: r.int(0)?,
        commitment_ref: r.text(1)?,
        kind: CommitmentKind::parse(&r.text(2)?).unwrap_or(CommitmentKind::Appointment),
        status: CommitmentStatus::parse(&r.text(3)?).ok_or("unknown commitment status")?,
        version: r.int(4)?,
        starts_at: r.opt_time(5)?,
        phone: r.opt_text(6)?,
        confirmed_at: r.opt_time(7)?,
        manual_contact_at: r.opt_time(8)?,
        reschedule_requested_at: r.opt_time(9)?,
        name: r.opt_text(10)?,
        notifications: Vec::new(),
    })
}

impl Tx<'_> {
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
        let db = self.db();
        let pg = db.is_pg();
        let search = Search::parse(filter, self.phone_country);
        let matches = match &search {
            Some(s) => Some(self.search_matches(s)?),
            None => None,
        };
        // A search drives from its matches (few) to their commitments; the
        // join order (see `matched_commitments_sql`) keeps the engine from
        // walking the whole time range and probing the matches instead.
        let from_sql = match &search {
            Some(_) => matched_commitments_sql(pg, "?5"),
            None => "commitments c".to_string(),
        };
        // Exact matches before the ones found by forgiving a typo.
        let rank = match &search {
            Some(_) => format!("{}, ", fuzzy_rank_sql(pg, "c.id", "?6")),
            None => String::new(),
        };
        let limit = if limit == 0 { 50 } else { limit };
        // `?5` the matches (a JSON array of commitment ids, see
        // `store/search.rs`), referenced even without a search so both
        // statements take the same values; `?6` the fuzzy ones.
        let args = vals![
            ms(from),
            ms(to),
            limit,
            offset,
            matches.as_ref().map(Matches::all_json),
            matches.as_ref().map(Matches::fuzzy_json)
        ];
        let mut rows = db.rows(
            &format!(
                "SELECT c.id, c.ref, c.kind, c.status, c.version, c.starts_at, k.phone, c.confirmed_at,
                        c.manual_contact_at, c.reschedule_requested_at, coalesce(c.contact_name, k.name)
                 FROM {from_sql} LEFT JOIN contacts k ON k.id = c.contact_id
                 WHERE c.starts_at >= ?1 AND c.starts_at < ?2 AND (CAST(?5 AS TEXT) IS NULL OR 1 = 1)
                    AND (CAST(?6 AS TEXT) IS NULL OR 1 = 1)
                 ORDER BY {rank}c.starts_at, c.id LIMIT ?3 OFFSET ?4"
            ),
            &args,
            upcoming_row,
        )?;
        self.fill_notifications(&mut rows)?;
        let total = db
            .row(
                &format!(
                    "SELECT count(*) FROM {from_sql}
                     WHERE c.starts_at >= ?1 AND c.starts_at < ?2 AND (CAST(?5 AS TEXT) IS NULL OR 1 = 1)
                        AND (CAST(?6 AS TEXT) IS NULL OR 1 = 1)"
                ),
                &args,
                |r| r.int(0),
            )?
            .unwrap_or(0);
        Ok(Page { rows, total, offset })
    }

    /// The notifications of a page of appointments, read for the whole page
    /// at once: one statement per [`NOTIFICATION_BATCH`] appointments
    /// instead of one each (on PostgreSQL every statement is a round trip
    /// to the server, fifty of them cost more than the page itself).
    pub(super) fn fill_notifications(&self, rows: &mut [UpcomingRow]) -> Result<()> {
        let ids = (1..=NOTIFICATION_BATCH)
            .map(|n| format!("?{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT commitment_id, id, purpose, commitment_version, state, state_reason, related_id IS NOT NULL,
                    state_changed_at
             FROM intentions WHERE commitment_id IN ({ids}) ORDER BY commitment_id, id"
        );
        let mut by_commitment: std::collections::HashMap<i64, Vec<NotificationCell>> = Default::default();
        for batch in rows.chunks(NOTIFICATION_BATCH) {
            // A short batch is padded with NULL, which matches no row: the
            // statement's text (and so its prepared plan) stays the same.
            let args: Vec<Value> = (0..NOTIFICATION_BATCH)
                .map(|k| batch.get(k).map(|r| r.commitment_id).into())
                .collect();
            for (cid, cell) in self.db().rows(&sql, &args, |r| {
                Ok((
                    r.int(0)?,
                    NotificationCell {
                        intention_id: r.int(1)?,
                        purpose: r.text(2)?,
                        version: r.int(3)?,
                        state: r.text(4)?,
                        state_reason: r.opt_text(5)?,
                        is_resend: r.flag(6)?,
                        state_changed_at: r.time(7)?,
                        family: None,
                        resend_ask: None,
                    },
                ))
            })? {
                by_commitment.entry(cid).or_default().push(cell);
            }
        }
        for row in rows {
            row.notifications = by_commitment.remove(&row.commitment_id).unwrap_or_default();
        }
        Ok(())
    }

    /// The Tablero's counters for one operating day (`YYYY-MM-DD`), in one
    /// statement: each part is served by an index or a derived table and
    /// costs a fraction of a millisecond, so on PostgreSQL seven statements
    /// would spend most of the screen's time on round trips to the server.
    /// Each row says which part it belongs to.
    pub fn board(&self, operating_day: OperatingDay) -> Result<Board> {
        let duplicate_keys = Counter::DuplicateKeys.name();
        let duplicate_events = Counter::DuplicateEvents.name();
        // `duplicate_channel_events` is the name ledgers of the first
        // version counted webhook copies under.
        let names = [
            duplicate_keys.as_str(),
            duplicate_events.as_str(),
            "duplicate_channel_events",
        ];
        let parts = self.db().rows(
            &DAY_PARTS,
            &vals![operating_day.to_string(), names[0], names[1], names[2]],
            |r| Ok((r.text(0)?, r.text(1)?, r.int(2)?)),
        )?;
        let (mut by_state, mut closures, mut latencies) = (Vec::new(), Vec::new(), Vec::new());
        let mut opt_outs = 0;
        let mut counters = std::collections::HashMap::new();
        for (part, name, n) in parts {
            match part.as_str() {
                "state" => by_state.push((name, n)),
                "closure" => closures.push((name, n)),
                "opt_outs" => opt_outs = n,
                "counter" => {
                    counters.insert(name, n);
                }
                _ => latencies.push(n),
            }
        }
        // Every ordering in Rust, by byte order, on either engine.
        by_state.sort();
        // Most first, then by reason.
        closures.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        latencies.sort_unstable();
        // A counter is its stored value plus this transaction's pending
        // increments (see `Tx::counter`).
        let counter = |name: &str| {
            counters.get(name).copied().unwrap_or(0) + self.counters.borrow().get(name).copied().unwrap_or(0)
        };
        Ok(Board {
            day: operating_day,
            by_state,
            closures,
            duplicate_keys: counter(names[0]),
            duplicate_events: counter(names[1]) + counter(names[2]),
            opt_outs,
            latency_ms_median: latencies.get(latencies.len() / 2).copied(),
            latency_ms_p95: latencies
                .get((latencies.len() * 95 / 100).min(latencies.len().saturating_sub(1)))
                .copied(),
            latency_samples: latencies.len() as i64,
        })
    }

    /// The day's messages by the hour (since `day_start`) they reached
    /// their outcome, for the Tablero's chart: the day's rows come from
    /// `intentions_day_state`, one state at a time.
    pub fn board_hours(&self, day: OperatingDay, day_start: DateTime<Utc>) -> Result<Vec<HourCount>> {
        let mut rows = self
            .db()
            .rows(&BOARD_HOURS, &vals![day.to_string(), ms(day_start)], |r| {
                Ok(HourCount {
                    hour: r.int(0)?,
                    state: r.text(1)?,
                    n: r.int(2)?,
                })
            })?;
        rows.sort_by(|a, b| (a.hour, &a.state).cmp(&(b.hour, &b.state)));
        Ok(rows)
    }

    /// The intentions behind a Tablero counter, in the attention shape,
    /// oldest first.
    pub fn counter_rows(&self, q: &CounterQuery, limit: u32, offset: u32) -> Result<Page<AttentionRow>> {
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
            "CAST(?2 AS TEXT) IS NULL"
        };
        let cond = format!("i.day = ?1 AND i.state IN ({placeholders}) AND {reason_cond}");
        let mut args: Vec<Value> = vec![q.day.to_string().into(), q.reason.clone().into()];
        args.extend(states.iter().cloned().map(Into::into));
        let total = self
            .db()
            .row(&format!("SELECT count(*) FROM intentions i WHERE {cond}"), &args, |r| {
                r.int(0)
            })?
            .unwrap_or(0);
        // The page's ids first, in creation order straight from the index
        // (no per-row work before LIMIT), then the display columns for
        // those rows only.
        let keys = intention_keys(&format!(
            "FROM (SELECT i.id FROM intentions i WHERE {cond} ORDER BY i.id LIMIT ?{l} OFFSET ?{o}) q
             JOIN intentions i ON i.id = q.id JOIN commitments c ON c.id = i.commitment_id",
            l = n + 3,
            o = n + 4
        ));
        let sql = page_sql(&keys, "ORDER BY p.iid");
        args.push(i64::from(if limit == 0 { 50 } else { limit }).into());
        args.push(i64::from(offset).into());
        let mut rows = self.db().rows(&sql, &args, attention_row)?;
        self.fill_families(&mut rows)?;
        Ok(Page { rows, total, offset })
    }

    /// How many resends of an intention exist (to number the next one).
    pub fn resend_count(&self, intention_id: i64) -> Result<i64> {
        Ok(self
            .db()
            .row(
                "SELECT count(*) FROM intentions WHERE related_id = ?1",
                &vals![intention_id],
                |r| r.int(0),
            )?
            .unwrap_or(0))
    }

    /// A resend of `intention_id` that has not left yet (planned or in
    /// flight), if any: a second authorization would be a duplicate.
    pub fn pending_resend(&self, intention_id: i64) -> Result<Option<(i64, String)>> {
        Ok(self
            .db()
            .row(&PENDING_RESEND, &vals![intention_id], |r| Ok((r.int(0)?, r.text(1)?)))?)
    }

    /// Planned intentions already due: the dispatcher's queue.
    pub fn due_queue(&self, now: DateTime<Utc>) -> Result<i64> {
        Ok(self
            .db()
            .row(
                &format!("SELECT count(*) FROM intentions WHERE {PLANNED_DUE}"),
                &vals![ms(now)],
                |r| r.int(0),
            )?
            .unwrap_or(0))
    }

    /// The most recent failed, retried, uncertain or conflicting attempt
    /// that ended at or after `since`, as `code: detail`; only the last few
    /// hundred attempts are looked at, so this stays cheap on any ledger.
    pub fn last_attempt_error(&self, since: DateTime<Utc>) -> Result<Option<String>> {
        Ok(self.db().row(&LAST_ATTEMPT_ERROR, &vals![ms(since)], |r| r.text(0))?)
    }
}

#[cfg(test)]
#[path = "console_tests.rs"]
mod tests;
