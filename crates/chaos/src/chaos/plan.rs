//! The seeded schedule of a chaos run: which booking events are imported
//! in which wave, how long the dispatcher runs before each SIGKILL, which
//! failpoints and store faults are armed, when the simulator restarts, and
//! the model of what the ledger must hold at the end.
//!
//! Pure and deterministic: the same options give the same plan (and the
//! same [`Plan::fingerprint`]), so a failing seed can be replayed. Times are
//! offsets from the run's start, so the plan does not depend on the clock.

use chrono::{DateTime, Duration, Utc};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::check::Expected;

/// `unavez-chaos` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Intentions the imported events plan (about; every event plans one).
    pub intentions: u64,
    /// Random SIGKILLs of the dispatcher.
    pub kills: u32,
    pub seed: u64,
}

/// One booking event, relative to the run's start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedEvent {
    pub event_id: String,
    pub kind: &'static str,
    pub reference: String,
    /// Appointment time, minutes after the run's start.
    pub starts_in_min: Option<i64>,
    /// Contact number (distinct per appointment, never a real one).
    pub phone: Option<String>,
}

impl PlannedEvent {
    /// The event as a `.jsonl` line for `unavez import`.
    pub fn to_json(&self, start: DateTime<Utc>) -> String {
        let mut v = serde_json::json!({ "event_id": self.event_id, "type": self.kind, "ref": self.reference });
        if let Some(m) = self.starts_in_min {
            v["starts_at"] = serde_json::Value::String((start + Duration::minutes(m)).to_rfc3339());
        }
        if let Some(p) = &self.phone {
            v["contact"] = serde_json::json!({ "phone": p, "name": "Paciente de prueba", "language": "es" });
            v["service"] = serde_json::Value::String("Odontología".into());
            v["location"] = serde_json::Value::String("Sede Miraflores".into());
        }
        v.to_string()
    }
}

/// What happens to the dispatcher in a wave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Ending {
    /// SIGKILL after this many milliseconds of running.
    KillAfterMs(u64),
    /// Armed with `--failpoints <spec>`: it must abort by itself (the
    /// harness kills it after a timeout if it never reaches the point).
    Failpoint(String),
    /// Armed with store faults that must be survived: it keeps running for
    /// this long, then is SIGKILLed like any other wave.
    StoreFaults { spec: String, run_ms: u64 },
}

/// One wave: import, run the dispatcher, end it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wave {
    pub events: Vec<PlannedEvent>,
    pub ending: Ending,
    /// SIGKILL and restart the simulator (same journal) during this wave.
    pub restart_sim: bool,
    /// Hold the ledger's write lock from another connection for this long
    /// while the dispatcher runs (SQLITE_BUSY pressure).
    pub hold_lock_ms: Option<u64>,
}

/// The whole schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub options: (u64, u32, u64),
    pub waves: Vec<Wave>,
    /// The simulator's `--seed` and `--faults`.
    pub sim_seed: u64,
    pub sim_faults: String,
    /// Final state of every commitment, per the events imported.
    #[serde(skip)]
    pub expected: Vec<Expected>,
    /// Every distinct event id imported.
    #[serde(skip)]
    pub event_ids: Vec<String>,
}

/// The faults the simulator injects during the run (the settle phase runs
/// it without them). `hold_ms` exceeds the channel timeout the harness
/// configures, so `timeout_after` really is a timeout after processing.
pub const SIM_FAULTS: &str = "timeout_after=0.04,error5xx=0.05,reset=0.03,rate429=0.03,ambiguous=0.02,\
webhook_dup=0.2,webhook_reorder=true,webhook_delay_ms=0..40,latency_ms=0..3,hold_ms=1500";

/// The deterministic kill points, one wave each: the dispatcher aborts at
/// this step of an attempt. Claim and attempt-started share one transaction
/// in unavez, so "after the claim" is also "after the attempt is recorded";
/// `store_commit` aborts right before a commit (half-done transaction).
pub const STEPS: [&str; 4] = ["after_claim", "after_send", "after_result", "store_commit"];

#[derive(Debug, Clone)]
struct Appt {
    reference: String,
    version: i64,
    cancelled: bool,
    starts_in_min: i64,
}

impl Plan {
    pub fn new(o: &Options) -> Plan {
        let mut rng = StdRng::seed_from_u64(o.seed);
        let total = o.intentions.max(10);
        let n_resched = total * 12 / 100;
        let n_cancel = total * 8 / 100;
        let n_book = total - n_resched - n_cancel;
        let random_waves = o.kills.max(1) as usize;
        let fault_waves = STEPS.len() + 2;
        let n_waves = random_waves + fault_waves;

        let mut appts: Vec<Appt> = Vec::new();
        let mut waves = Vec::with_capacity(n_waves);
        let mut all_events: Vec<PlannedEvent> = Vec::new();
        let mut seq = 0u64;
        let (mut booked, mut resched, mut cancelled) = (0u64, 0u64, 0u64);
        for w in 0..n_waves {
            let left = (n_waves - w) as u64;
            let book_now = (n_book - booked).div_ceil(left);
            let resched_now = (n_resched - resched).div_ceil(left);
            let cancel_now = (n_cancel - cancelled).div_ceil(left);
            let mut events = Vec::new();
            for _ in 0..book_now {
                let n = appts.len();
                let starts = rng.random_range(2 * 24 * 60..6 * 24 * 60);
                let reference = format!("cita-c{n}");
                seq += 1;
                events.push(PlannedEvent {
                    event_id: format!("chaos-{seq}"),
                    kind: "appointment.scheduled",
                    reference: reference.clone(),
                    starts_in_min: Some(starts),
                    phone: Some(format!("+5197{:07}", n)),
                });
                appts.push(Appt {
                    reference,
                    version: 1,
                    cancelled: false,
                    starts_in_min: starts,
                });
                booked += 1;
            }
            // Changes pick from everything booked so far, including this
            // wave's bookings (imported earlier in the same file).
            let mut changes = vec![true; resched_now as usize];
            changes.extend(std::iter::repeat_n(false, cancel_now as usize));
            for reschedule in changes {
                let live: Vec<usize> = (0..appts.len()).filter(|&i| !appts[i].cancelled).collect();
                if live.is_empty() {
                    break;
                }
                let a = &mut appts[live[rng.random_range(0..live.len())]];
                seq += 1;
                if reschedule {
                    a.starts_in_min += rng.random_range(30..24 * 60);
                    a.version += 1;
                    events.push(PlannedEvent {
                        event_id: format!("chaos-{seq}"),
                        kind: "appointment.rescheduled",
                        reference: a.reference.clone(),
                        starts_in_min: Some(a.starts_in_min),
                        phone: None,
                    });
                    resched += 1;
                } else {
                    a.version += 1;
                    a.cancelled = true;
                    events.push(PlannedEvent {
                        event_id: format!("chaos-{seq}"),
                        kind: "appointment.cancelled",
                        reference: a.reference.clone(),
                        starts_in_min: None,
                        phone: None,
                    });
                    cancelled += 1;
                }
            }
            // Booking systems repeat themselves: re-deliver a few events
            // already imported (same event id: must change nothing).
            let repeats = if all_events.is_empty() {
                0
            } else {
                rng.random_range(0..=3usize)
            };
            all_events.extend(events.iter().cloned());
            for _ in 0..repeats {
                let e = all_events[rng.random_range(0..all_events.len())].clone();
                events.push(e);
            }
            let ending = if w < random_waves {
                Ending::KillAfterMs(rng.random_range(100..1500))
            } else if w < random_waves + STEPS.len() {
                let step = STEPS[w - random_waves];
                Ending::Failpoint(format!("{step}:{}", rng.random_range(1..=3)))
            } else if w == random_waves + STEPS.len() {
                Ending::StoreFaults {
                    spec: format!("store_begin:{}:busy:3", rng.random_range(2..=8)),
                    run_ms: 2500,
                }
            } else {
                Ending::StoreFaults {
                    spec: format!("store_commit:{}:error", rng.random_range(2..=8)),
                    run_ms: 2500,
                }
            };
            let restart_sim = w > 0 && w < random_waves && w % 5 == 0;
            let hold_lock_ms = (w == random_waves / 2).then_some(2000);
            waves.push(Wave {
                events,
                ending,
                restart_sim,
                hold_lock_ms,
            });
        }
        let expected = appts
            .iter()
            .map(|a| Expected {
                reference: a.reference.clone(),
                version: a.version,
                status: if a.cancelled {
                    "cancelled".into()
                } else {
                    "scheduled".into()
                },
            })
            .collect();
        let event_ids = all_events.iter().map(|e| e.event_id.clone()).collect();
        Plan {
            options: (o.intentions, o.kills, o.seed),
            waves,
            sim_seed: o.seed,
            sim_faults: SIM_FAULTS.to_string(),
            expected,
            event_ids,
        }
    }

    /// A short hash of the whole schedule: equal seeds print equal
    /// fingerprints, which is how a run shows it replayed the same faults.
    pub fn fingerprint(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        hex::encode(&Sha256::digest(text.as_bytes())[..8])
    }

    pub fn events(&self) -> usize {
        self.waves.iter().map(|w| w.events.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(seed: u64) -> Options {
        Options {
            intentions: 500,
            kills: 6,
            seed,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_plan() {
        assert_eq!(Plan::new(&opts(7)), Plan::new(&opts(7)));
        assert_eq!(Plan::new(&opts(7)).fingerprint(), Plan::new(&opts(7)).fingerprint());
        assert_ne!(Plan::new(&opts(7)).fingerprint(), Plan::new(&opts(8)).fingerprint());
    }

    #[test]
    fn it_has_every_kind_of_fault() {
        let p = Plan::new(&opts(7));
        let kills = p
            .waves
            .iter()
            .filter(|w| matches!(w.ending, Ending::KillAfterMs(_)))
            .count();
        assert_eq!(kills, 6);
        for step in STEPS {
            assert!(
                p.waves
                    .iter()
                    .any(|w| matches!(&w.ending, Ending::Failpoint(s) if s.starts_with(step))),
                "{step}"
            );
        }
        assert!(
            p.waves
                .iter()
                .any(|w| matches!(&w.ending, Ending::StoreFaults { spec, .. } if spec.contains("busy")))
        );
        assert!(
            p.waves
                .iter()
                .any(|w| matches!(&w.ending, Ending::StoreFaults { spec, .. } if spec.contains("error")))
        );
        assert!(p.waves.iter().any(|w| w.restart_sim));
        assert!(p.waves.iter().any(|w| w.hold_lock_ms.is_some()));
    }

    #[test]
    fn events_add_up_to_the_intentions_and_the_model_follows_them() {
        let p = Plan::new(&opts(3));
        let kinds = |k: &str| p.waves.iter().flat_map(|w| &w.events).filter(|e| e.kind == k).count();
        // Repeated events are extra lines with an already-used id.
        assert!(p.events() >= 500);
        assert_eq!(p.event_ids.len(), 500);
        assert_eq!(p.expected.len(), 400);
        assert!(kinds("appointment.scheduled") >= 400);
        let cancelled = p.expected.iter().filter(|e| e.status == "cancelled").count();
        assert_eq!(cancelled, 40);
        assert!(p.expected.iter().all(|e| e.version >= 1));
        for w in &p.waves {
            for e in &w.events {
                let line = e.to_json(Utc::now());
                assert!(crate::domain::event::BookingEvent::from_json(&line).is_ok(), "{line}");
            }
        }
    }
}
