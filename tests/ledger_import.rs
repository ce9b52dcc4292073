//! `unavez import` and the listings, through the real binary on a real
//! SQLite file: duplicates, bad rows, `--skip-invalid`, CSV and iCalendar,
//! and the documented `--json` shapes.

mod ledger_support;

use ledger_support::*;
use unavez_testkit::{Backend, on_both};

fn importing_the_same_file_twice_changes_nothing_and_reports_duplicates(backend: Backend) {
    let ledger = backend.ledger();
    let db = ledger.db.clone();
    let file = fixture("agenda.jsonl");
    let first = run(&db, &["import", file.to_str().unwrap()]);
    assert!(first.status.success(), "{}", stderr(&first));
    let out = stdout(&first);
    assert_eq!(report_number(&out, "stored"), 10, "{out}");
    assert_eq!(report_number(&out, "already present"), 0);
    let before = intention_summary(&db);
    assert!(!before.is_empty());

    let second = run(&db, &["import", file.to_str().unwrap()]);
    assert!(second.status.success(), "{}", stderr(&second));
    let out = stdout(&second);
    assert!(out.contains("already present"), "{out}");
    assert_eq!(report_number(&out, "already present"), 10, "{out}");
    assert_eq!(report_number(&out, "stored"), 0);
    assert_eq!(intention_summary(&db), before);

    let report = json(&db, &["import", file.to_str().unwrap()]);
    assert_eq!(report["duplicates"], 10);
    assert_eq!(report["intentions_planned"], 0);
}

fn bad_rows_are_named_by_file_line_and_field_and_nothing_is_stored(backend: Backend) {
    let ledger = backend.ledger();
    let db = ledger.db.clone();
    let file = fixture("bad.jsonl");
    let f = file.to_str().unwrap();
    let o = run(&db, &["import", f]);
    assert!(!o.status.success());
    let err = stderr(&o);
    for (line, field, reason) in [
        (2, "contact.phone", "invalid E.164 phone"),
        (3, "starts_at", "unparsable time"),
        (6, "type", "unknown type"),
        (7, "ref", "missing"),
    ] {
        let expected = format!("{f}:{line}: {field}: {reason}");
        assert!(err.contains(&expected), "missing {expected:?} in:\n{err}");
    }
    assert!(err.contains("nothing was stored"), "{err}");
    assert!(
        !err.contains(&format!("{f}:1:")) && !err.contains(&format!("{f}:8:")),
        "valid rows are not reported: {err}"
    );
    assert_eq!(json(&db, &["commitments", "list"]), serde_json::json!([]));
    assert_eq!(json(&db, &["intents", "list"]), serde_json::json!([]));
}

fn skip_invalid_stores_the_valid_rows_and_writes_the_rejected_ones_aside(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let src = fixture("bad.jsonl");
    let file = dir.path().join("bad.jsonl");
    std::fs::copy(&src, &file).unwrap();
    let rejects = dir.path().join("rechazadas.txt");
    let o = run(
        &db,
        &[
            "import",
            file.to_str().unwrap(),
            "--skip-invalid",
            "--rejects",
            rejects.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success(), "anything rejected → non-zero exit");
    assert_eq!(report_number(&stdout(&o), "stored"), 2, "{}", stdout(&o));
    let text = std::fs::read_to_string(&rejects).unwrap();
    for id in ["evt-b2", "evt-b3", "evt-b4", "evt-b5"] {
        assert!(text.contains(id), "{id} not in rejects file:\n{text}");
    }
    assert!(!text.contains("evt-b1") && !text.contains("evt-b6"));
    let refs: Vec<String> = json(&db, &["commitments", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["reference"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(refs, ["cita-3001", "cita-3006"]);

    // Default rejects path: NAME.rejected.EXT, importable as it is.
    let other = backend.ledger();
    let db2 = other.db.clone();
    let o = run(&db2, &["import", file.to_str().unwrap(), "--skip-invalid"]);
    assert!(!o.status.success());
    assert!(dir.path().join("bad.rejected.jsonl").exists(), "{}", stderr(&o));
}

fn csv_and_ics_agendas_import_and_reimport_as_no_ops(backend: Backend) {
    let ledger = backend.ledger();
    let db = ledger.db.clone();
    for name in ["agenda.csv", "agenda.ics"] {
        let f = fixture(name);
        let o = run(&db, &["import", f.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert_eq!(report_number(&stdout(&o), "stored"), 4, "{name}: {}", stdout(&o));
        let before = intention_summary(&db);
        let o = run(&db, &["import", f.to_str().unwrap()]);
        assert_eq!(report_number(&stdout(&o), "already present"), 4, "{name}");
        assert_eq!(intention_summary(&db), before);
    }
    let show = json(&db, &["commitments", "show", "cita-5001"]);
    assert_eq!(show["commitment"]["version"], 1, "SEQUENCE 0 is version 1: {show}");
    assert_eq!(show["commitment"]["starts_at"], "2031-03-10T14:30:00Z");
    let cancelled = json(&db, &["commitments", "show", "cita-5003"]);
    assert_eq!(cancelled["commitment"]["status"], "cancelled");
    assert_eq!(cancelled["commitment"]["version"], 2);
    let csv_cancelled = json(&db, &["commitments", "show", "cita-4003"]);
    assert_eq!(csv_cancelled["commitment"]["status"], "cancelled");
    // A UID outside the ref charset is sanitized deterministically.
    let refs: Vec<String> = json(&db, &["commitments", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["reference"].as_str().unwrap().to_string())
        .collect();
    assert!(refs.iter().any(|r| r.starts_with("cita-5002-")), "{refs:?}");
}

fn listings_and_show_have_the_documented_json_shapes(backend: Backend) {
    let ledger = backend.ledger();
    let db = ledger.db.clone();
    let f = fixture("agenda.jsonl");
    assert!(run(&db, &["import", f.to_str().unwrap()]).status.success());

    // cita-2002 was rescheduled to 12 March: its v2 reminders are planned.
    let planned = json(&db, &["intents", "list", "--state", "planned", "--day", "2031-03-11"]);
    let keys: Vec<&str> = planned
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["cita-2002:recordatorio-24h:v2"], "{planned}");
    let i = &planned[0];
    for field in [
        "id",
        "key",
        "commitment_ref",
        "commitment_version",
        "purpose",
        "recipient",
        "category",
        "channel",
        "template",
        "language",
        "parameters",
        "body",
        "fingerprint",
        "correlation_id",
        "asks_confirmation",
        "due_at",
        "day",
        "state",
        "state_reason",
        "created_at",
    ] {
        assert!(i.get(field).is_some(), "intents list item lacks {field}: {i}");
    }
    assert_eq!(i["day"], "2031-03-11");
    assert_eq!(i["due_at"], "2031-03-11T16:00:00Z");

    let cancelled = json(&db, &["intents", "list", "--state", "cancelled"]);
    let reasons: Vec<(String, String)> = cancelled
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["key"].as_str().unwrap().into(),
                i["state_reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        reasons.contains(&("cita-2002:recordatorio-24h:v1".into(), "superseded".into())),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&("cita-2003:recordatorio-2h:v1".into(), "commitment_cancelled".into())),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&("cita-2001:recordatorio-24h:v1".into(), "already_confirmed".into())),
        "{reasons:?}"
    );

    let show = json(&db, &["intents", "show", "cita-2002:recordatorio-24h:v1"]);
    assert_eq!(show["intention"]["state"], "cancelled");
    let history: Vec<(String, String)> = show["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["signal"].as_str().unwrap().into(),
                h["to_state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        history,
        [
            ("reserved".into(), "planned".into()),
            ("cancel".into(), "cancelled".into())
        ]
    );
    assert_eq!(show["attempts"], serde_json::json!([]));
    let related: Vec<&str> = show["related"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert!(related.contains(&"cita-2002:aviso-cambio:v2"), "{related:?}");
    // By numeric id too.
    let id = show["intention"]["id"].as_i64().unwrap().to_string();
    assert_eq!(
        json(&db, &["intents", "show", &id])["intention"]["key"],
        "cita-2002:recordatorio-24h:v1"
    );

    let list = json(&db, &["commitments", "list"]);
    assert_eq!(list.as_array().unwrap().len(), 4);
    let c = json(&db, &["commitments", "show", "pedido-88"]);
    assert_eq!(c["commitment"]["kind"], "order");
    assert_eq!(c["commitment"]["status"], "enviado");
    let events: Vec<&str> = c["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        ["order.confirmed", "order.paid", "order.updated", "order.shipped"]
    );
    let keys: Vec<&str> = c["intentions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "pedido-88:confirmado:v1:whatsapp",
            "pedido-88:pagado:v2:whatsapp",
            "pedido-88:enviado:v3:whatsapp"
        ]
    );

    // Errors are named, not panics.
    let o = run(&db, &["intents", "show", "no-such-key"]);
    assert!(
        !o.status.success() && stderr(&o).contains("no-such-key"),
        "{}",
        stderr(&o)
    );
    let o = run(&db, &["intents", "list", "--day", "11/03/2031"]);
    assert!(!o.status.success() && stderr(&o).contains("--day"), "{}", stderr(&o));
}

fn the_shipped_sample_clinic_imports_cleanly(backend: Backend) {
    let ledger = backend.ledger();
    let db = ledger.db.clone();
    let assets = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    // The samples are dated January 2027 so a newcomer's import plans
    // messages; after that they still import, as history.
    let upcoming = chrono::Utc::now() < "2027-01-10T00:00:00Z".parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    for (name, events) in [
        ("sample-clinic.jsonl", 67),
        ("sample-agenda.csv", 13),
        ("sample-agenda.ics", 7),
    ] {
        let f = assets.join(name);
        let o = run(&db, &["import", f.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{name}: {}{}", stdout(&o), stderr(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["events"], events, "{name}: {r}");
        assert_eq!(r["rejected"], serde_json::json!([]), "{name}");
        if upcoming {
            assert!(r["intentions_planned"].as_u64().unwrap() > 0, "{name}: {r}");
        }
    }
    let show = json(&db, &["commitments", "show", "cita-1100"]);
    let effects: Vec<&str> = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["effect"].as_str().unwrap())
        .collect();
    assert_eq!(effects, ["applied", "stale"]);
    let orders = json(&db, &["commitments", "show", "pedido-88"]);
    assert_eq!(
        orders["intentions"].as_array().unwrap().len(),
        4,
        "confirmed, paid, prepared, shipped; not updated"
    );
}

fn a_listing_piped_into_a_reader_that_stops_early_exits_quietly(backend: Backend) {
    use std::io::Read;
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let f = dir.path().join("many.jsonl");
    let text: String = (0..150)
        .map(|i| {
            format!(
                "{{\"event_id\":\"e{i}\",\"type\":\"appointment.scheduled\",\"ref\":\"cita-{i}\",\"starts_at\":\"2031-05-{:02}T10:00:00-05:00\",\"contact\":{{\"phone\":\"+5198800{i:04}\"}}}}\n",
                1 + i % 28
            )
        })
        .collect();
    std::fs::write(&f, text).unwrap();
    assert!(run(&db, &["import", f.to_str().unwrap()]).status.success());
    // Far more than a pipe buffer (64 KiB), so the writer must hit the
    // closed pipe, as with `unavez intents list --json | head`.
    let mut child = unavez(&db)
        .args(["intents", "list", "--json", "--limit", "100000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 100];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert!(o.status.success(), "{:?} {}", o.status, stderr(&o));
}

fn an_event_the_ledger_cannot_apply_refuses_the_file_with_its_line(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let file = dir.path().join("late.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"event_id":"e1","type":"appointment.scheduled","ref":"cita-1","starts_at":"2031-03-10T09:30:00-05:00","contact":{"phone":"+51987654321"}}"#,
            "\n",
            r#"{"event_id":"e2","type":"appointment.rescheduled","ref":"cita-404","starts_at":"2031-03-11T09:30:00-05:00"}"#,
            "\n"
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let o = run(&db, &["import", f]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains(&format!("{f}:2: ref: unknown ref cita-404")), "{err}");
    assert_eq!(
        json(&db, &["commitments", "list"]),
        serde_json::json!([]),
        "the whole file is refused"
    );
    let o = run(&db, &["import", f, "--skip-invalid"]);
    assert!(!o.status.success());
    assert_eq!(json(&db, &["commitments", "list"]).as_array().unwrap().len(), 1);
}

fn human_listings_work_and_mask_phones(backend: Backend) {
    let ledger = backend.ledger();
    let db = ledger.db.clone();
    let f = fixture("agenda.jsonl");
    assert!(run(&db, &["init"]).status.success());
    assert!(run(&db, &["import", f.to_str().unwrap()]).status.success());
    for args in [
        &["commitments", "list"][..],
        &["commitments", "show", "cita-2002"],
        &["intents", "list"],
        &[
            "intents",
            "list",
            "--state",
            "planned",
            "--state",
            "cancelled",
            "--day",
            "2031-03-11",
        ],
        &["intents", "show", "cita-2002:aviso-cambio:v2"],
    ] {
        let o = run(&db, args);
        let out = stdout(&o);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(!out.is_empty(), "{args:?}");
        assert!(!out.contains("+51987654322"), "{args:?} shows a full phone:\n{out}");
    }
    let show = stdout(&run(&db, &["intents", "show", "cita-2002:aviso-cambio:v2"]));
    assert!(show.contains("historia:") && show.contains("registrada"), "{show}");
}

on_both!(
    importing_the_same_file_twice_changes_nothing_and_reports_duplicates,
    bad_rows_are_named_by_file_line_and_field_and_nothing_is_stored,
    skip_invalid_stores_the_valid_rows_and_writes_the_rejected_ones_aside,
    csv_and_ics_agendas_import_and_reimport_as_no_ops,
    listings_and_show_have_the_documented_json_shapes,
    the_shipped_sample_clinic_imports_cleanly,
    a_listing_piped_into_a_reader_that_stops_early_exits_quietly,
    an_event_the_ledger_cannot_apply_refuses_the_file_with_its_line,
    human_listings_work_and_mask_phones,
);
