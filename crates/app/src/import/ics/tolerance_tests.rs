//! What real exports get wrong, read as python `icalendar` and `ical.js`
//! read it (issue 27 §3): each pattern found in public calendars, written
//! here by hand.

use chrono::TimeZone;

use super::*;

const LIMA: Tz = chrono_tz::America::Lima;

fn cal(body: &str) -> String {
    format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Clinica//Agenda//ES\r\n{body}END:VCALENDAR\r\n")
}

fn run(text: &str) -> Parsed {
    let config = ImportConfig::default();
    parse(
        text,
        "a.ics",
        &Options {
            tz: LIMA,
            now: Utc.with_ymd_and_hms(2027, 1, 1, 12, 0, 0).unwrap(),
            config: &config,
        },
    )
}

/// A timed appointment with a phone in DESCRIPTION; `extra` goes after DTSTART.
fn event(uid: &str, dtstart: &str, extra: &str) -> String {
    format!(
        "BEGIN:VEVENT\r\nUID:{uid}\r\n{dtstart}\r\n{extra}SUMMARY:Ana Quispe\r\n\
         DESCRIPTION:Control. Tel: 987 654 321\r\nEND:VEVENT\r\n"
    )
}

fn starts(p: &Parsed) -> Vec<String> {
    p.rows.iter().map(|r| r.event.starts_at.unwrap().to_rfc3339()).collect()
}

#[test]
fn an_empty_or_doubled_parameter_separator_is_no_parameter() {
    for dtstart in [
        "DTSTART;;TZID=America/Lima:20270112T093000",
        "DTSTART;TZID=America/Lima;;:20270112T093000",
        "DTSTART;:20270112T093000",
    ] {
        let p = run(&cal(&event("cita-1", dtstart, "")));
        assert!(p.errors.is_empty(), "{dtstart}: {:?}", p.errors);
        assert_eq!(starts(&p), ["2027-01-12T09:30:00-05:00"], "{dtstart}");
    }
    // The all-day form of the same mistake stays all-day.
    let p = run(&cal(&event("feriado", "DTSTART;;VALUE=DATE:20270112", "")));
    assert_eq!((p.rows.len(), p.counts.skipped_all_day), (0, 1));
}

#[test]
fn a_broken_fold_of_a_property_unavez_does_not_read_is_skipped_with_a_note() {
    // An Apple location whose fold lost its leading space: the second
    // piece reads as a line of its own, with no ':'.
    let apple = "X-APPLE-STRUCTURED-LOCATION;VALUE=URI;X-ADDRESS=Av. Larco 123;\r\n\
                 X-APPLE-RADIUS=70.5;X-TITLE=Sede Miraflores:geo:-12.12,-77.03\r\n\
                 X-APPLE-RADIUS=49.91\r\nDTEND;;;:20270112T100000\r\nX-VENDOR junk without colon\r\n";
    let p = run(&cal(&event(
        "cita-2",
        "DTSTART;TZID=America/Lima:20270112T093000",
        apple,
    )));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(starts(&p), ["2027-01-12T09:30:00-05:00"]);
    assert_eq!(p.rows[0].event.contact.as_ref().unwrap().phone, "+51987654321");
    let skipped: Vec<&String> = p.notes.iter().filter(|n| n.contains("line skipped")).collect();
    let lines: Vec<&str> = skipped.iter().map(|n| n.split(' ').next().unwrap()).collect();
    assert_eq!(
        lines,
        ["a.ics:7:", "a.ics:8:", "a.ics:9:", "a.ics:11:"],
        "{:?}",
        p.notes
    );
    // The same break in a property unavez reads still refuses the event,
    // at its line, and the next event imports.
    let bad_summary = event("cita-3", "DTSTART;TZID=America/Lima:20270112T093000", "")
        .replace("SUMMARY:Ana Quispe", "SUMMARY=Ana Quispe");
    let good = event("cita-4", "DTSTART;TZID=America/Lima:20270113T093000", "");
    let p = run(&cal(&format!("{bad_summary}{good}")));
    assert_eq!(p.rows.len(), 1);
    assert_eq!((p.errors[0].line, p.errors[0].field.as_str()), (7, "line"));
    // Unreadable lines in an alarm or a time zone refuse nothing either.
    let alarm = "BEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER junk\r\nEND:VALARM\r\n";
    let p = run(&cal(&event(
        "cita-5",
        "DTSTART;TZID=America/Lima:20270112T093000",
        alarm,
    )));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert!(
        p.notes.iter().any(|n| n.starts_with("a.ics:9: line skipped in VALARM")),
        "{:?}",
        p.notes
    );
}

#[test]
fn common_tzid_aliases_resolve() {
    for (tzid, at) in [
        ("US-Eastern", "2027-01-12T09:30:00-05:00"),
        ("America-Chicago", "2027-01-12T09:30:00-06:00"),
        ("America-Argentina-Buenos_Aires", "2027-01-12T09:30:00-03:00"),
        ("\"Western/Central Europe\"", "2027-01-12T09:30:00+01:00"),
        ("Central Europe", "2027-01-12T09:30:00+01:00"),
        ("Eastern Time (US & Canada)", "2027-01-12T09:30:00-05:00"),
        ("Pacific Time (US & Canada)", "2027-01-12T09:30:00-08:00"),
        ("posix/Europe/Vaduz", "2027-01-12T09:30:00+01:00"),
        ("Peru", "2027-01-12T09:30:00-05:00"),
    ] {
        let p = run(&cal(&event(
            "cita-1",
            &format!("DTSTART;TZID={tzid}:20270112T093000"),
            "",
        )));
        assert!(p.errors.is_empty(), "{tzid}: {:?}", p.errors);
        assert_eq!(starts(&p), [at], "{tzid}");
    }
}

#[test]
fn the_files_own_vtimezone_wins_over_an_alias_and_an_unknown_tzid_refuses_only_its_event() {
    // A file that defines "US-Eastern" as UTC+3 all year means UTC+3.
    let vtz = "BEGIN:VTIMEZONE\r\nTZID:US-Eastern\r\nBEGIN:STANDARD\r\nDTSTART;VALUE=DATE:19700101\r\n\
               TZOFFSETFROM:+0300\r\nTZOFFSETTO:+0300\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\n";
    let p = run(&cal(&format!(
        "{vtz}{}",
        event("cita-1", "DTSTART;TZID=US-Eastern:20270112T093000", "")
    )));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(starts(&p), ["2027-01-12T09:30:00+03:00"]);
    // Unknown: refused with the name, and the next event imports.
    let p = run(&cal(&format!(
        "{}{}",
        event("cita-2", "DTSTART;TZID=America-Atlantis:20270112T093000", ""),
        event("cita-3", "DTSTART;TZID=US-Eastern:20270112T093000", "")
    )));
    assert_eq!(starts(&p), ["2027-01-12T09:30:00-05:00"]);
    assert_eq!(
        (p.errors.len(), p.errors[0].line, p.errors[0].field.as_str()),
        (1, 6, "starts_at")
    );
    assert!(
        p.errors[0].reason.contains("unknown TZID \"America-Atlantis\""),
        "{}",
        p.errors[0].reason
    );
}

#[test]
fn an_occurrence_whose_series_is_not_in_the_file_imports_under_its_occurrence_ref() {
    // An invitation to one occurrence: RECURRENCE-ID, no recurring VEVENT
    // (and an RDATE given as a PERIOD, as Lotus Notes writes it).
    let one = event(
        "serie-9",
        "DTSTART;TZID=America/Lima:20270112T100000",
        "RECURRENCE-ID:20270112T140000Z\r\n",
    );
    let p = run(&cal(&one));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(p.rows[0].event.reference, "serie-9/2027-01-12T1400Z");
    assert_eq!(p.rows[0].event.version, None);
    assert_eq!(starts(&p), ["2027-01-12T10:00:00-05:00"]);
    let period = event(
        "serie-10",
        "DTSTART;TZID=America/Lima:20270112T100000",
        "RECURRENCE-ID;RANGE=THISANDFUTURE:20270112T150000Z\r\n\
         RDATE;TZID=America/Lima;VALUE=PERIOD:20270112T100000/20270112T103000,20270119T100000/PT30M\r\n",
    );
    let p = run(&cal(&period));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(starts(&p), ["2027-01-12T10:00:00-05:00", "2027-01-19T10:00:00-05:00"]);
}

#[test]
fn an_unreadable_rdate_loses_its_occurrence_but_an_unreadable_exdate_refuses() {
    let rdate = event(
        "serie-11",
        "DTSTART;TZID=America/Lima:20270112T100000",
        "RDATE;VALUE=TIME:083000\r\n",
    );
    let p = run(&cal(&rdate));
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    assert_eq!(starts(&p), ["2027-01-12T10:00:00-05:00"]);
    assert!(
        p.notes.iter().any(|n| n.starts_with("a.ics:7: RDATE value skipped")),
        "{:?}",
        p.notes
    );
    let exdate = event(
        "serie-12",
        "DTSTART;TZID=America/Lima:20270112T100000",
        "RRULE:FREQ=WEEKLY;COUNT=3\r\nEXDATE:mañana\r\n",
    );
    let p = run(&cal(&exdate));
    assert!(p.rows.is_empty());
    assert_eq!((p.errors[0].line, p.errors[0].field.as_str()), (8, "rrule"));
}
