//! `unavez import` on files as clinics' tools save them, through the real
//! binary on a real SQLite file: Spanish Excel's Windows-1252 "CSV", its
//! UTF-16LE "Unicode text" (tab-separated, CRLF), UTF-8 with a byte-order
//! mark, an iCalendar file in Windows-1252, and the files no guess can
//! read safely (mixed encodings, UTF-16 without its mark), refused with
//! the line.

mod ledger_support;

use std::path::Path;

use ledger_support::*;

const HEADER: &str = "ref,starts_at,phone,name,service,location,status";

/// Windows-1252 bytes of `text` (Latin-1 range only, as these tests use).
fn cp1252(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("a Latin-1 character"))
        .collect()
}

fn utf16le_bom(text: &str) -> Vec<u8> {
    let mut out = vec![0xFF, 0xFE];
    for u in text.encode_utf16() {
        out.extend(u.to_le_bytes());
    }
    out
}

fn commitment(db: &Path, reference: &str) -> serde_json::Value {
    json(db, &["commitments", "show", reference])["commitment"].clone()
}

#[test]
fn a_windows_1252_csv_keeps_its_accents_and_says_how_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let file = dir.path().join("agenda.csv");
    let text = format!(
        "{HEADER}\r\n\
         cita-1,2031-03-10T09:30:00-05:00,+51987654301,Peña,Odontología,Sede Miraflores,scheduled\r\n\
         cita-2,2031-03-10T10:30:00-05:00,+51987654302,José Núñez,Pediatría,Sede Surco,scheduled\r\n"
    );
    let bytes = cp1252(&text);
    assert!(
        bytes.contains(&0xF1) && bytes.contains(&0xE9),
        "ñ and é as single bytes"
    );
    assert!(std::str::from_utf8(&bytes).is_err());
    std::fs::write(&file, &bytes).unwrap();

    let o = run(&db, &["import", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("encoding          windows-1252"), "{out}");
    assert_eq!(report_number(&out, "stored"), 2, "{out}");
    assert_eq!(commitment(&db, "cita-1")["name"], "Peña");
    assert_eq!(commitment(&db, "cita-2")["name"], "José Núñez");
    assert_eq!(commitment(&db, "cita-2")["service"], "Pediatría");

    // The same bytes again: the same events (ids from the decoded text).
    let again = json(&db, &["import", file.to_str().unwrap()]);
    assert_eq!(again["encoding"], "windows-1252");
    assert_eq!(
        (again["stored"].as_u64(), again["duplicates"].as_u64()),
        (Some(0), Some(2))
    );
}

#[test]
fn excel_unicode_text_is_read_with_tabs_physical_lines_and_an_importable_rejects_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let file = dir.path().join("agenda.csv");
    let rows = [
        HEADER.replace(',', "\t"),
        "cita-1\t2031-03-10T09:30:00-05:00\t+51987654311\tPeña, Ana\tOdontología\tSede A\tscheduled".into(),
        "cita-2\t2031-03-10T10:30:00-05:00\t987\tJosé\tPediatría\tSede A\tscheduled".into(),
        "cita-3\t2031-03-10T11:30:00-05:00\t+51987654313\tMaría\tPediatría\tSede A\tscheduled".into(),
    ];
    std::fs::write(&file, utf16le_bom(&(rows.join("\r\n") + "\r\n"))).unwrap();
    let f = file.to_str().unwrap();

    // Refused whole, at its physical line, saying how the file was read.
    let o = run(&db, &["import", f]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{f}:3: phone:")), "{err}");
    assert!(err.contains("(file read as utf-16le)"), "{err}");
    let refused = json_any(&db, &["import", f]);
    assert_eq!(refused["encoding"], "utf-16le");
    assert_eq!(refused["rejected"][0]["line"], 3);

    let report = json_any(&db, &["import", f, "--skip-invalid"]);
    assert_eq!(report["encoding"], "utf-16le");
    assert_eq!(report["stored"], 2, "{report}");
    assert_eq!(commitment(&db, "cita-1")["name"], "Peña, Ana");
    let rejects = dir.path().join("agenda.rejected.csv");
    assert_eq!(report["rejects_file"], rejects.to_str().unwrap());
    let text = std::fs::read_to_string(&rejects).unwrap();
    assert!(text.starts_with('\u{feff}'), "a BOM for Excel: {text:?}");
    assert!(text.contains(&rows[0]) && text.contains(&rows[2]), "{text:?}");

    // Fixed in place (UTF-8 now), the rejects file imports as it is.
    std::fs::write(&rejects, text.replace("\t987\t", "\t+51987654312\t")).unwrap();
    let fixed = json_any(&db, &["import", rejects.to_str().unwrap()]);
    assert_eq!(
        (fixed["encoding"].as_str(), fixed["stored"].as_u64()),
        (Some("utf-8-bom"), Some(1)),
        "{fixed}"
    );
    assert_eq!(commitment(&db, "cita-2")["name"], "José");
}

#[test]
fn a_utf8_bom_csv_and_a_windows_1252_calendar_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let csv = dir.path().join("bom.csv");
    std::fs::write(
        &csv,
        format!("\u{feff}{HEADER}\ncita-1,2031-03-10T09:30:00-05:00,+51987654321,Íñigo,X,Y,scheduled\n"),
    )
    .unwrap();
    let r = json(&db, &["import", csv.to_str().unwrap()]);
    assert_eq!(
        (r["encoding"].as_str(), r["stored"].as_u64()),
        (Some("utf-8-bom"), Some(1))
    );
    assert_eq!(commitment(&db, "cita-1")["name"], "Íñigo");

    let ics = dir.path().join("agenda.ics");
    let cal = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//y//ES\r\nBEGIN:VEVENT\r\nUID:cita-7\r\n\
               DTSTAMP:20261129T150000Z\r\nDTSTART:20310310T160000Z\r\nSUMMARY:Pediatría\r\n\
               ATTENDEE;CN=José Peña:tel:+51987654322\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    std::fs::write(&ics, cp1252(cal)).unwrap();
    let r = json(&db, &["import", ics.to_str().unwrap()]);
    assert_eq!(
        (r["encoding"].as_str(), r["stored"].as_u64()),
        (Some("windows-1252"), Some(1)),
        "{r}"
    );
    assert_eq!(commitment(&db, "cita-7")["name"], "José Peña");
}

#[test]
fn files_no_guess_reads_safely_are_refused_with_the_line_and_nothing_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let mixed = dir.path().join("mixed.csv");
    let mut bytes =
        format!("{HEADER}\ncita-1,2031-03-10T09:30:00-05:00,+51987654321,Peña,X,Y,scheduled\n").into_bytes();
    bytes.extend(cp1252(
        "cita-2,2031-03-10T10:30:00-05:00,+51987654322,José,X,Y,scheduled\n",
    ));
    std::fs::write(&mixed, bytes).unwrap();
    let f = mixed.to_str().unwrap();
    let o = run(&db, &["import", f, "--skip-invalid"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{f}:3: encoding: byte 0xE9 is not UTF-8")),
        "{err}"
    );
    assert!(err.contains("line 2 holds UTF-8"), "{err}");
    let r = json_any(&db, &["import", f]);
    assert_eq!(
        (r["rejected"][0]["field"].as_str(), r["rejected"][0]["line"].as_u64()),
        (Some("encoding"), Some(3))
    );

    // UTF-16 saved without its byte-order mark.
    let bare = dir.path().join("bare.csv");
    std::fs::write(&bare, &utf16le_bom(&format!("{HEADER}\n"))[2..]).unwrap();
    let o = run(&db, &["import", bare.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("encoding: NUL bytes"), "{}", stderr(&o));
    assert_eq!(json(&db, &["commitments", "list"]), serde_json::json!([]));
}

/// `--json` output whatever the exit code (a refused import exits 2).
fn json_any(db: &Path, args: &[&str]) -> serde_json::Value {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--json");
    let o = run(db, &all);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stderr(&o)))
}
