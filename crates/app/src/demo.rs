//! The demo clinic: a few hundred appointments over three days relative to
//! `now`, with reschedules, cancellations, confirmations, numbers WhatsApp
//! will reject and an order or two — generated as [`BookingEvent`]s and
//! applied through [`crate::ingest::ingest`], the same path as a real
//! booking feed.
//!
//! Generation is deterministic for a given `(now, seed)` (a small
//! xorshift generator, not `rand`, so the output never changes with a
//! dependency upgrade): snapshot tests seed the same clinic every run.

use chrono::{DateTime, Duration, FixedOffset, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use crate::domain::event::{BookingEvent, EventContact, EventType};
use crate::domain::history::{self, HistorySignal, Said};
use crate::domain::state::{IntentionState, Signal};
use crate::ingest::{IngestError, Outcome, ingest};
use crate::planner::Planner;
use crate::store::{Cause, IntentFilter, Store, StoreError};

/// One booking in this many carries a phone typed without its country code
/// (not E.164): the ledger refuses the event at the door, naming the field.
pub const INVALID_PHONE_EVERY: usize = 37;

#[derive(Debug, Clone, Copy)]
pub struct DemoOptions {
    /// Appointments to book (spread over three days).
    pub appointments: usize,
    pub seed: u64,
    /// When the ledger learns of the events.
    pub replay: Replay,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            appointments: 300,
            seed: 42,
            replay: Replay::Now,
        }
    }
}

/// When the demo's booking events reach the ledger. The events themselves
/// happened half an hour ago either way (booked, then changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Replay {
    /// All at `now`, as a feed replayed at start-up: the messages they
    /// plan are due now, so a live demo's latency is the dispatcher's
    /// seconds, not the events' age (`unavez demo`).
    #[default]
    Now,
    /// Each at the moment it happened: a clinic whose morning already
    /// went by, for fixtures that show cases waiting for a while.
    AtEventTimes,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SeedSummary {
    pub events: usize,
    pub duplicates: usize,
    pub rejected: usize,
    pub planned: usize,
    pub closed: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("demo event {event_id}: {source}")]
    Ingest { event_id: String, source: IngestError },
}

/// xorshift64*: tiny, deterministic, good enough for fake patients.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a>(&mut self, xs: &'a [&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const FIRST: &[&str] = &[
    "Ana", "Luis", "María", "José", "Rosa", "Carlos", "Lucía", "Jorge", "Carmen", "Miguel", "Sofía", "Pedro", "Elena",
    "Diego", "Valeria", "Raúl",
];
const LAST: &[&str] = &[
    "Quispe", "Flores", "Rojas", "Huamán", "Torres", "Vargas", "Castillo", "Mendoza", "Chávez", "Ramos", "Salazar",
];
const SERVICES: &[&str] = &[
    "Odontología",
    "Medicina general",
    "Pediatría",
    "Dermatología",
    "Oftalmología",
];
const SITES: &[&str] = &["Sede Miraflores", "Sede San Isidro"];

/// The clinic's booking events, in the order a booking system would send
/// them: all bookings first, then the day's changes.
pub fn clinic_events(now: DateTime<Utc>, tz: Tz, opts: DemoOptions) -> Vec<BookingEvent> {
    let mut rng = Rng::new(opts.seed);
    let at = |t: DateTime<Utc>| t.with_timezone(&tz).fixed_offset();
    let booked_at = at(now - Duration::minutes(30));
    let changed_at = at(now - Duration::minutes(25));
    // Spread the appointments evenly over the free slots.
    let slots = slots(now, tz);
    let mut events = Vec::new();
    let mut changes = Vec::new();
    if slots.is_empty() {
        return events;
    }
    for n in 0..opts.appointments {
        let starts = slots[n * slots.len() / opts.appointments.max(1) % slots.len()];
        let reference = format!("cita-{:04}", 1001 + n);
        let phone = if n % INVALID_PHONE_EVERY == 5 {
            format!("9{:08}", rng.below(100_000_000))
        } else {
            format!("+519{:08}", rng.below(100_000_000))
        };
        let name = format!("{} {}", rng.pick(FIRST), rng.pick(LAST));
        events.push(BookingEvent {
            event_id: format!("demo-{reference}-agendada"),
            kind: EventType::AppointmentScheduled,
            reference: reference.clone(),
            starts_at: Some(at(starts)),
            version: Some(1),
            contact: Some(EventContact {
                phone,
                name: Some(name),
                language: Some("es".into()),
            }),
            service: Some(rng.pick(SERVICES).into()),
            location: Some(rng.pick(SITES).into()),
            occurred_at: Some(booked_at),
            operator: None,
            note: None,
            raw: None,
        });
        let change = |kind: EventType, suffix: &str, starts_at: Option<DateTime<Utc>>| BookingEvent {
            event_id: format!("demo-{reference}-{suffix}"),
            kind,
            reference: reference.clone(),
            starts_at: starts_at.map(at),
            version: None,
            contact: None,
            service: None,
            location: None,
            occurred_at: Some(changed_at),
            operator: None,
            note: None,
            raw: None,
        };
        let roll = rng.below(100);
        if roll < 10 {
            let later = starts + Duration::minutes(20 * (1 + rng.below(6) as i64));
            changes.push(change(EventType::AppointmentRescheduled, "reprogramada", Some(later)));
        } else if roll < 15 {
            changes.push(change(EventType::AppointmentCancelled, "cancelada", None));
        } else if roll < 35 {
            changes.push(change(EventType::AppointmentConfirmed, "confirmada", None));
        }
    }
    events.extend(changes);
    events.extend(order_events(&mut rng, changed_at));
    events
}

/// The two shop orders of the demo: one confirmed, one confirmed and
/// shipped, so the console shows order notifications beside the clinic's.
fn order_events(rng: &mut Rng, changed_at: DateTime<FixedOffset>) -> Vec<BookingEvent> {
    let mut events = Vec::new();
    for (i, reference) in ["pedido-0088", "pedido-0089"].iter().enumerate() {
        let name = format!("{} {}", rng.pick(FIRST), rng.pick(LAST));
        let order = |kind: EventType, suffix: &str| BookingEvent {
            event_id: format!("demo-{reference}-{suffix}"),
            kind,
            reference: reference.to_string(),
            starts_at: None,
            version: None,
            contact: Some(EventContact {
                phone: format!("+5198765{:04}", 4321 + i),
                name: Some(name.clone()),
                language: Some("es".into()),
            }),
            service: None,
            location: None,
            occurred_at: Some(changed_at),
            operator: None,
            note: None,
            raw: None,
        };
        events.push(order(EventType::OrderConfirmed, "confirmado"));
        if i == 0 {
            events.push(order(EventType::OrderShipped, "enviado"));
        }
    }
    events
}

/// Slots every 20 minutes, 08:00–18:40, over today and the next two days,
/// at least an hour ahead of `now`.
fn slots(now: DateTime<Utc>, tz: Tz) -> Vec<DateTime<Utc>> {
    let today = now.with_timezone(&tz).date_naive();
    let mut slots = Vec::new();
    for d in 0..3 {
        let date = today + Duration::days(d);
        for i in 0..33 {
            let Some(time) = NaiveTime::from_hms_opt(8, 0, 0).map(|t| t + Duration::minutes(20 * i)) else {
                continue;
            };
            let Some(local) = tz.from_local_datetime(&date.and_time(time)).single() else {
                continue;
            };
            let utc = local.with_timezone(&Utc);
            if utc > now + Duration::hours(1) {
                slots.push(utc);
            }
        }
    }
    slots
}

/// Generates the clinic and applies it, one transaction per event (as a
/// booking feed would), so a rejected event never blocks the others.
pub fn seed_clinic(
    store: &mut Store,
    planner: &Planner<'_>,
    now: DateTime<Utc>,
    opts: DemoOptions,
) -> Result<SeedSummary, DemoError> {
    let mut s = SeedSummary::default();
    for ev in clinic_events(now, planner.tz, opts) {
        s.events += 1;
        // The same check as `unavez import`: a bad phone never reaches the
        // ledger.
        if ev.validate().is_err() {
            s.rejected += 1;
            continue;
        }
        let at = match opts.replay {
            Replay::Now => now,
            Replay::AtEventTimes => ev.occurred_at.map(|t| t.with_timezone(&Utc)).unwrap_or(now),
        };
        let r = store.write(|tx| match ingest(tx, planner, &ev, "demo", at) {
            Err(IngestError::Rejected(_)) => Ok(None),
            Err(source) => Err(DemoError::Ingest {
                event_id: ev.event_id.clone(),
                source,
            }),
            Ok(o) => Ok(Some(o)),
        })?;
        match r {
            None => s.rejected += 1,
            Some(Outcome::Duplicate { .. }) => s.duplicates += 1,
            Some(Outcome::Stored { planned, closed, .. }) => {
                s.planned += planned.len();
                s.closed += closed;
            }
        }
    }
    Ok(s)
}

/// Without a dispatcher, gives some of the due booking notices the outcomes
/// a working day produces (delivered, read, uncertain, review, failed), so
/// the console has something to show. History rows say they are a demo
/// fixture; the real demo uses the dispatcher and the engine simulator.
pub fn showcase_outcomes(store: &mut Store, now: DateTime<Utc>) -> Result<usize, StoreError> {
    let due = store.read(|tx| {
        tx.list_intentions(&IntentFilter {
            states: vec![IntentionState::Planned],
            limit: 400,
            ..Default::default()
        })
    })?;
    let notices: Vec<_> = due
        .into_iter()
        .filter(|i| i.purpose == "aviso-reserva" && i.due_at <= now)
        .collect();
    let plan: &[(&[Signal], Cause, &str)] = &[
        (
            &[
                Signal::Claim,
                Signal::Accepted,
                Signal::Sent,
                Signal::Delivered,
                Signal::Read,
            ],
            Cause::Webhook,
            "read",
        ),
        (
            &[Signal::Claim, Signal::Accepted, Signal::Sent, Signal::Delivered],
            Cause::Webhook,
            "delivered",
        ),
        (
            &[Signal::Claim, Signal::Accepted, Signal::Sent, Signal::Delivered],
            Cause::Webhook,
            "delivered",
        ),
        (
            &[Signal::Claim, Signal::Unknown],
            Cause::Dispatcher,
            "timeout after sending",
        ),
        (&[Signal::Claim, Signal::Accepted], Cause::Dispatcher, "accepted"),
        (
            &[Signal::Claim, Signal::NeedsReview],
            Cause::Reconciler,
            "reconciliation exhausted",
        ),
        (&[Signal::Claim, Signal::Failed], Cause::Dispatcher, "invalid number"),
    ];
    let mut moved = 0;
    store.write(|tx| {
        // Counted afresh if PostgreSQL runs the transaction again.
        moved = 0;
        for (n, row) in notices.iter().enumerate() {
            let (signals, cause, what) = plan[n % plan.len()];
            let at = now - Duration::minutes(20) + Duration::seconds(n as i64);
            for (k, s) in signals.iter().enumerate() {
                let evidence = s.is_evidence().then(|| format!("demo:{}:{}", s.name(), row.id));
                let mut said = Said::new(HistorySignal::of(*s), if k == 0 { Cause::Dispatcher } else { cause })
                    .note(format!("demo fixture: {what}"))
                    .version(row.commitment_version);
                said.evidence = evidence;
                let state = tx.intention(row.id)?.state;
                let (_, record) = history::on_signal(row.id, state, *s, said, at + Duration::seconds(k as i64));
                tx.apply_records(record.as_slice())?;
            }
            moved += 1;
        }
        Ok::<_, StoreError>(())
    })?;
    Ok(moved)
}

#[cfg(test)]
#[path = "demo_tests.rs"]
mod tests;
