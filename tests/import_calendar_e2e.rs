//! "A clinic can take its Google Calendar export and get reminders planned
//! without editing the file": a realistic Google export (phones typed in
//! SUMMARY and DESCRIPTION, a weekly RRULE with an override and an EXDATE,
//! an all-day holiday, a VTIMEZONE, CRLF and folded lines) through the real
//! `unavez import` binary on a real ledger file, then the planned
//! intentions read back with `intents list`.

mod ledger_support;

use chrono::{Datelike, Duration, NaiveDate, Utc};
use ledger_support::*;
use unavez_testkit::{Backend, on_both};

/// Lima has no daylight saving: local = UTC − 5 h all year.
fn lima_today() -> NaiveDate {
    (Utc::now() - Duration::hours(5)).date_naive()
}

fn d(day: NaiveDate) -> String {
    day.format("%Y%m%d").to_string()
}

/// Folds a content line at 75 octets as RFC 5545 §3.1 (and Google) do.
fn fold(line: &str) -> String {
    let mut out = String::new();
    let mut n = 0;
    for ch in line.chars() {
        if n + ch.len_utf8() > 75 {
            out.push_str("\r\n ");
            n = 1;
        }
        out.push(ch);
        n += ch.len_utf8();
    }
    out
}

/// The export, built the way Google Calendar writes one.
fn google_export(first: NaiveDate) -> String {
    let series = first + Duration::days(1);
    let weekday = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"][series.weekday().num_days_from_monday() as usize];
    let excluded = series + Duration::days(7);
    let moved = series + Duration::days(14);
    let holiday = first + Duration::days(2);
    let lines = [
        "BEGIN:VCALENDAR".to_string(),
        "PRODID:-//Google Inc//Google Calendar 70.9054//EN".into(),
        "VERSION:2.0".into(),
        "CALSCALE:GREGORIAN".into(),
        "METHOD:PUBLISH".into(),
        "X-WR-CALNAME:Consultorio Dental Sonrisa".into(),
        "X-WR-TIMEZONE:America/Lima".into(),
        "BEGIN:VTIMEZONE".into(),
        "TZID:America/Lima".into(),
        "X-LIC-LOCATION:America/Lima".into(),
        "BEGIN:STANDARD".into(),
        "TZOFFSETFROM:-0500".into(),
        "TZOFFSETTO:-0500".into(),
        "TZNAME:-05".into(),
        "DTSTART:19700101T000000".into(),
        "END:STANDARD".into(),
        "END:VTIMEZONE".into(),
        // A one-off appointment, phone typed in the title.
        "BEGIN:VEVENT".into(),
        format!("DTSTART;TZID=America/Lima:{}T093000", d(first)),
        format!("DTEND;TZID=America/Lima:{}T100000", d(first)),
        "DTSTAMP:20261201T150000Z".into(),
        "UID:5p1b2n0q3k4r5s6t7u8v9w0x1y@google.com".into(),
        "CREATED:20261120T140000Z".into(),
        "LAST-MODIFIED:20261120T140000Z".into(),
        "SEQUENCE:0".into(),
        "STATUS:CONFIRMED".into(),
        "SUMMARY:Ana Quispe – 987 654 321 – limpieza".into(),
        "TRANSP:OPAQUE".into(),
        "END:VEVENT".into(),
        // Phone in the description, in a long folded line.
        "BEGIN:VEVENT".into(),
        format!("DTSTART:{}T200000Z", d(first)),
        format!("DTEND:{}T203000Z", d(first)),
        "DTSTAMP:20261201T150000Z".into(),
        "UID:0a9b8c7d6e5f4g3h2i1j@google.com".into(),
        "SEQUENCE:0".into(),
        "STATUS:CONFIRMED".into(),
        "SUMMARY:Luis Huamán - control de ortodoncia".into(),
        fold(
            "DESCRIPTION:Paciente derivado por la Dra. Salas. Cel: +51 911-222-333\\nTraer radiografías y el DNI; llegar 10 minutos antes.",
        ),
        "LOCATION:Av. Larco 345\\, Miraflores".into(),
        "END:VEVENT".into(),
        // A weekly series: one week excluded, one moved an hour later.
        "BEGIN:VEVENT".into(),
        format!("DTSTART;TZID=America/Lima:{}T100000", d(series)),
        format!("DTEND;TZID=America/Lima:{}T103000", d(series)),
        format!("RRULE:FREQ=WEEKLY;WKST=MO;COUNT=5;BYDAY={weekday}"),
        format!("EXDATE;TZID=America/Lima:{}T100000", d(excluded)),
        "DTSTAMP:20261201T150000Z".into(),
        "UID:serie7q8w9e0r1t2y3u@google.com".into(),
        "SEQUENCE:0".into(),
        "SUMMARY:Rosa Mamani 998877665 ortodoncia".into(),
        "END:VEVENT".into(),
        "BEGIN:VEVENT".into(),
        format!("DTSTART;TZID=America/Lima:{}T110000", d(moved)),
        format!("DTEND;TZID=America/Lima:{}T113000", d(moved)),
        format!("RECURRENCE-ID;TZID=America/Lima:{}T100000", d(moved)),
        "DTSTAMP:20261201T150000Z".into(),
        "UID:serie7q8w9e0r1t2y3u@google.com".into(),
        "SEQUENCE:1".into(),
        "SUMMARY:Rosa Mamani 998877665 ortodoncia".into(),
        "END:VEVENT".into(),
        // A holiday: all day, no phone.
        "BEGIN:VEVENT".into(),
        format!("DTSTART;VALUE=DATE:{}", d(holiday)),
        format!("DTEND;VALUE=DATE:{}", d(holiday + Duration::days(1))),
        "DTSTAMP:20261201T150000Z".into(),
        "UID:feriado-local@google.com".into(),
        "SUMMARY:Feriado – consultorio cerrado".into(),
        "TRANSP:TRANSPARENT".into(),
        "END:VEVENT".into(),
        "END:VCALENDAR".into(),
    ];
    let mut text = lines.join("\r\n");
    text.push_str("\r\n");
    text
}

fn a_google_calendar_export_plans_reminders_without_editing_the_file(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let first = lima_today() + Duration::days(7);
    let file = dir.path().join("basic.ics");
    std::fs::write(&file, google_export(first)).unwrap();
    let f = file.to_str().unwrap();

    let report = json(&db, &["import", f]);
    assert_eq!(report["rejected"], serde_json::json!([]), "{report}");
    let cal = &report["calendar"];
    assert_eq!(cal["vevents"], 5, "{report}");
    assert_eq!(cal["occurrences"], 4, "5 weekly, 1 excluded, 1 moved: {report}");
    assert_eq!(cal["skipped_all_day"], 1, "{report}");
    assert_eq!(cal["refused"], 0, "{report}");
    assert_eq!(report["stored"], 6, "{report}");

    // Every appointment has its booking notice and its reminders planned.
    let commitments = json(&db, &["commitments", "list"]);
    let refs: Vec<String> = commitments
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["reference"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(refs.len(), 6, "{refs:?}");
    let intents = json(&db, &["intents", "list", "--limit", "1000"]);
    for r in &refs {
        let planned: Vec<&str> = intents
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["key"].as_str().unwrap().starts_with(&format!("{r}:")))
            .map(|i| i["key"].as_str().unwrap())
            .collect();
        assert!(
            planned.iter().any(|k| k.contains(":aviso-reserva:"))
                && planned.iter().any(|k| k.contains(":recordatorio")),
            "{r}: {planned:?}"
        );
    }

    // The phones typed as text became E.164; the name is what remains.
    let people: std::collections::BTreeSet<(String, String, String)> = commitments
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (s("phone"), s("name"), s("service"))
        })
        .collect();
    let expected: std::collections::BTreeSet<(String, String, String)> = [
        ("+51911222333", "Luis Huamán", "control de ortodoncia"),
        ("+51987654321", "Ana Quispe", "limpieza"),
        ("+51998877665", "Rosa Mamani", "ortodoncia"),
    ]
    .into_iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(people, expected);
    let series_base = refs
        .iter()
        .filter(|r| r.contains('/'))
        .map(|r| r.split('/').next().unwrap())
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(series_base.len(), 1, "one series: {refs:?}");
    // The excluded week has no commitment; the moved one is at 11:00 Lima.
    let series = first + Duration::days(1);
    let at = |day: NaiveDate, hour_utc: u32| format!("{}T{hour_utc:02}00Z", day.format("%Y-%m-%d"));
    let excluded = at(series + Duration::days(7), 15);
    assert!(!refs.iter().any(|r| r.ends_with(&excluded)), "{refs:?}");
    let moved_ref = refs
        .iter()
        .find(|r| r.ends_with(&at(series + Duration::days(14), 15)))
        .expect("the moved occurrence keeps its original reference");
    let moved = json(&db, &["commitments", "show", moved_ref]);
    let starts = moved["commitment"]["starts_at"].as_str().unwrap();
    assert_eq!(
        starts,
        format!("{}T16:00:00Z", (series + Duration::days(14)).format("%Y-%m-%d")),
        "{moved}"
    );

    // Re-importing the same export changes nothing.
    let before = intention_summary(&db);
    let again = json(&db, &["import", f]);
    assert_eq!(again["duplicates"], 6, "{again}");
    assert_eq!(intention_summary(&db), before);
}

fn the_horizon_is_configurable_and_the_text_report_names_what_was_skipped(backend: Backend) {
    let ledger = backend.ledger();
    let (dir, db) = (&ledger.dir, ledger.db.clone());
    let cfg = dir.path().join("unavez.toml");
    std::fs::write(&cfg, "[import]\nrecurrence_days = 9\n").unwrap();
    let file = dir.path().join("basic.ics");
    std::fs::write(&file, google_export(lima_today() + Duration::days(7))).unwrap();
    let o = unavez(&db)
        .arg("--config")
        .arg(&cfg)
        .args(["import", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // Only the series' first occurrence (day 8) is within 9 days.
    assert!(out.contains("1 occurrence(s)"), "{out}");
    assert!(out.contains("1 all-day"), "{out}");
    assert!(out.contains("all-day event skipped"), "{out}");
}

on_both!(
    a_google_calendar_export_plans_reminders_without_editing_the_file,
    the_horizon_is_configurable_and_the_text_report_names_what_was_skipped,
);
