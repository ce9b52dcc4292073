//! Reserve + plan: booking events through `unavez::ingest::ingest_each`,
//! the path `unavez import` takes (many events per transaction, applied
//! together in one savepoint with set-based reservations, one savepoint
//! per event only when one of them fails), into planned intentions.

use std::path::Path;
use std::time::Instant;

use chrono::{Duration, Utc};
use unavez::config::Config;
use unavez::domain::event::{BookingEvent, EventContact, EventType};
use unavez::import::IMPORT_BATCH;
use unavez::ingest::{IngestError, Outcome, ingest_each};

use crate::floor::Bounds;
use unavez::planner::Planner;
use unavez::store::Store;
use unavez::templates::Templates;

pub struct Reserve {
    pub events: u64,
    pub intentions: u64,
    pub seconds: f64,
    /// CPU time this thread spent on it (`None` where the kernel does not
    /// say): on two shared cores the wall clock also measures the others'
    /// builds, the CPU time much less so.
    pub cpu_seconds: Option<f64>,
}

impl Reserve {
    pub fn intentions_per_s(&self) -> f64 {
        self.intentions as f64 / self.seconds
    }
}

fn event(prefix: &str, i: u64, now: chrono::DateTime<Utc>) -> BookingEvent {
    // Appointments three to ten days ahead, so every reminder is planned.
    let starts = now + Duration::days(3) + Duration::minutes((i % (7 * 24 * 60)) as i64);
    BookingEvent {
        event_id: format!("{prefix}-evt-{i:08}"),
        kind: EventType::AppointmentScheduled,
        reference: format!("{prefix}-{i:06}"),
        starts_at: Some(starts.fixed_offset()),
        version: Some(1),
        contact: Some(EventContact {
            // 40,000 patients booking 2.5 times each, under the same name
            // every time (a name per booking renamed the contact at most
            // bookings, rewriting the search words of all its commitments:
            // a rename's cost, not a booking's).
            phone: format!("+519{:08}", i % 40_000),
            name: Some(format!("Paciente {}", i % 40_000)),
            language: Some("es".into()),
        }),
        service: Some("Odontología".into()),
        location: Some("Sede Miraflores".into()),
        occurred_at: Some(now.fixed_offset()),
        operator: None,
        note: None,
        raw: None,
    }
}

/// Ingests `events` appointment bookings in transactions of `batch`, with
/// the default policy (booking notice and two reminders each), recording
/// each commit's rows for the same-schema floor ([`crate::floor`]).
pub fn run(dir: &Path, events: u64, batch: u64) -> anyhow::Result<(Reserve, Bounds)> {
    let (r, b) = run_recorded(&dir.join("reserve.db"), "cita", events, batch, &Config::default(), true)?;
    Ok((r, b.expect("recorded")))
}

/// The same into `path` with the policy of `config`; references are
/// `{prefix}-NNNNNN`, so runs against one simulator never share a key.
pub fn run_into(path: &Path, prefix: &str, events: u64, batch: u64, config: &Config) -> anyhow::Result<Reserve> {
    Ok(run_recorded(path, prefix, events, batch, config, false)?.0)
}

/// [`run_into`], and when `record`, each commit's highest ids (the time
/// that takes is left out of the figure).
pub fn run_recorded(
    path: &Path,
    prefix: &str,
    events: u64,
    batch: u64,
    config: &Config,
    record: bool,
) -> anyhow::Result<(Reserve, Option<Bounds>)> {
    let templates = Templates::embedded();
    let planner = Planner::new(&config.policy, &templates, config.tz());
    drop(Store::open(path)?);
    if let Ok(sql) = std::env::var("BENCH_EXTRA_SQL") {
        let c = unavez::store::open_connection(path)?;
        c.execute_batch(&sql).map_err(unavez::store::StoreError::from)?;
    }
    let mut bounds = record.then(|| Bounds::start(path)).transpose()?;
    let mut store = Store::open(path)?;
    let now = Utc::now();
    let evs: Vec<BookingEvent> = (0..events).map(|i| event(prefix, i, now)).collect();
    let t = Instant::now();
    let cpu = thread_cpu_seconds();
    let mut left_out = (0.0, 0.0);
    let mut intentions = 0u64;
    for chunk in evs.chunks(batch.max(1) as usize) {
        intentions += store.write(|tx| {
            let mut n = 0u64;
            for part in chunk.chunks(IMPORT_BATCH) {
                let events: Vec<&BookingEvent> = part.iter().collect();
                for outcome in ingest_each(tx, &planner, &events, "bench", now) {
                    if let Outcome::Stored { planned, .. } = outcome? {
                        n += planned.len() as u64;
                    }
                }
            }
            Ok::<_, IngestError>(n)
        })?;
        if let Some(b) = &mut bounds {
            let (t0, c0) = (Instant::now(), thread_cpu_seconds());
            b.record()?;
            left_out.0 += t0.elapsed().as_secs_f64();
            left_out.1 += c0.zip(thread_cpu_seconds()).map_or(0.0, |(a, b)| b - a);
        }
    }
    Ok((
        Reserve {
            events,
            intentions,
            seconds: t.elapsed().as_secs_f64() - left_out.0,
            cpu_seconds: cpu.zip(thread_cpu_seconds()).map(|(a, b)| b - a - left_out.1),
        },
        bounds,
    ))
}

/// The calling thread's CPU time so far (`/proc/thread-self/schedstat`,
/// nanoseconds on a CPU), on Linux.
pub fn thread_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}
