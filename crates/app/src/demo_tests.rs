//! The demo's pictures are true (issue 25, section 6): its messages are
//! due when the demo starts, so the Tablero's latency of a demo that has
//! run for seconds reads seconds, not the half hour its events are dated
//! back.

use chrono::{Duration, TimeZone, Utc};

use super::*;
use crate::board::read_day;
use crate::config::Config;
use crate::store::Entry;
use crate::templates::Templates;

#[test]
fn a_demo_s_messages_are_due_when_it_starts_and_its_latency_is_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("demo.db")).unwrap();
    let mut config = Config::default();
    config.policy.quiet_hours = None;
    let templates = Templates::embedded();
    let tz = config.tz();
    let planner = Planner {
        policy: &config.policy,
        templates: &templates,
        tz,
    };
    // 10:00 in Lima.
    let now = Utc.with_ymd_and_hms(2026, 12, 1, 15, 0, 0).unwrap();
    let opts = DemoOptions {
        appointments: 40,
        ..DemoOptions::default()
    };
    seed_clinic(&mut store, &planner, now, opts).unwrap();
    let planned = store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                states: vec![IntentionState::Planned],
                limit: 1000,
                ..Default::default()
            })
        })
        .unwrap();
    let notices: Vec<_> = planned.iter().filter(|i| i.purpose == "aviso-reserva").collect();
    assert!(!notices.is_empty());
    for i in &notices {
        assert!(
            i.due_at >= now,
            "{} due {} before the demo started ({now})",
            i.key,
            i.due_at
        );
    }
    // The dispatcher takes each due notice a few seconds in.
    store
        .write(|tx| {
            for i in notices.iter().filter(|i| i.due_at <= now) {
                for (k, s) in [Signal::Claim, Signal::Accepted].into_iter().enumerate() {
                    let entry = Entry {
                        signal: s.name(),
                        cause: Cause::Dispatcher,
                        evidence: None,
                        note: None,
                        commitment_version: Some(i.commitment_version),
                    };
                    tx.signal(i.id, s, &entry, now + Duration::seconds(2 + k as i64))?;
                }
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let local = now.with_timezone(&tz).date_naive();
    let start = tz
        .from_local_datetime(&local.and_hms_opt(0, 0, 0).unwrap())
        .unwrap()
        .with_timezone(&Utc);
    let later = now + Duration::seconds(20);
    let day = store
        .read(|tx| read_day(tx, notices[0].day, start, start + Duration::days(1), later))
        .unwrap();
    assert!(day.accepted > 0);
    let p50 = day.latency_p50_ms.unwrap();
    assert!(p50 < 60_000, "median latency {p50} ms in a 20-second demo");
}
