//! The Tablero's day in time: for each intention of one operating day that
//! is already due, when it was due and when it first reached the states the
//! caller names. One set-based read; what the times mean (latency to
//! acceptance, queue depth) is decided by the caller (`app::board`), never
//! here.
//!
//! Speed at a million intentions (a day is some ten thousand rows): the
//! day's due times and states come from the covering index
//! `intentions_day_state` (day, state, state_reason, due_at) without
//! reading the table, whose rows are wide; only rows whose state is in one
//! of the sets look up their history (`intention_history_intention`),
//! because states never move backwards: a row that is not in a set now was
//! never in it.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Result, Tx, ms};
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;
use crate::sql::Value;

/// One due intention of the day and the first times it reached a state of
/// each of the caller's two sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DayTiming {
    pub due_at: DateTime<Utc>,
    pub state: IntentionState,
    /// The first applied history entry into a state of `reached` (looked
    /// up for rows now in either set).
    pub reached_at: Option<DateTime<Utc>>,
    /// The first applied history entry into a state of `closed` (looked up
    /// for rows now in `closed`).
    pub closed_at: Option<DateTime<Utc>>,
    /// When the intention was created: its first history row (looked up
    /// for rows now in `reached`, the latency's sample, through the same
    /// history index; the table's own column would read its wide row).
    pub created_at: Option<DateTime<Utc>>,
}

impl Tx<'_> {
    /// The intentions of operating day `day` (`YYYY-MM-DD`) due at or
    /// before `until`, each with the first time its history applied a move
    /// into one of `reached` and into one of `closed` (recorded-only
    /// entries, such as a late or repeated signal, do not count).
    pub fn day_timings(
        &self,
        day: OperatingDay,
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
        let mut out = self.db().rows(&sql, &args, |r| {
            Ok(DayTiming {
                due_at: r.time(0)?,
                state: r.state(1)?,
                reached_at: r.opt_time(2)?,
                closed_at: r.opt_time(3)?,
                created_at: r.opt_time(4)?,
            })
        })?;
        out.sort_by_key(|t| t.due_at);
        Ok(out)
    }
}

/// The statement for `n_reached` and `n_closed` states: `?1` day, `?2`
/// until, then the reached states and the closed ones, so its text depends
/// only on the two sets' sizes and is cached per shape.
///
/// `+i.due_at` keeps the due-time range a filter on the covering
/// `intentions_day_state` (ledgers before migration 0010 also had a
/// `(day, due_at)` index SQLite preferred, which read every row of the
/// table).
fn timings_sql(n_reached: usize, n_closed: usize) -> String {
    let list = |from: usize, n: usize| {
        if n == 0 {
            // No state can match (`IN ()` is valid SQLite but reads as a typo).
            return "NULL".to_string();
        }
        (from..from + n).map(|i| format!("?{i}")).collect::<Vec<_>>().join(",")
    };
    let (r, c) = (list(3, n_reached), list(3 + n_reached, n_closed));
    let first = |set: &str| {
        format!(
            "(SELECT min(h.at) FROM intention_history h
              WHERE h.intention_id = i.id AND h.applied = 1 AND h.to_state IN ({set}))"
        )
    };
    format!(
        "SELECT i.due_at, i.state,
                CASE WHEN i.state IN ({r}) OR i.state IN ({c}) THEN {} END,
                CASE WHEN i.state IN ({c}) THEN {} END,
                CASE WHEN i.state IN ({r}) THEN
                    (SELECT min(h.at) FROM intention_history h WHERE h.intention_id = i.id) END
         FROM intentions i
         WHERE i.day = ?1 AND +i.due_at <= ?2",
        first(&r),
        first(&c),
    )
}

#[cfg(test)]
#[path = "day_timings_tests.rs"]
mod tests;
