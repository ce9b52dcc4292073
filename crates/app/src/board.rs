//! The Tablero's figures of one operating day, by the hour: the latency
//! from due to the channel's acceptance (p50 and p95) and the depth of the
//! queue (intentions due and not yet accepted or closed).
//!
//! The ledger reads the times in one set-based query
//! ([`Tx::day_timings`]); what they mean is decided here, so the rules are
//! plain code a test reads:
//!
//! - **Latency** runs from when the message could first be sent — its due
//!   time, or its creation when it was planned after its due time (a
//!   booking learned late, a backdated feed) — to the first applied move
//!   into accepted or a later evidence state, as `/metrics` counts it. It
//!   is counted in the hour the acceptance happened, as the outcomes chart
//!   counts each outcome.
//! - **Queue depth**: an intention waits from its due time until it first
//!   reaches acceptance (or later) or is closed (failed, cancelled, sent
//!   to review: a person's work then, not the dispatcher's). Each hour
//!   shows the most that waited at once during it; hours not begun show
//!   nothing. Bounded by the day: an intention due the day before that
//!   still waits counts on that day. A row in one of those states without
//!   the history to date it is taken as never having waited, so a gap in
//!   the evidence never shows as a queue; a row accepted after a stay in
//!   review counts as waiting until its acceptance (the ledger looks up
//!   closing times for rows closed now only, to stay fast).

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState::{self, *};
use crate::store::{DayTiming, StoreError, Tx};

/// States that mean the channel took the message.
pub const REACHED: [IntentionState; 4] = [Accepted, Sent, Delivered, Read];
/// States that take an intention out of the queue without the channel.
pub const CLOSED: [IntentionState; 3] = [Failed, Cancelled, Review];

/// One hour of the day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HourFigures {
    pub latency_p50_ms: Option<i64>,
    pub latency_p95_ms: Option<i64>,
    /// Acceptances in the hour (the latency's sample).
    pub accepted: usize,
    /// The most intentions waiting at once during the hour; `None` for an
    /// hour not begun yet.
    pub queue_peak: Option<i64>,
}

/// A whole operating day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DayFigures {
    /// One entry per hour since the start of the day (23 to 25 of them on
    /// days with a daylight-saving change).
    pub hours: Vec<HourFigures>,
    /// Over every acceptance of the day's intentions, whatever its hour.
    pub latency_p50_ms: Option<i64>,
    pub latency_p95_ms: Option<i64>,
    pub accepted: usize,
    /// The day's highest queue and the hour it happened in.
    pub queue_peak: Option<(usize, i64)>,
}

/// Reads the day's times and computes its figures: the day is
/// `[day_start, day_end)`, figures run until `now`.
pub fn read_day(
    tx: &Tx<'_>,
    day: OperatingDay,
    day_start: DateTime<Utc>,
    day_end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<DayFigures, StoreError> {
    let rows = tx.day_timings(day, now.min(day_end), &REACHED, &CLOSED)?;
    Ok(figures(&rows, day_start, day_end, now))
}

/// The nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[i64], p: u32) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (sorted.len() * p as usize).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// When the row stopped waiting: acceptance or closing, whichever came
/// first; a row accepted or closed without the history to date it, at its
/// due time (it is not counted as waiting).
fn left_at(r: &DayTiming) -> Option<DateTime<Utc>> {
    match (r.reached_at, r.closed_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (None, None) if REACHED.contains(&r.state) || CLOSED.contains(&r.state) => Some(r.due_at),
        (a, b) => a.or(b),
    }
}

/// When the message could first be sent: its due time, or its creation
/// when it was created later.
pub fn sendable_from(r: &DayTiming) -> DateTime<Utc> {
    r.created_at.map_or(r.due_at, |c| c.max(r.due_at))
}

/// The figures of `rows`, the intentions of the day `[day_start, day_end)`,
/// up to `now`.
pub fn figures(rows: &[DayTiming], day_start: DateTime<Utc>, day_end: DateTime<Utc>, now: DateTime<Utc>) -> DayFigures {
    let minutes = u64::try_from((day_end - day_start).num_minutes()).unwrap_or(0);
    let n_hours = usize::try_from(minutes.div_ceil(60)).unwrap_or(0);
    let hour_of = |t: DateTime<Utc>| -> Option<usize> {
        if t < day_start || t >= day_end {
            return None;
        }
        usize::try_from((t - day_start).num_hours()).ok()
    };
    // Latency, by the hour of acceptance and for the whole day.
    let mut by_hour: Vec<Vec<i64>> = vec![Vec::new(); n_hours];
    let mut all = Vec::new();
    for r in rows {
        let Some(at) = r.reached_at else { continue };
        let ms = (at - sendable_from(r)).num_milliseconds().max(0);
        all.push(ms);
        if let Some(h) = hour_of(at).filter(|h| *h < n_hours) {
            by_hour[h].push(ms);
        }
    }
    all.sort_unstable();
    let mut hours: Vec<HourFigures> = by_hour
        .into_iter()
        .map(|mut v| {
            v.sort_unstable();
            HourFigures {
                latency_p50_ms: percentile(&v, 50),
                latency_p95_ms: percentile(&v, 95),
                accepted: v.len(),
                queue_peak: None,
            }
        })
        .collect();
    let peaks = queue_peaks(rows, day_start, n_hours, now);
    for (h, peak) in hours.iter_mut().zip(&peaks) {
        h.queue_peak = *peak;
    }
    let queue_peak = peaks
        .iter()
        .enumerate()
        .filter_map(|(h, p)| p.map(|n| (h, n)))
        // The first hour of the highest peak.
        .fold(None, |best: Option<(usize, i64)>, (h, n)| match best {
            Some((_, m)) if m >= n => best,
            _ => Some((h, n)),
        });
    DayFigures {
        hours,
        latency_p50_ms: percentile(&all, 50),
        latency_p95_ms: percentile(&all, 95),
        accepted: all.len(),
        queue_peak,
    }
}

/// The most intentions waiting at once in each hour begun by `now`: a
/// sweep over "starts waiting" (+1 at due) and "stops waiting" (−1 when it
/// left) events. At equal times a departure goes first, so a message taken
/// the instant another falls due never counts as two waiting.
fn queue_peaks(rows: &[DayTiming], day_start: DateTime<Utc>, n_hours: usize, now: DateTime<Utc>) -> Vec<Option<i64>> {
    let mut events: Vec<(DateTime<Utc>, i64)> = Vec::with_capacity(rows.len() * 2);
    for r in rows {
        let from = r.due_at;
        if from > now {
            continue;
        }
        match left_at(r) {
            // Closed or accepted before it was due: it never waited.
            Some(left) if left <= from => {}
            Some(left) => {
                events.push((from, 1));
                if left <= now {
                    events.push((left, -1));
                }
            }
            None => events.push((from, 1)),
        }
    }
    events.sort_unstable();
    let mut out = Vec::with_capacity(n_hours);
    let (mut depth, mut next) = (0i64, 0usize);
    for h in 0..n_hours {
        let start = day_start + Duration::hours(h as i64);
        if start > now {
            out.push(None);
            continue;
        }
        let end = (start + Duration::hours(1)).min(now + Duration::milliseconds(1));
        // The depth the hour starts with.
        while next < events.len() && events[next].0 <= start {
            depth += events[next].1;
            next += 1;
        }
        let mut peak = depth;
        while next < events.len() && events[next].0 < end {
            depth += events[next].1;
            peak = peak.max(depth);
            next += 1;
        }
        out.push(Some(peak));
    }
    out
}

#[cfg(test)]
#[path = "board_tests.rs"]
mod tests;
