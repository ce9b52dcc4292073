//! Property: the order in which a file lists its events does not change
//! the ledger. Each case generates a valid event set, imports two orders
//! of it (as written, and a shuffle) with `import_file` into two real
//! SQLite ledgers at a fixed clock, and compares what is stored.
//!
//! Two sets, because the message *history* legitimately depends on order
//! (an appointment announced at version 1 and moved to version 2 gets an
//! update notice; one first seen at version 2 gets a booking notice):
//! - independent events (many appointments, phones shared between them,
//!   duplicated deliveries, the same content re-sent under another event
//!   id, cancellations of appointments never seen): the whole ledger is
//!   the same, every commitment and every intention with its key, state,
//!   recipient, text, fingerprint and due time;
//! - versioned snapshots of the same appointments in any order: the
//!   commitments are the same (the highest version wins), and whatever is
//!   still planned belongs to that version.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};
use unavez::config::Policy;
use unavez::import::{ImportOptions, import_file};
use unavez::planner::Planner;
use unavez::store::{IntentFilter, Store};
use unavez::templates::Templates;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

const PHONES: [&str; 3] = ["+51987650001", "+51987650002", "+51987650003"];
const NAMES: [&str; 3] = ["Ana Quispe", "José Peña", "Rosa Mamani"];

/// How one appointment appears in the file.
#[derive(Debug, Clone)]
enum Shape {
    Once,
    /// The same event delivered twice (same event id).
    Duplicated,
    /// The same content under a second event id.
    Resent,
    /// Only a cancellation, for an appointment never seen.
    CancelledUnseen,
    /// Snapshots at versions 1..=n, each at its own time; whether version
    /// 1 is scheduled (or a cancellation, reopened by version 2).
    Versions(i64, bool),
}

#[derive(Debug, Clone)]
struct Appointment {
    phone: usize,
    name: usize,
    day: i64,
    shape: Shape,
}

fn appointment(versions: bool) -> impl Strategy<Value = Appointment> {
    let shape = if versions {
        (2i64..5, any::<bool>())
            .prop_map(|(n, s)| Shape::Versions(n, s))
            .boxed()
    } else {
        prop_oneof![
            Just(Shape::Once),
            Just(Shape::Duplicated),
            Just(Shape::Resent),
            Just(Shape::CancelledUnseen),
        ]
        .boxed()
    };
    (0..PHONES.len(), 0..NAMES.len(), 2i64..30, shape).prop_map(|(phone, name, day, shape)| Appointment {
        phone,
        name,
        day,
        shape,
    })
}

/// The events of a set, one JSON line each, in generation order.
fn events(appointments: &[Appointment]) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, a) in appointments.iter().enumerate() {
        let at = |v: i64| (now() + Duration::days(a.day) + Duration::hours(v)).to_rfc3339();
        let event = |id: String, kind: &str, version: Option<i64>, starts: String| {
            let mut e = json!({
                "event_id": id, "type": kind, "ref": format!("cita-{i}"), "starts_at": starts,
                "contact": {"phone": PHONES[a.phone], "name": NAMES[a.name]},
                "service": "Odontología", "location": "Sede Miraflores",
            });
            if let Some(v) = version {
                e["version"] = json!(v);
            }
            e.to_string()
        };
        match &a.shape {
            Shape::Once => lines.push(event(format!("e{i}"), "appointment.scheduled", None, at(0))),
            Shape::Duplicated => {
                let e = event(format!("e{i}"), "appointment.scheduled", None, at(0));
                lines.extend([e.clone(), e]);
            }
            Shape::Resent => {
                for copy in ["a", "b"] {
                    lines.push(event(format!("e{i}{copy}"), "appointment.scheduled", Some(1), at(0)));
                }
            }
            Shape::CancelledUnseen => lines.push(event(format!("e{i}"), "appointment.cancelled", None, at(0))),
            Shape::Versions(n, first_scheduled) => {
                // Reschedules at versions 1..=n; version 1 may be a
                // cancellation (reopened later). A cancellation at a later
                // version is left out: applied to a known appointment it
                // keeps the stored time, so when the version before it
                // arrives late the stored time depends on order (reported
                // as a finding, not hidden here).
                for v in 1..=*n {
                    let kind = if v == 1 && !first_scheduled {
                        "appointment.cancelled"
                    } else {
                        "appointment.scheduled"
                    };
                    lines.push(event(format!("e{i}v{v}"), kind, Some(v), at(v)));
                }
            }
        }
    }
    lines
}

/// What the ledger holds after importing `lines`: commitments and
/// intentions without their row ids (which follow insertion order), by
/// reference and by key.
fn ledger_after(dir: &Path, name: &str, lines: &[String]) -> (BTreeMap<String, Value>, BTreeMap<String, Value>) {
    let file = dir.join(format!("{name}.jsonl"));
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let mut store = Store::open(&dir.join(format!("{name}.db"))).unwrap();
    let (policy, templates) = (Policy::default(), Templates::embedded());
    let planner = Planner::new(&policy, &templates, chrono_tz::America::Lima);
    let opts = ImportOptions {
        skip_invalid: false,
        rejects_path: None,
        source: "agenda.jsonl".into(),
    };
    import_file(&mut store, &planner, &file, &opts, now()).unwrap_or_else(|e| panic!("{e}"));
    let commitments = store.read(|tx| tx.list_commitments(10_000, 0)).unwrap();
    let filter = IntentFilter {
        limit: 100_000,
        ..Default::default()
    };
    let intentions = store.read(|tx| tx.list_intentions(&filter)).unwrap();
    let strip = |mut v: Value, fields: &[&str]| {
        for f in fields {
            v.as_object_mut().unwrap().remove(*f);
        }
        v
    };
    (
        commitments
            .into_iter()
            .map(|c| {
                let v = strip(serde_json::to_value(&c).unwrap(), &["id", "contact_id"]);
                (c.commitment.reference, v)
            })
            .collect(),
        intentions
            .into_iter()
            .map(|i| {
                let v = strip(
                    serde_json::to_value(&i).unwrap(),
                    &["id", "commitment_id", "related_id"],
                );
                (i.key, v)
            })
            .collect(),
    )
}

/// A set and a shuffle of it.
fn set_and_shuffle(versions: bool) -> impl Strategy<Value = (Vec<String>, Vec<String>)> {
    prop::collection::vec(appointment(versions), 1..7)
        .prop_map(|a| events(&a))
        .prop_flat_map(|lines| (Just(lines.clone()), Just(lines).prop_shuffle()))
}

proptest! {
    // Each case builds two ledgers on disk: few cases keep it quick.
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn any_order_of_independent_events_gives_the_same_ledger((lines, shuffled) in set_and_shuffle(false)) {
        let dir = tempfile::tempdir().unwrap();
        let (c1, i1) = ledger_after(dir.path(), "a", &lines);
        let (c2, i2) = ledger_after(dir.path(), "b", &shuffled);
        prop_assert!(!c1.is_empty());
        prop_assert_eq!(c1, c2);
        prop_assert_eq!(i1, i2);
    }

    #[test]
    fn any_order_of_versioned_snapshots_converges((lines, shuffled) in set_and_shuffle(true)) {
        let dir = tempfile::tempdir().unwrap();
        let (c1, i1) = ledger_after(dir.path(), "a", &lines);
        let (c2, i2) = ledger_after(dir.path(), "b", &shuffled);
        prop_assert_eq!(&c1, &c2);
        for intentions in [i1, i2] {
            for (key, i) in intentions.iter().filter(|(_, i)| i["state"] == "planned") {
                let c = &c1[i["commitment_ref"].as_str().unwrap()];
                prop_assert_eq!(&i["commitment_version"], &c["version"], "{} planned for an old version", key);
            }
        }
    }
}
