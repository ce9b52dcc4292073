use chrono::TimeZone;

use super::*;
use crate::domain::event::EventType;
use crate::domain::key::check_ref;

const LIMA: Tz = chrono_tz::America::Lima;

fn cal(events: &str) -> String {
    format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Clinica//Agenda//ES\r\n{events}END:VCALENDAR\r\n")
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 1, 1, 12, 0, 0).unwrap()
}

fn run(text: &str) -> Parsed {
    let config = ImportConfig::default();
    parse(
        text,
        "a.ics",
        &Options {
            tz: LIMA,
            now: now(),
            config: &config,
        },
    )
}

fn rows_errors(text: &str) -> (Vec<Row>, Vec<RowError>) {
    let p = run(text);
    (p.rows, p.errors)
}

const ANA: &str = "BEGIN:VEVENT\r\nUID:cita-1042\r\nDTSTAMP:20261129T150000Z\r\nSEQUENCE:2\r\n\
    DTSTART;TZID=America/Lima:20270112T093000\r\nSUMMARY:Odontología\r\nLOCATION:Sede Miraflores\\, piso 2\r\n\
    ATTENDEE;CN=Ana Quispe;ROLE=REQ-PARTICIPANT:tel:+51987654321\r\nEND:VEVENT\r\n";

#[test]
fn a_vevent_becomes_a_scheduled_event() {
    let (rows, errors) = rows_errors(&cal(ANA));
    assert!(errors.is_empty(), "{errors:?}");
    let e = &rows[0].event;
    assert_eq!(rows[0].line, 4);
    assert_eq!(e.kind, EventType::AppointmentScheduled);
    assert_eq!(e.reference, "cita-1042");
    assert_eq!(e.version, Some(3));
    assert_eq!(e.starts_at.unwrap().to_rfc3339(), "2027-01-12T09:30:00-05:00");
    let c = e.contact.as_ref().unwrap();
    assert_eq!(
        (c.phone.as_str(), c.name.as_deref()),
        ("+51987654321", Some("Ana Quispe"))
    );
    assert_eq!(e.service.as_deref(), Some("Odontología"));
    assert_eq!(e.location.as_deref(), Some("Sede Miraflores, piso 2"));
    assert_eq!(e.note.as_deref(), Some("phone from ATTENDEE"));
    assert!(rows[0].raw.starts_with("BEGIN:VEVENT") && rows[0].raw.ends_with("END:VEVENT"));
}

#[test]
fn event_ids_are_stable_and_follow_uid_sequence_status() {
    let (a, _) = rows_errors(&cal(ANA));
    let (b, _) = rows_errors(&cal(ANA));
    assert_eq!(a[0].event.event_id, b[0].event.event_id);
    let (c, _) = rows_errors(&cal(&ANA.replace("SEQUENCE:2", "SEQUENCE:3")));
    assert_ne!(a[0].event.event_id, c[0].event.event_id);
    let (d, _) = rows_errors(&cal(
        &ANA.replace("SEQUENCE:2\r\n", "SEQUENCE:2\r\nSTATUS:CANCELLED\r\n")
    ));
    assert_ne!(a[0].event.event_id, d[0].event.event_id);
    assert_eq!(d[0].event.kind, EventType::AppointmentCancelled);
}

#[test]
fn utc_floating_and_x_phone_forms() {
    let utc = ANA.replace("DTSTART;TZID=America/Lima:20270112T093000", "DTSTART:20270112T143000Z");
    let (rows, _) = rows_errors(&cal(&utc));
    assert_eq!(
        rows[0].event.starts_at_utc().unwrap().to_rfc3339(),
        "2027-01-12T14:30:00+00:00"
    );
    let floating = ANA.replace("DTSTART;TZID=America/Lima:20270112T093000", "DTSTART:20270112T093000");
    let (rows, _) = rows_errors(&cal(&floating));
    assert_eq!(
        rows[0].event.starts_at.unwrap().to_rfc3339(),
        "2027-01-12T09:30:00-05:00"
    );
    // X-WR-TIMEZONE wins over the configured zone for floating times.
    let (rows, _) =
        rows_errors(&cal(&floating).replace("VERSION:2.0\r\n", "VERSION:2.0\r\nX-WR-TIMEZONE:America/Bogota\r\n"));
    assert_eq!(
        rows[0].event.starts_at.unwrap().to_rfc3339(),
        "2027-01-12T09:30:00-05:00"
    );
    let (rows, _) =
        rows_errors(&cal(&floating).replace("VERSION:2.0\r\n", "VERSION:2.0\r\nX-WR-TIMEZONE:Europe/Madrid\r\n"));
    assert_eq!(
        rows[0].event.starts_at.unwrap().to_rfc3339(),
        "2027-01-12T09:30:00+01:00"
    );
    let x = ANA
        .replace(
            "ATTENDEE;CN=Ana Quispe;ROLE=REQ-PARTICIPANT:tel:+51987654321\r\n",
            "X-UNAVEZ-PHONE:+51911222333\r\nX-UNAVEZ-NAME:Rosa\r\n",
        )
        .replace("SEQUENCE:2\r\n", "");
    let (rows, errors) = rows_errors(&cal(&x));
    assert!(errors.is_empty(), "{errors:?}");
    let c = rows[0].event.contact.as_ref().unwrap();
    assert_eq!((c.phone.as_str(), c.name.as_deref()), ("+51911222333", Some("Rosa")));
    assert_eq!(rows[0].event.version, None, "no SEQUENCE: the ledger versions it");
    for written in ["tel:+51-987-654-321", "tel:987654321", "tel:987 654 321"] {
        let (rows, _) = rows_errors(&cal(&ANA.replace("tel:+51987654321", written)));
        assert_eq!(
            rows[0].event.contact.as_ref().unwrap().phone,
            "+51987654321",
            "{written}"
        );
    }
}

#[test]
fn bad_vevents_are_reported_at_their_own_lines() {
    let bad_phone = ANA
        .replace("tel:+51987654321", "tel:12345")
        .replace("cita-1042", "cita-1");
    let bad_time = ANA.replace("20270112T093000", "mañana").replace("cita-1042", "cita-2");
    let no_uid = ANA.replace("UID:cita-1042\r\n", "");
    let bad_zone = ANA
        .replace("America/Lima", "Mars/Olympus")
        .replace("cita-1042", "cita-3");
    let p = run(&cal(&format!("{ANA}{bad_phone}{bad_time}{no_uid}{bad_zone}")));
    assert_eq!(p.rows.len(), 1);
    let shown: Vec<String> = p
        .errors
        .iter()
        .map(|e| format!("{}:{}: {}", e.file, e.line, e.field))
        .collect();
    assert_eq!(
        shown,
        [
            "a.ics:20: phone",
            "a.ics:26: starts_at",
            "a.ics:31: ref",
            "a.ics:43: starts_at"
        ]
    );
    assert!(p.errors[0].reason.contains("E.164"), "{}", p.errors[0].reason);
    assert!(p.errors[3].reason.contains("Mars/Olympus"));
    assert_eq!(p.counts.refused, 4);
}

#[test]
fn all_day_events_are_skipped_with_a_note_not_refused() {
    let holiday = "BEGIN:VEVENT\r\nUID:feriado-1\r\nDTSTART;VALUE=DATE:20270101\r\nDTEND;VALUE=DATE:20270102\r\n\
        SUMMARY:Año Nuevo\r\nEND:VEVENT\r\n";
    let p = run(&cal(&format!("{holiday}{ANA}")));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!((p.rows.len(), p.counts.skipped_all_day), (1, 1));
    assert_eq!(
        p.notes,
        ["a.ics:4: all-day event skipped (a holiday or blocked day is not an appointment)"]
    );
}

#[test]
fn unknown_status_is_refused_and_garbage_is_named() {
    let (_, errors) = rows_errors(&cal(&ANA.replace("SEQUENCE:2\r\n", "STATUS:MAYBE\r\n")));
    assert_eq!(errors[0].field, "status");
    assert_eq!(errors[0].line, 7);
    let (_, errors) = rows_errors("hola");
    assert_eq!(errors[0].field, "file");
}

#[test]
fn bare_newlines_and_folded_lines_are_read() {
    let folded = ANA.replace(
        "LOCATION:Sede Miraflores\\, piso 2\r\n",
        "LOCATION:Sede Mira\r\n flores\\, piso 2\r\n",
    );
    assert_ne!(folded, ANA);
    for text in [cal(&folded), cal(&folded).replace("\r\n", "\n")] {
        let (rows, errors) = rows_errors(&text);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(rows[0].line, 4);
        assert_eq!(rows[0].event.location.as_deref(), Some("Sede Miraflores, piso 2"));
        assert_eq!(rows[0].event.contact.as_ref().unwrap().phone, "+51987654321");
    }
}

#[test]
fn uids_are_sanitized_deterministically() {
    assert_eq!(uid_to_ref("cita-1042"), "cita-1042");
    let r = uid_to_ref("cita 1042@clinica.pe");
    assert!(r.starts_with("cita-1042-") && check_ref(&r).is_ok(), "{r}");
    assert_eq!(r, uid_to_ref("cita 1042@clinica.pe"));
    assert_ne!(r, uid_to_ref("cita 1042@otra.pe"));
    let g = uid_to_ref("1734567890123-abc@google.com");
    assert!(g.starts_with("ics-") && check_ref(&g).is_ok(), "{g}");
    assert!(check_ref(&uid_to_ref("@@@")).is_ok());
}

#[test]
fn without_sequence_the_id_follows_the_content_and_the_ledger_versions_it() {
    let bare = ANA.replace("SEQUENCE:2\r\n", "");
    let (a, _) = rows_errors(&cal(&bare));
    let (same, _) = rows_errors(&cal(&bare));
    let (moved, _) = rows_errors(&cal(&bare.replace("20270112T093000", "20270113T093000")));
    assert_eq!(a[0].event.version, None);
    assert_eq!(
        a[0].event.event_id, same[0].event.event_id,
        "a re-export is a duplicate"
    );
    assert_ne!(
        a[0].event.event_id, moved[0].event.event_id,
        "an edited VEVENT is a new event"
    );
    let (s1, _) = rows_errors(&cal(ANA));
    let (s2, _) = rows_errors(&cal(&ANA.replace("20270112T093000", "20270113T093000")));
    assert_eq!(s1[0].event.event_id, s2[0].event.event_id);
}

#[test]
fn an_oversize_name_is_named_as_the_name() {
    let long = ANA.replace("CN=Ana Quispe", &format!("CN={}", "A".repeat(121)));
    let (_, errors) = rows_errors(&cal(&long));
    assert_eq!(errors[0].field, "name", "{errors:?}");
    assert!(errors[0].reason.contains("too long"));
}

/// Google Calendar writes no attendee phone: the receptionist typed it.
const TYPED: &str = "BEGIN:VEVENT\r\nDTSTART;TZID=America/Lima:20270112T093000\r\nDTEND;TZID=America/Lima:20270112T100000\r\n\
    DTSTAMP:20261201T120000Z\r\nUID:7kq3l1o0d9v2@google.com\r\nSUMMARY:Ana Quispe – 987 654 321 – limpieza\r\n\
    DESCRIPTION:Primera visita\\nTraer DNI\r\nLOCATION:Consultorio 2\r\nSTATUS:CONFIRMED\r\nEND:VEVENT\r\n";

#[test]
fn a_phone_typed_in_the_summary_is_found_and_the_name_is_what_remains() {
    let (rows, errors) = rows_errors(&cal(TYPED));
    assert!(errors.is_empty(), "{errors:?}");
    let e = &rows[0].event;
    let c = e.contact.as_ref().unwrap();
    assert_eq!(
        (c.phone.as_str(), c.name.as_deref()),
        ("+51987654321", Some("Ana Quispe"))
    );
    assert_eq!(e.service.as_deref(), Some("limpieza"));
    assert_eq!(e.location.as_deref(), Some("Consultorio 2"));
    assert_eq!(e.note.as_deref(), Some("phone from SUMMARY"));
    // In DESCRIPTION: SUMMARY's first piece is the name, the rest the service.
    let desc = TYPED
        .replace(
            "SUMMARY:Ana Quispe – 987 654 321 – limpieza",
            "SUMMARY:Ana Quispe - limpieza",
        )
        .replace(
            "DESCRIPTION:Primera visita",
            "DESCRIPTION:Cel: +51 987-654-321\\nPrimera visita",
        );
    let (rows, errors) = rows_errors(&cal(&desc));
    assert!(errors.is_empty(), "{errors:?}");
    let e = &rows[0].event;
    assert_eq!(e.contact.as_ref().unwrap().name.as_deref(), Some("Ana Quispe"));
    assert_eq!(e.service.as_deref(), Some("limpieza"));
    assert_eq!(e.note.as_deref(), Some("phone from DESCRIPTION"));
}

#[test]
fn two_different_phones_refuse_the_event_naming_both_properties() {
    let two = TYPED.replace("DESCRIPTION:Primera visita", "DESCRIPTION:Llamar al 911 222 333");
    let (rows, errors) = rows_errors(&cal(&two));
    assert!(rows.is_empty());
    assert_eq!(errors[0].field, "phone");
    assert!(
        errors[0].reason.contains("SUMMARY") && errors[0].reason.contains("DESCRIPTION"),
        "{}",
        errors[0].reason
    );
    assert!(!errors[0].reason.contains("987654321"), "masked: {}", errors[0].reason);
    // The same phone written twice is one phone.
    let same = TYPED.replace("DESCRIPTION:Primera visita", "DESCRIPTION:Tel 987654321");
    let (rows, errors) = rows_errors(&cal(&same));
    assert!(errors.is_empty() && rows.len() == 1, "{errors:?}");
}

fn weekly() -> String {
    // Every Tuesday 09:30 Lima from 5 Jan 2027; 19 Jan excluded; 26 Jan moved to 10:00.
    let master = "BEGIN:VEVENT\r\nUID:serie-ana@google.com\r\nDTSTART;TZID=America/Lima:20270105T093000\r\n\
        RRULE:FREQ=WEEKLY;BYDAY=TU\r\nEXDATE;TZID=America/Lima:20270119T093000\r\n\
        SUMMARY:Ana Quispe 987654321 ortodoncia\r\nEND:VEVENT\r\n";
    let moved = "BEGIN:VEVENT\r\nUID:serie-ana@google.com\r\nRECURRENCE-ID;TZID=America/Lima:20270126T093000\r\n\
        DTSTART;TZID=America/Lima:20270126T100000\r\nSUMMARY:Ana Quispe 987654321 ortodoncia\r\nEND:VEVENT\r\n";
    cal(&format!("{master}{moved}"))
}

#[test]
fn a_weekly_series_becomes_one_event_per_occurrence_within_the_horizon() {
    let config = ImportConfig {
        recurrence_days: 31,
        ..ImportConfig::default()
    };
    let p = parse(
        &weekly(),
        "a.ics",
        &Options {
            tz: LIMA,
            now: now(),
            config: &config,
        },
    );
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let mut got: Vec<(String, String)> = p
        .rows
        .iter()
        .map(|r| (r.event.reference.clone(), r.event.starts_at.unwrap().to_rfc3339()))
        .collect();
    got.sort();
    let base = uid_to_ref("serie-ana@google.com");
    assert_eq!(
        got,
        [
            (
                format!("{base}/2027-01-05T1430Z"),
                "2027-01-05T09:30:00-05:00".to_string()
            ),
            (
                format!("{base}/2027-01-12T1430Z"),
                "2027-01-12T09:30:00-05:00".to_string()
            ),
            (
                format!("{base}/2027-01-26T1430Z"),
                "2027-01-26T10:00:00-05:00".to_string()
            ),
        ]
    );
    assert_eq!(p.counts.occurrences, 3);
    for r in &p.rows {
        assert!(check_ref(&r.event.reference).is_ok());
        assert_eq!(r.event.version, None);
        assert_eq!(r.event.contact.as_ref().unwrap().phone, "+51987654321");
    }
    // Re-reading gives the same ids.
    let again = parse(
        &weekly(),
        "b.ics",
        &Options {
            tz: LIMA,
            now: now(),
            config: &config,
        },
    );
    let ids = |p: &Parsed| {
        let mut v: Vec<String> = p.rows.iter().map(|r| r.event.event_id.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&p), ids(&again));
}

#[test]
fn a_past_series_and_one_beyond_the_horizon_are_skipped_and_counted() {
    let past = "BEGIN:VEVENT\r\nUID:old\r\nDTSTART:20250105T093000\r\nRRULE:FREQ=WEEKLY;COUNT=3\r\n\
        SUMMARY:Ana 987654321\r\nEND:VEVENT\r\n";
    let later = "BEGIN:VEVENT\r\nUID:later\r\nDTSTART:20280105T093000\r\nRRULE:FREQ=WEEKLY\r\n\
        SUMMARY:Ana 987654321\r\nEND:VEVENT\r\n";
    let p = run(&cal(&format!("{past}{later}")));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!((p.counts.skipped_past, p.counts.skipped_beyond_horizon), (1, 1));
    assert!(p.rows.is_empty());
    assert_eq!(p.notes.len(), 2);
}

#[test]
fn file_quirks_do_not_lose_the_events() {
    // A BOM, two calendars, text after END:VCALENDAR.
    let text = format!(
        "\u{feff}{}{}garbage after the end\r\n",
        cal(ANA),
        cal(&ANA.replace("cita-1042", "cita-2"))
    );
    let p = run(&text);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.rows.len(), 2);
    assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
    // Bare VEVENTs, no wrapper.
    let p = run(ANA);
    assert_eq!((p.rows.len(), p.errors.len()), (1, 0));
    // A malformed line names its own line; the other events import.
    let broken = ANA
        .replace("cita-1042", "cita-3")
        .replace("SUMMARY:Odontología\r\n", "SUMMARY Odontología\r\n");
    let p = run(&cal(&format!("{ANA}{broken}")));
    assert_eq!(p.rows.len(), 1);
    assert_eq!((p.errors[0].line, p.errors[0].field.as_str()), (18, "line"));
    assert!(p.errors[0].reason.contains("no ':'"), "{}", p.errors[0].reason);
    // An RFC 7986 multi-valued parameter is valid.
    let multi = ANA.replace("ATTENDEE;CN", "ATTENDEE;MEMBER=\"mailto:a@x.pe\",\"mailto:b@x.pe\";CN");
    let p = run(&cal(&multi));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
}

#[test]
fn windows_zone_names_and_vendor_prefixes() {
    for tzid in [
        "SA Pacific Standard Time",
        "\"(UTC-05:00) Bogota, Lima, Quito\"",
        "/freeassociation.sourceforge.net/Tzfile/America/Lima",
        "/mozilla.org/20070129_1/America/Lima",
    ] {
        let (rows, errors) = rows_errors(&cal(&ANA.replace("TZID=America/Lima", &format!("TZID={tzid}"))));
        assert!(errors.is_empty(), "{tzid}: {errors:?}");
        assert_eq!(
            rows[0].event.starts_at.unwrap().to_rfc3339(),
            "2027-01-12T09:30:00-05:00",
            "{tzid}"
        );
    }
}

/// `uid_to_ref` before references refused `.`/`..` segments, empty
/// segments and a leading `/` or `-` (issue 24): a copy, kept only to
/// prove that every UID whose old reference is still valid keeps it.
mod before_issue_24 {
    use super::super::event::letters_for_test as letters;

    fn check_ref(r: &str) -> bool {
        !r.is_empty()
            && r.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
            && !r.contains('@')
            && !r.split(|c: char| !c.is_ascii_digit()).any(|run| run.len() >= 7)
    }

    pub fn uid_to_ref(uid: &str) -> String {
        if check_ref(uid) {
            return uid.to_string();
        }
        let local = uid.split('@').next().unwrap_or(uid);
        let cleaned: String = local
            .chars()
            .map(|ch| {
                if ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.' | '/') {
                    ch
                } else {
                    '-'
                }
            })
            .collect();
        let candidate = format!("{}-{}", cleaned.trim_matches('-'), &letters(uid)[..8]);
        if cleaned.trim_matches('-').is_empty() || cleaned.len() > 48 || !check_ref(&candidate) {
            return format!("ics-{}", &letters(uid)[..16]);
        }
        candidate
    }
}

/// Every UID the repository's calendars and tests write (`UID:…` in the
/// fixtures, the sample agenda, the fuzz seeds and the test sources).
fn uids_in_the_repository() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in [
        "tests",
        "tests/fixtures/ledger",
        "assets",
        "fuzz/seeds/import_ics",
        "crates/app/src/import/ics",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let p = entry.path();
            if matches!(p.extension().and_then(|e| e.to_str()), Some("rs" | "ics")) {
                files.push(p);
            }
        }
    }
    let mut uids = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for (i, _) in text.match_indices("UID:") {
            let uid: String = text[i + 4..]
                .chars()
                .take_while(|c| !matches!(c, '\\' | '"' | '\'' | '\r' | '\n' | '{'))
                .collect();
            if !uid.is_empty() && !uids.contains(&uid) {
                uids.push(uid);
            }
        }
    }
    uids
}

#[test]
fn every_uid_whose_reference_is_still_valid_keeps_it() {
    let mut uids = uids_in_the_repository();
    assert!(uids.len() >= 20, "found only {uids:?}");
    // And the shapes the new rule refuses, so the test sees both sides.
    for hostile in [
        "../../etc/passwd",
        "..",
        "/",
        "-rf",
        "/cita-1@x",
        "a//b@c.pe",
        "-x@y",
        "serie/./1",
    ] {
        uids.push(hostile.to_string());
    }
    let mut kept = 0;
    for uid in &uids {
        let old = before_issue_24::uid_to_ref(uid);
        let new = uid_to_ref(uid);
        assert!(check_ref(&new).is_ok(), "{uid:?} → {new:?} is not a valid reference");
        if check_ref(&old).is_ok() {
            assert_eq!(new, old, "UID {uid:?} must keep its reference");
            kept += 1;
        } else {
            assert_ne!(new, old, "{uid:?}");
        }
    }
    assert!(kept >= 20, "{kept} of {}", uids.len());
    assert!(kept < uids.len(), "the refused shapes map to new references");
}
