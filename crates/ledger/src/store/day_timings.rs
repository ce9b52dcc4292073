//! The Tablero's day in time: for each intention of one operating day that
//! is already due, when it was due and when it first reached the states the
//! caller names. One set-based read; what the times mean (latency to
//! acceptance, queue depth) is decided by the caller (`app::board`), never
//! here.
//!
//! Speed at a million intentions: the day's rows come from the index
//! `intentions_day_due` (day, due_at), bounded by the day and by `until`;
//! each row's history from `intention_history_intention` (intention_id, id),
//! read once for both times. A busy day is some ten thousand intentions.

use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use serde::Serialize;

use super::{Result, StoreError, Tx, from_ms, ms};
use crate::domain::state::IntentionState;

/// One due intention of the day and the first times it reached a state of
/// each of the caller's two sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DayTiming {
    pub due_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub state: IntentionState,
    pub state_changed_at: DateTime<Utc>,
    /// The first applied history entry into a state of `reached`.
    pub reached_at: Option<DateTime<Utc>>,
    /// The first applied history entry into a state of `closed`.
    pub closed_at: Option<DateTime<Utc>>,
}

impl Tx<'_> {
    /// The intentions of operating day `day` (`YYYY-MM-DD`) due at or
    /// before `until`, each with the first time its history applied a move
    /// into one of `reached` and into one of `closed` (recorded-only
    /// entries, such as a late or repeated signal, do not count).
    pub fn day_timings(
        &self,
        day: &str,
        until: DateTime<Utc>,
        reached: &[IntentionState],
        closed: &[IntentionState],
    ) -> Result<Vec<DayTiming>> {
        let sql = timings_sql(reached.len(), closed.len());
        let mut args: Vec<Value> = vec![day.to_string().into(), ms(until).into()];
        args.extend(
            reached
                .iter()
                .chain(closed)
                .map(|s| Value::from(s.as_str().to_string())),
        );
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, Option<i64>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (due, created, state, changed, reached_at, closed_at) = row?;
            let state = state
                .parse()
                .map_err(|e: crate::domain::state::UnknownState| StoreError::Corrupt {
                    table: "intentions",
                    detail: e.to_string(),
                })?;
            out.push(DayTiming {
                due_at: from_ms(due),
                created_at: from_ms(created),
                state,
                state_changed_at: from_ms(changed),
                reached_at: reached_at.map(from_ms),
                closed_at: closed_at.map(from_ms),
            });
        }
        Ok(out)
    }
}

/// The statement for `n_reached` and `n_closed` states: `?1` day, `?2`
/// until, then one placeholder per state, so its text depends only on the
/// two sets' sizes and is cached per shape.
fn timings_sql(n_reached: usize, n_closed: usize) -> String {
    let list = |from: usize, n: usize| {
        if n == 0 {
            // No state can match (`IN ()` is valid SQLite but reads as a typo).
            return "NULL".to_string();
        }
        (from..from + n).map(|i| format!("?{i}")).collect::<Vec<_>>().join(",")
    };
    format!(
        "SELECT i.due_at, i.created_at, i.state, i.state_changed_at,
                min(CASE WHEN h.to_state IN ({r}) THEN h.at END),
                min(CASE WHEN h.to_state IN ({c}) THEN h.at END)
         FROM intentions i
         LEFT JOIN intention_history h ON h.intention_id = i.id AND h.applied = 1
         WHERE i.day = ?1 AND i.due_at <= ?2
         GROUP BY i.id
         ORDER BY i.due_at, i.id",
        r = list(3, n_reached),
        c = list(3 + n_reached, n_closed),
    )
}

#[cfg(test)]
#[path = "day_timings_tests.rs"]
mod tests;
