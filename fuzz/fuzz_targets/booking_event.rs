//! Booking events as `.jsonl` lines and as `POST /v1/bookings/events`
//! bodies: parsed and validated, then applied to a new commitment and
//! planned with the default policy and the embedded templates (keys,
//! texts, due times), all pure.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unavez_core::domain::commitment::{Effect, apply};
use unavez_core::domain::event::BookingEvent;
use unavez_core::planner::Planner;
use unavez_core::policy::Policy;
use unavez_core::templates::Templates;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut events: Vec<BookingEvent> = text.lines().filter_map(|l| BookingEvent::from_json(l).ok()).collect();
    if let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(text) {
        events.extend(items.into_iter().filter_map(|v| BookingEvent::from_value(v).ok()));
    }
    let (policy, templates) = (Policy::default(), Templates::embedded());
    let planner = Planner::new(&policy, &templates, chrono_tz::America::Lima);
    let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    for ev in &events {
        if let Effect::Applied { after, kind, .. } = apply(None, ev, now) {
            let _ = planner.plan(&after, kind, ev, now);
        }
    }
});
