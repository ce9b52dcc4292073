//! When the console re-reads the ledger: on the clock tick, and sooner
//! when something says the ledger changed.
//!
//! Two kinds of source say so: the embedded services bump an
//! [`crate::dispatch::Activity`] counter after each committed batch, and on
//! a PostgreSQL ledger the listener ([`super::listen`]) bumps its own after
//! each batch of the ledger's change notices, whoever committed them. During
//! a burst that happens many times a second, so a notification only
//! schedules a refresh, at most one per `debounce`. The tick stays as the
//! fallback (no source at all, a missed bump, the clock moving `now` for
//! ages and due times).

use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The refresh schedule; pure except for reading the activity receiver.
pub struct Refresh {
    tick: Duration,
    debounce: Duration,
    last: Instant,
    pending: bool,
    /// The change signals still alive.
    sources: Vec<watch::Receiver<u64>>,
}

impl Refresh {
    /// Refreshes every `tick`, and after activity at most every `debounce`.
    pub fn new(tick: Duration, debounce: Duration, activity: Option<watch::Receiver<u64>>, now: Instant) -> Refresh {
        Refresh {
            tick,
            debounce,
            last: now,
            pending: false,
            sources: activity.into_iter().collect(),
        }
    }

    /// One more change signal (the PostgreSQL ledger's notices).
    pub fn also(mut self, source: watch::Receiver<u64>) -> Refresh {
        self.sources.push(source);
        self
    }

    /// Whether to refresh at `now`; if so, the schedule restarts from `now`.
    pub fn due(&mut self, now: Instant) -> bool {
        let mut pending = self.pending;
        // A source whose sender is gone (services stopped, listener
        // ended) is dropped: the others and the tick are left.
        self.sources.retain_mut(|rx| match rx.has_changed() {
            Ok(true) => {
                rx.borrow_and_update();
                pending = true;
                true
            }
            Ok(false) => true,
            Err(_) => false,
        });
        self.pending = pending;
        let since = now.saturating_duration_since(self.last);
        if since >= self.tick || (self.pending && since >= self.debounce) {
            self.last = now;
            self.pending = false;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::Activity;

    const HOUR: Duration = Duration::from_secs(3600);
    const DEBOUNCE: Duration = Duration::from_millis(250);

    #[test]
    fn without_activity_only_the_tick_refreshes() {
        let t0 = Instant::now();
        let mut r = Refresh::new(Duration::from_secs(2), DEBOUNCE, None, t0);
        assert!(!r.due(t0 + Duration::from_secs(1)));
        assert!(r.due(t0 + Duration::from_secs(2)));
        assert!(!r.due(t0 + Duration::from_secs(3)));
    }

    #[test]
    fn a_burst_of_bumps_makes_one_debounced_refresh() {
        let a = Activity::new();
        let t0 = Instant::now();
        let mut r = Refresh::new(HOUR, DEBOUNCE, Some(a.subscribe()), t0);
        assert!(!r.due(t0 + DEBOUNCE));
        for _ in 0..10 {
            a.bump();
        }
        assert!(r.due(t0 + DEBOUNCE));
        // Right after a refresh, a new bump waits out the debounce.
        a.bump();
        assert!(!r.due(t0 + DEBOUNCE + Duration::from_millis(100)));
        assert!(r.due(t0 + DEBOUNCE * 2));
        assert!(!r.due(t0 + DEBOUNCE * 3));
    }

    #[test]
    fn either_source_makes_a_refresh_and_a_gone_one_leaves_the_other() {
        let services = Activity::new();
        let notices = Activity::new();
        let t0 = Instant::now();
        let mut r = Refresh::new(HOUR, DEBOUNCE, Some(services.subscribe()), t0).also(notices.subscribe());
        assert!(!r.due(t0 + DEBOUNCE));
        notices.bump();
        assert!(r.due(t0 + DEBOUNCE));
        drop(services);
        assert!(!r.due(t0 + DEBOUNCE * 3));
        notices.bump();
        assert!(r.due(t0 + DEBOUNCE * 4));
    }

    #[test]
    fn services_gone_falls_back_to_the_tick() {
        let a = Activity::new();
        let t0 = Instant::now();
        let mut r = Refresh::new(Duration::from_secs(2), DEBOUNCE, Some(a.subscribe()), t0);
        drop(a);
        assert!(!r.due(t0 + Duration::from_secs(1)));
        assert!(r.due(t0 + Duration::from_secs(2)));
    }
}
