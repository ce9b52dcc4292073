//! Conflicting, oversize and unappliable booking events through the real
//! `unavez` binary on a real SQLite file: a changed event at an unchanged
//! version is refused alone (`file:line: version: …`) and kept, version-less
//! agenda rows are versioned by the ledger, oversize fields are named, a
//! message over WhatsApp's limit is held for a person, and human output
//! never passes control characters to the terminal.

mod ledger_support;

use std::path::Path;

use ledger_support::*;
use serde_json::{Value, json};
use unavez_testkit::{Backend, on_both};

fn event(id: &str, reference: &str, version: Option<i64>, place: &str, phone: &str) -> String {
    let mut v = json!({"event_id": id, "type": "appointment.scheduled", "ref": reference,
        "starts_at": "2031-03-10T09:30:00-05:00", "contact": {"phone": phone, "name": "Ana Quispe"},
        "service": "Odontología", "location": place});
    if let Some(n) = version {
        v["version"] = n.into();
    }
    v.to_string()
}

fn write(dir: &Path, name: &str, lines: &[String]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    p.to_str().unwrap().to_string()
}

/// (key, state, reason, recipient) of a commitment's intentions, by key.
fn intents(db: &Path, reference: &str) -> Vec<(String, String, String, String)> {
    let v = json(db, &["intents", "list", "--ref", reference]);
    let mut rows: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let s = |f: &str| i[f].as_str().unwrap_or_default().to_string();
            (s("key"), s("state"), s("state_reason"), s("recipient"))
        })
        .collect();
    rows.sort();
    rows
}

const PHONE_A: &str = "+51987654321";
const PHONE_B: &str = "+51911222333";

fn a_changed_row_at_the_same_version_is_refused_by_line_and_skip_invalid_keeps_it(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let f = write(
        dir.path(),
        "agenda.jsonl",
        &[
            event("evt-1", "cita-1", Some(1), "Sede A", PHONE_A),
            event("evt-2", "cita-1", Some(1), "Sede B", PHONE_A),
            event("evt-3", "cita-2", Some(1), "Sede A", PHONE_B),
            event("evt-4", "cita-1", Some(1), "Sede A", PHONE_B),
        ],
    );
    // By default the whole file is refused, naming the line.
    let o = run(&db, &["import", &f]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{f}:2: version: cita-1 is already at version 1 with other content (location): refused"
        )),
        "{err}"
    );
    assert!(
        err.contains("nothing was stored") && !err.contains("already reserved"),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l.starts_with(&format!("  {f}:2: version:"))),
        "one rejected row per line: {err}"
    );
    assert_eq!(json(&db, &["commitments", "list"]), json!([]));

    // --skip-invalid stores the rest and keeps the refused rows.
    for round in 1..=2 {
        let o = run(&db, &["import", &f, "--skip-invalid", "--json"]);
        assert_eq!(o.status.code(), Some(2), "anything rejected → exit 2");
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        let rejected: Vec<(u64, &str)> = r["rejected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["line"].as_u64().unwrap(), e["field"].as_str().unwrap()))
            .collect();
        assert_eq!(rejected, [(2, "version"), (4, "version")], "round {round}: {r}");
        assert!(
            r["rejected"][1]["reason"].as_str().unwrap().contains("(contact.phone)"),
            "{r}"
        );
        let stored = r["stored"].as_u64().unwrap() + r["duplicates"].as_u64().unwrap();
        assert_eq!(stored, 2, "round {round}: {r}");
    }
    let show = json(&db, &["commitments", "show", "cita-1"]);
    assert_eq!(show["commitment"]["location"], "Sede A", "{show}");
    assert_eq!(show["commitment"]["version"], 1);
    let refused: Vec<(String, Value, i64, bool)> = show["refused_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["event_id"].as_str().unwrap().to_string(),
                r["fields"].clone(),
                r["times"].as_i64().unwrap(),
                r["open"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            ("evt-2".into(), json!(["location"]), 2, true),
            ("evt-4".into(), json!(["contact.phone"]), 2, true)
        ]
    );
    assert_eq!(show["refused_events"][0]["conflict"], "same_version");
    assert_eq!(show["refused_events"][0]["payload"]["location"], "Sede B");
    let human = stdout(&run(&db, &["commitments", "show", "cita-1"]));
    assert!(human.contains("refused events") && human.contains("evt-2"), "{human}");
    // Nothing planned for the refused content or the refused phone.
    assert!(intents(&db, "cita-1").iter().all(|i| i.3 == PHONE_A));
}

fn vevent(uid: &str, sequence: Option<u32>, start: &str, place: &str) -> String {
    let seq = sequence.map(|s| format!("SEQUENCE:{s}\n")).unwrap_or_default();
    format!(
        "BEGIN:VEVENT\nUID:{uid}\n{seq}DTSTART;TZID=America/Lima:{start}\nSUMMARY:Odontología\n\
         LOCATION:{place}\nATTENDEE;CN=Ana Quispe:tel:{PHONE_A}\nEND:VEVENT\n"
    )
}

fn calendar(dir: &Path, name: &str, events: &[String]) -> String {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!("BEGIN:VCALENDAR\nVERSION:2.0\n{}END:VCALENDAR\n", events.concat()),
    )
    .unwrap();
    p.to_str().unwrap().to_string()
}

fn two_vevents_with_one_uid_and_sequence_but_other_properties_are_a_conflict(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let f = calendar(
        dir.path(),
        "a.ics",
        &[
            vevent("cita-7", Some(0), "20310310T093000", "Sede A"),
            vevent("cita-7", Some(0), "20310311T100000", "Sede B"),
            vevent("cita-8", Some(0), "20310310T110000", "Sede A"),
        ],
    );
    let o = run(&db, &["import", &f]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{f}:11: version: event_id ics-" // the second BEGIN:VEVENT
        )) && err.contains("was already received with other content (location, starts_at)"),
        "{err}"
    );
    let o = run(&db, &["import", &f, "--skip-invalid"]);
    assert_eq!(report_number(&stdout(&o), "stored"), 2, "{}", stdout(&o));
    let show = json(&db, &["commitments", "show", "cita-7"]);
    assert_eq!(show["commitment"]["starts_at"], "2031-03-10T14:30:00Z");
    assert_eq!(show["refused_events"][0]["conflict"], "event_id_reused");
    assert_eq!(show["refused_events"][0]["fields"], json!(["location", "starts_at"]));

    // Without SEQUENCE the exporter does not version: a changed VEVENT gets
    // the next version from the ledger, and its old messages are superseded.
    let g = calendar(
        dir.path(),
        "b.ics",
        &[vevent("cita-9", None, "20310310T093000", "Sede A")],
    );
    assert!(run(&db, &["import", &g]).status.success());
    let g = calendar(
        dir.path(),
        "c.ics",
        &[vevent("cita-9", None, "20310312T093000", "Sede A")],
    );
    let o = run(&db, &["import", &g]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        json(&db, &["commitments", "show", "cita-9"])["commitment"]["version"],
        2
    );
    assert!(
        intents(&db, "cita-9")
            .iter()
            .all(|i| i.0.ends_with(":v2") == (i.1 == "planned")),
        "{:?}",
        intents(&db, "cita-9")
    );
}

fn a_versionless_agenda_row_with_a_new_phone_supersedes_every_message_to_the_old_one(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let head = "ref,starts_at,phone,name,service,location,status";
    let row = |phone: &str| format!("cita-1,2031-03-10T09:30:00-05:00,{phone},Ana Quispe,Odontología,Sede A,scheduled");
    let first = write(dir.path(), "a.csv", &[head.into(), row(PHONE_A)]);
    assert!(run(&db, &["import", &first]).status.success());
    assert_eq!(intents(&db, "cita-1").len(), 3);
    let second = write(dir.path(), "b.csv", &[head.into(), row(PHONE_B)]);
    let o = run(&db, &["import", &second]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(report_number(&stdout(&o), "stored"), 1, "{}", stdout(&o));
    assert_eq!(
        json(&db, &["commitments", "show", "cita-1"])["commitment"]["version"],
        2
    );
    let rows = intents(&db, "cita-1");
    let to_old: Vec<_> = rows.iter().filter(|i| i.3 == PHONE_A).collect();
    assert_eq!(to_old.len(), 3, "{rows:?}");
    assert!(
        to_old
            .iter()
            .all(|i| (i.1.as_str(), i.2.as_str()) == ("cancelled", "superseded")),
        "nothing is left to send to the old phone: {rows:?}"
    );
    let to_new: Vec<&str> = rows
        .iter()
        .filter(|i| i.3 == PHONE_B && i.1 == "planned")
        .map(|i| i.0.as_str())
        .collect();
    assert_eq!(
        to_new,
        [
            "cita-1:aviso-reserva:v2",
            "cita-1:recordatorio-24h:v2",
            "cita-1:recordatorio-2h:v2"
        ]
    );
    // The same export again changes nothing.
    let o = run(&db, &["import", &second]);
    assert_eq!(report_number(&stdout(&o), "already present"), 1, "{}", stdout(&o));
}

fn oversize_fields_are_refused_by_file_line_and_field(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let mut long_name: Value = serde_json::from_str(&event("evt-1", "cita-1", None, "Sede A", PHONE_A)).unwrap();
    long_name["contact"]["name"] = "n".repeat(121).into();
    let mut long_service: Value = serde_json::from_str(&event("evt-2", "cita-2", None, "Sede A", PHONE_A)).unwrap();
    long_service["service"] = "s".repeat(201).into();
    long_service["note"] = "x".repeat(1001).into();
    let f = write(
        dir.path(),
        "big.jsonl",
        &[
            long_name.to_string(),
            long_service.to_string(),
            event("evt-3", "cita-3", None, &"p".repeat(201), PHONE_A),
            event("evt-4", "cita-4", None, "Sede A", PHONE_A),
        ],
    );
    let o = run(&db, &["import", &f, "--skip-invalid"]);
    let err = stderr(&o);
    for expected in [
        format!("{f}:1: contact.name: too long: 121 characters (at most 120)"),
        format!("{f}:2: service: too long: 201 characters (at most 200)"),
        format!("{f}:2: note: too long: 1001 characters (at most 1000)"),
        format!("{f}:3: location: too long: 201 characters (at most 200)"),
    ] {
        assert!(err.contains(&expected), "missing {expected:?} in:\n{err}");
    }
    assert_eq!(report_number(&stdout(&o), "stored"), 1);
    let head = "ref,starts_at,phone,name,service,location,status";
    let csv = write(
        dir.path(),
        "big.csv",
        &[
            head.into(),
            format!(
                "cita-5,2031-03-10T09:30:00-05:00,{PHONE_A},{},Odontología,Sede A,scheduled",
                "n".repeat(121)
            ),
        ],
    );
    let err = stderr(&run(&db, &["import", &csv]));
    assert!(err.contains(&format!("{csv}:2: name: too long")), "{err}");
}

fn a_message_over_whatsapps_limit_is_held_for_review_with_its_reason(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let templates = dir.path().join("plantillas.toml");
    let long = "Le recordamos las indicaciones. ".repeat(130);
    std::fs::write(
        &templates,
        unavez::templates::DEFAULT_TEMPLATES.replace("tu cita de {{2}} quedó reservada", &format!("{long}{{{{2}}}}")),
    )
    .unwrap();
    let config = dir.path().join("unavez.toml");
    // The fixtures' appointments are years ahead of the real clock.
    std::fs::write(
        &config,
        format!(
            "templates = {:?}\n[import]\nmax_days_ahead = 3660\n",
            templates.to_str().unwrap()
        ),
    )
    .unwrap();
    let f = write(
        dir.path(),
        "a.jsonl",
        &[event("evt-1", "cita-1", None, "Sede A", PHONE_A)],
    );
    let o = unavez(&db)
        .arg("--config")
        .arg(&config)
        .args(["import", &f])
        .output()
        .unwrap();
    assert!(o.status.success(), "the appointment itself is stored: {}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(report_number(&out, "stored"), 1, "{out}");
    assert_eq!(report_number(&out, "held for review"), 1, "{out}");
    let review = json(&db, &["intents", "list", "--state", "review"]);
    assert_eq!(review.as_array().unwrap().len(), 1, "{review}");
    assert_eq!(review[0]["key"], "cita-1:aviso-reserva:v1");
    let reason = review[0]["state_reason"].as_str().unwrap();
    assert!(
        reason.contains("characters, over WhatsApp's limit of 4096: not sent"),
        "{reason}"
    );
    let planned = json(&db, &["intents", "list", "--state", "planned"]);
    assert_eq!(
        planned.as_array().unwrap().len(),
        2,
        "the reminders still go out: {planned}"
    );
}

fn a_store_error_on_one_row_is_that_rows_error(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let f = write(
        dir.path(),
        "a.jsonl",
        &[
            event("evt-1", "cita-1", None, "Sede A", PHONE_A),
            event("evt-2", "cita-2", None, "Sede A", PHONE_A),
            event("evt-3", "cita-3", None, "Sede A", PHONE_A),
        ],
    );
    // Row 2 fails every time it is applied: in the batch (2nd hit), then
    // alone when the batch is applied again one event at a time (4th hit:
    // row 1 again, then row 2).
    let o = unavez_armed(&db, "ingest_event:2:error,ingest_event:4:error")
        .args(["import", &f, "--skip-invalid"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{f}:2: store: the ledger could not apply this event")),
        "{err}"
    );
    let refs: Vec<String> = json(&db, &["commitments", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["reference"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(refs, ["cita-1", "cita-3"]);
    let o = run(&db, &["import", &f]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(report_number(&stdout(&o), "stored"), 1);
}

fn human_output_shows_control_characters_as_visible_escapes(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let mut ev: Value = serde_json::from_str(&event("evt-1", "cita-1", None, "Sede\rA", PHONE_A)).unwrap();
    ev["contact"]["name"] = "\u{1b}[31mRED\u{1b}[0m\u{7}".into();
    let f = write(dir.path(), "a.jsonl", &[ev.to_string()]);
    assert!(run(&db, &["import", &f]).status.success());
    for args in [
        &["commitments", "show", "cita-1"][..],
        &["intents", "show", "cita-1:aviso-reserva:v1"],
    ] {
        let out = stdout(&run(&db, args));
        assert!(out.contains("\\e[31mRED\\e[0m\\a"), "{args:?}:\n{out}");
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\r'),
            "{args:?}"
        );
    }
    // JSON stays exact.
    let show = json(&db, &["commitments", "show", "cita-1"]);
    assert_eq!(show["commitment"]["name"], "\u{1b}[31mRED\u{1b}[0m\u{7}");
    assert_eq!(show["commitment"]["location"], "Sede\rA");
}

on_both!(
    a_changed_row_at_the_same_version_is_refused_by_line_and_skip_invalid_keeps_it,
    two_vevents_with_one_uid_and_sequence_but_other_properties_are_a_conflict,
    a_versionless_agenda_row_with_a_new_phone_supersedes_every_message_to_the_old_one,
    oversize_fields_are_refused_by_file_line_and_field,
    a_message_over_whatsapps_limit_is_held_for_review_with_its_reason,
    a_store_error_on_one_row_is_that_rows_error,
    human_output_shows_control_characters_as_visible_escapes,
);
