//! Unit tests of `csv_agenda.rs`: rows, errors by line and field, delimiters.

use super::*;

#[test]
fn rows_become_events_with_stable_ids() {
    let text = "ref,starts_at,phone,name,service,location,status\n\
                cita-1,2026-12-01T09:30:00-05:00,+51987654321,Ana,Odontología,Sede A,scheduled\n\
                cita-2,2026-12-01T10:30:00-05:00,+51987654322,Luis,Pediatría,Sede A,cancelled\n";
    let (rows, errors) = parse(text, "a.csv");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].line, 2);
    let (again, _) = parse(text, "a.csv");
    assert_eq!(rows[0].event.event_id, again[0].event.event_id);
}

#[test]
fn bad_rows_are_reported_by_line_and_field() {
    let text = "ref,starts_at,phone,name,service,location,status\n\
                cita-1,ayer,+51987654321,Ana,X,Y,scheduled\n\
                cita-2,2026-12-01T10:30:00-05:00,987,Luis,X,Y,scheduled\n\
                cita-3,2026-12-01T10:30:00-05:00,+51987654322,Luis,X,Y,perdida\n";
    let (_, errors) = parse(text, "a.csv");
    let shown: Vec<String> = errors
        .iter()
        .map(|e| format!("{}:{}:{}", e.file, e.line, e.field))
        .collect();
    assert_eq!(shown, ["a.csv:2:starts_at", "a.csv:3:phone", "a.csv:4:status"]);
}

#[test]
fn a_confirmed_row_also_schedules_the_appointment() {
    let text = "ref,starts_at,phone,name,service,location,status\n\
                cita-1,2026-12-01T09:30:00-05:00,+51987654321,Ana,Odontología,Sede A,scheduled\n\
                cita-1,2026-12-01T09:30:00-05:00,+51987654321,Ana,Odontología,Sede A,confirmed\n";
    let (rows, errors) = parse(text, "a.csv");
    assert!(errors.is_empty(), "{errors:?}");
    let kinds: Vec<(usize, &str)> = rows.iter().map(|r| (r.line, r.event.kind.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (2, "appointment.scheduled"),
            (3, "appointment.scheduled"),
            (3, "appointment.confirmed")
        ]
    );
    assert_eq!(
        rows[0].event.event_id, rows[1].event.event_id,
        "the same appointment is a duplicate"
    );
    assert!(rows[2].event.starts_at.is_some());
}

#[test]
fn crlf_files_report_physical_lines() {
    let text = "ref,starts_at,phone,name,service,location,status\r\n\
                cita-1,2026-12-01T09:30:00-05:00,+51987654321,Ana,X,Y,scheduled\r\n\
                cita-2,2026-12-01T10:30:00-05:00,987,Luis,X,Y,scheduled\r\n";
    let (_, errors) = parse(text, "a.csv");
    assert_eq!((errors[0].line, errors[0].field.as_str()), (3, "phone"), "{errors:?}");
}

#[test]
fn semicolons_and_tabs_are_read_from_the_header() {
    let row = [
        "cita-1",
        "2026-12-01T09:30:00-05:00",
        "+51987654321",
        "Peña, Ana",
        "X",
        "Y",
        "scheduled",
    ];
    for d in [";", "\t"] {
        let text = format!("{}\n{}\n", COLUMNS.join(d), row.join(d));
        let (rows, errors) = parse(&text, "a.csv");
        assert!(errors.is_empty(), "{d:?}: {errors:?}");
        assert_eq!(
            rows[0].event.contact.as_ref().unwrap().name.as_deref(),
            Some("Peña, Ana")
        );
        assert_eq!(rows[0].raw, row.join(d), "written back with the file's delimiter");
    }
    // A comma file whose names hold semicolons stays a comma file.
    let text = format!(
        "{}\ncita-1,2026-12-01T09:30:00-05:00,+51987654321,Ana; Luis,X,Y,scheduled\n",
        COLUMNS.join(",")
    );
    let (rows, errors) = parse(&text, "a.csv");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        rows[0].event.contact.as_ref().unwrap().name.as_deref(),
        Some("Ana; Luis")
    );
}

#[test]
fn missing_columns_are_named() {
    let (_, errors) = parse("ref,phone\ncita-1,+51987654321\n", "a.csv");
    assert!(errors[0].reason.contains("starts_at"));
}

#[test]
fn every_column_is_part_of_the_event_id() {
    let head = "ref,starts_at,phone,name,service,location,status\n";
    let row = "cita-1,2026-12-01T09:30:00-05:00,+51987654321,Ana,Odontología,Sede A,scheduled\n";
    let (a, _) = parse(&format!("{head}{row}"), "a.csv");
    let (b, _) = parse(&format!("{head}{}", row.replace("Ana", "Ana María")), "a.csv");
    assert_ne!(a[0].event.event_id, b[0].event.event_id);
    assert_eq!(a[0].event.version, None, "agenda rows are versioned by the ledger");
    let (_, errors) = parse(&format!("{head}{}", row.replace("Ana", &"A".repeat(121))), "a.csv");
    assert_eq!(errors[0].field, "name", "{errors:?}");
}

#[test]
fn line_numbers_hold_across_quoted_newlines_comments_and_many_rows() {
    let mut text = String::from("ref,starts_at,phone,name,service,location,status\n");
    text.push_str("cita-1,2026-12-01T09:30:00-05:00,+51987654321,\"Ana\nQuispe\",X,Y,scheduled\n");
    text.push_str("# a reason line of a rejects file\n");
    for i in 0..2000 {
        text.push_str(&format!(
            "cita-{},2026-12-01T09:30:00-05:00,+51987654321,Ana,X,Y,scheduled\n",
            i + 10
        ));
    }
    text.push_str("cita-bad,2026-12-01T10:30:00-05:00,987,Luis,X,Y,scheduled\n");
    let (rows, errors) = parse(&text, "a.csv");
    assert_eq!(rows.len(), 2001);
    // header 1, the quoted row 2-3, the comment 4, 2000 rows 5-2004, the bad row 2005
    assert_eq!(
        (errors[0].line, errors[0].field.as_str()),
        (2005, "phone"),
        "{errors:?}"
    );
}
