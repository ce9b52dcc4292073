//! Repeated log lines, limited. A loop that fails on every turn (a full
//! disk, a ledger that is down) would otherwise log the same warning every
//! poll: 1,047 identical heartbeat lines in one incident buried the line
//! that said why. The first of a run of identical lines is logged at once;
//! repeats within `every` are only counted, and the next one logged says
//! how many were held back. Another line is news and is logged at once,
//! and a loop that alternates between two failures is limited on each.
//! [`LogLimit::clear`] after a success ends every run.
//!
//! [`warn_limited!`](crate::warn_limited) logs through a limiter at the
//! caller's own target, so a line still says which module wrote it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often a repeated line is logged again by the loops that use this.
pub const EVERY: Duration = Duration::from_secs(60);

/// Lines remembered at once: more are pruned of those logged over `every`
/// ago (a loop has a handful of ways to fail).
const REMEMBERED: usize = 32;

/// The limiter of one loop's log lines.
#[derive(Debug)]
pub struct LogLimit {
    every: Duration,
    /// Each line logged lately: when, and the repeats held back since.
    lines: HashMap<String, (Instant, u64)>,
}

impl LogLimit {
    pub fn new(every: Duration) -> LogLimit {
        LogLimit {
            every,
            lines: HashMap::new(),
        }
    }

    /// Whether `line` is logged at `now`: `Some(n)` with the number of
    /// identical lines held back before it, `None` to hold it back.
    pub fn admit(&mut self, line: &str, now: Instant) -> Option<u64> {
        if let Some((at, held)) = self.lines.get_mut(line) {
            if now.saturating_duration_since(*at) < self.every {
                *held += 1;
                return None;
            }
            let before = std::mem::take(held);
            *at = now;
            return Some(before);
        }
        if self.lines.len() >= REMEMBERED {
            let every = self.every;
            self.lines
                .retain(|_, (at, _)| now.saturating_duration_since(*at) < every);
        }
        self.lines.insert(line.to_string(), (now, 0));
        Some(0)
    }

    /// The loop succeeded: its next failure is news and is logged at once.
    /// Returns how many repeats were held back and never logged.
    pub fn clear(&mut self) -> u64 {
        self.lines.drain().map(|(_, (_, held))| held).sum()
    }
}

impl Default for LogLimit {
    fn default() -> Self {
        LogLimit::new(EVERY)
    }
}

/// `warn_limited!(limit, "format", args…)`: a `tracing::warn!` at the
/// caller's target, unless `limit` (a [`LogLimit`]) holds the line back as
/// a repeat; the next one logged says how many were held.
#[macro_export]
macro_rules! warn_limited {
    ($limit:expr, $($arg:tt)+) => {{
        let line = format!($($arg)+);
        match $crate::dispatch::log_limit::LogLimit::admit(&mut $limit, &line, std::time::Instant::now()) {
            Some(0) => tracing::warn!("{line}"),
            Some(held) => tracing::warn!("{line} (and {held} more time(s) since it was last logged)"),
            None => {}
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_line_is_logged_once_per_period_with_the_count() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut l = LogLimit::new(Duration::from_secs(60));
        assert_eq!(l.admit("disk full", t0), Some(0));
        // A repeat every 100 ms (the incident): none logged…
        for n in 1..=599 {
            assert_eq!(l.admit("disk full", ms(n * 100)), None, "{n}");
        }
        // …until the period is over, which says how many were held back.
        assert_eq!(l.admit("disk full", ms(60_000)), Some(599));
        assert_eq!(l.admit("disk full", ms(60_100)), None);
    }

    #[test]
    fn each_line_is_limited_on_its_own() {
        let t0 = Instant::now();
        let mut l = LogLimit::new(Duration::from_secs(60));
        assert_eq!(l.admit("a", t0), Some(0));
        assert_eq!(l.admit("b", t0), Some(0));
        // A loop alternating between two failures: each is a repeat.
        for _ in 0..10 {
            assert_eq!(l.admit("a", t0), None);
            assert_eq!(l.admit("b", t0), None);
        }
        assert_eq!(l.admit("c", t0), Some(0));
        let later = t0 + Duration::from_secs(61);
        assert_eq!(l.admit("b", later), Some(10));
        assert_eq!(l.admit("a", later), Some(10));
    }

    #[test]
    fn a_success_ends_the_run() {
        let t0 = Instant::now();
        let mut l = LogLimit::new(Duration::from_secs(60));
        assert_eq!(l.admit("down", t0), Some(0));
        assert_eq!(l.admit("down", t0), None);
        assert_eq!(l.admit("down", t0), None);
        assert_eq!(l.clear(), 2);
        assert_eq!(l.admit("down", t0), Some(0));
        assert_eq!(l.clear(), 0);
    }

    #[test]
    fn old_lines_are_forgotten_not_hoarded() {
        let t0 = Instant::now();
        let mut l = LogLimit::new(Duration::from_secs(1));
        for n in 0..1000u64 {
            let at = t0 + Duration::from_secs(n);
            assert_eq!(l.admit(&format!("error {n}"), at), Some(0));
        }
        assert!(l.lines.len() <= REMEMBERED, "{}", l.lines.len());
    }
}
