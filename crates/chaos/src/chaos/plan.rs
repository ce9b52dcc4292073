//! The seeded schedule of a chaos run: which booking events are imported
//! in which wave, how long each dispatcher runs before its SIGKILL, which
//! failpoints and store faults are armed, when the simulator restarts,
//! whose PostgreSQL connections are terminated and when, which dispatcher
//! is frozen past its lease, and the model of what the ledger must hold at
//! the end.
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
    /// Random kill waves: every dispatcher of such a wave is SIGKILLed.
    pub kills: u32,
    pub seed: u64,
    /// Dispatcher processes on the one ledger (at least 1).
    pub dispatchers: usize,
    /// The ledger is PostgreSQL: its connections can be terminated.
    pub postgres: bool,
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

/// What happens to the dispatchers in a wave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Ending {
    /// SIGKILL each dispatcher after its own number of milliseconds of
    /// running (one per dispatcher).
    KillAfterMs(Vec<u64>),
    /// Every dispatcher armed with `--failpoints <spec>`: the first one to
    /// end must have aborted by itself at the step (the harness kills them
    /// after a timeout if none reaches it); the others are SIGKILLed then.
    Failpoint(String),
    /// Every dispatcher armed with store faults that must be survived: they
    /// keep running for this long, then are SIGKILLed like any other wave.
    StoreFaults { spec: String, run_ms: u64 },
}

/// `pg_terminate_backend` of every connection of one dispatcher, this long
/// after the wave's import: it must survive (still running when the wave
/// ends it) and connect again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Terminate {
    pub dispatcher: usize,
    pub after_ms: u64,
}

/// How long into a wave its connections are terminated; the target runs
/// at least [`TERMINATED_RUNS_MS`] more before the wave ends it.
pub const TERMINATE_AFTER_MS: u64 = 300;
pub const TERMINATED_RUNS_MS: u64 = 900;

/// One wave: import, run the dispatcher, end it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wave {
    pub events: Vec<PlannedEvent>,
    pub ending: Ending,
    /// SIGKILL and restart the simulator (same journal) during this wave.
    pub restart_sim: bool,
    /// Hold the ledger's write lock from another connection for this long
    /// while the dispatchers run (SQLITE_BUSY pressure; on PostgreSQL a
    /// table lock every writer waits for).
    pub hold_lock_ms: Option<u64>,
    /// PostgreSQL only: terminate one dispatcher's connections.
    pub terminate: Option<Terminate>,
    /// Freeze this dispatcher (SIGSTOP) past its lease while some of the
    /// appointments it holds are rescheduled, then thaw it (SIGCONT); the
    /// wave's kill delays count from the thaw. Once per run.
    pub freeze: Option<usize>,
}

/// The whole schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Intentions, kills, seed, dispatchers, PostgreSQL.
    pub options: (u64, u32, u64, usize, bool),
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
        let n_disp = o.dispatchers.max(1);
        // In the middle, past the write-lock wave (and on no simulator
        // restart: the freeze wants the engine answering).
        let freeze_wave = (random_waves / 2 + 1).min(random_waves - 1);

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
            let mut terminate = None;
            let ending = if w < random_waves {
                let mut delays: Vec<u64> = (0..n_disp).map(|_| rng.random_range(100..1500)).collect();
                if o.postgres && w % 3 == 1 {
                    let dispatcher = rng.random_range(0..n_disp);
                    let d = &mut delays[dispatcher];
                    *d = (*d).max(TERMINATE_AFTER_MS + TERMINATED_RUNS_MS);
                    terminate = Some(Terminate {
                        dispatcher,
                        after_ms: TERMINATE_AFTER_MS,
                    });
                }
                Ending::KillAfterMs(delays)
            } else if w < random_waves + STEPS.len() {
                let step = STEPS[w - random_waves];
                Ending::Failpoint(format!("{step}:{}", rng.random_range(1..=3)))
            } else if w == random_waves + STEPS.len() {
                // A terminated connection on top of the busy ledger: the
                // dispatcher must outlive both.
                if o.postgres {
                    terminate = Some(Terminate {
                        dispatcher: 0,
                        after_ms: 700,
                    });
                }
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
            let freeze = (w == freeze_wave).then(|| rng.random_range(0..n_disp));
            waves.push(Wave {
                events,
                ending,
                restart_sim: restart_sim && w != freeze_wave,
                hold_lock_ms,
                terminate,
                freeze,
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
            options: (o.intentions, o.kills, o.seed, n_disp, o.postgres),
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
            dispatchers: 1,
            postgres: false,
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
        assert_eq!(p.waves.iter().filter(|w| w.freeze.is_some()).count(), 1);
        assert!(
            p.waves.iter().all(|w| w.terminate.is_none()),
            "SQLite has no connections to cut"
        );
    }

    #[test]
    fn several_dispatchers_on_postgresql_get_their_own_kills_and_terminations() {
        let o = Options {
            dispatchers: 3,
            postgres: true,
            ..opts(29)
        };
        let p = Plan::new(&o);
        for w in &p.waves {
            if let Ending::KillAfterMs(d) = &w.ending {
                assert_eq!(d.len(), 3);
            }
            if let Some(t) = w.terminate {
                assert!(t.dispatcher < 3);
                if let Ending::KillAfterMs(d) = &w.ending {
                    assert!(d[t.dispatcher] >= t.after_ms + TERMINATED_RUNS_MS, "{w:?}");
                }
            }
            assert!(w.freeze.is_none_or(|f| f < 3));
            assert!(!(w.freeze.is_some() && w.restart_sim));
        }
        assert!(p.waves.iter().filter(|w| w.terminate.is_some()).count() >= 2);
        assert_eq!(p.waves.iter().filter(|w| w.freeze.is_some()).count(), 1);
        assert_ne!(p.fingerprint(), Plan::new(&opts(29)).fingerprint());
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
