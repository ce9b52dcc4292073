//! Agenda exports as CSV: `ref,starts_at,phone,name,service,location,status`
//! with a header row. `status` is `scheduled` (also for a changed time or
//! place), `cancelled` or `confirmed`. Each row gets a stable event id from
//! its whole content, so re-importing the same export is a no-op while an
//! edited row is a new event. Rows carry no version: a row that changes
//! what a message says (time, place, phone, name, service) gets the next
//! version of its appointment.
//!
//! The delimiter is read from the header row: Excel writes `,`, or `;`
//! where the decimal mark is a comma (Spain, Peru…), and tabs in its
//! "Unicode text" (UTF-16). A rejected row is written back with the same
//! delimiter, under the file's own header.

use sha2::{Digest, Sha256};

use super::{Row, RowError, row_errors};
use crate::domain::event::{BookingEvent, FieldError};

pub(crate) const COLUMNS: [&str; 7] = ["ref", "starts_at", "phone", "name", "service", "location", "status"];

pub fn parse(text: &str, file: &str) -> (Vec<Row>, Vec<RowError>) {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    let delimiter = delimiter(text);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .flexible(true)
        // `#` lines are the reasons in a rejects file (a row cannot start
        // with `#`: refs are letters, digits and `-_./`).
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = match reader.headers() {
        Ok(h) => h.clone(),
        Err(e) => {
            errors.extend(row_errors(
                file,
                1,
                "",
                vec![FieldError {
                    field: "header".into(),
                    reason: e.to_string(),
                }],
            ));
            return (rows, errors);
        }
    };
    let index: Vec<Option<usize>> = COLUMNS
        .iter()
        .map(|c| headers.iter().position(|h| h.eq_ignore_ascii_case(c)))
        .collect();
    let missing: Vec<&str> = COLUMNS
        .iter()
        .zip(&index)
        .filter(|(_, i)| i.is_none())
        .map(|(c, _)| *c)
        .collect();
    if !missing.is_empty() {
        errors.extend(row_errors(
            file,
            1,
            "",
            vec![FieldError {
                field: "header".into(),
                reason: format!("missing column(s): {}", missing.join(", ")),
            }],
        ));
        return (rows, errors);
    }
    for record in reader.records() {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map(|p| physical_line(text, p)).unwrap_or(0);
                errors.extend(row_errors(
                    file,
                    line,
                    "",
                    vec![FieldError {
                        field: "csv".into(),
                        reason: e.to_string(),
                    }],
                ));
                continue;
            }
        };
        let line = record.position().map(|p| physical_line(text, p)).unwrap_or(0);
        let raw = csv_line(&record, delimiter);
        let get = |c: usize| index[c].and_then(|i| record.get(i)).unwrap_or("").to_string();
        let (reference, starts_at, phone, name, service, location, status) =
            (get(0), get(1), get(2), get(3), get(4), get(5), get(6));
        let kind = match status.to_ascii_lowercase().as_str() {
            "scheduled" | "programada" | "rescheduled" | "reprogramada" => "appointment.scheduled",
            "cancelled" | "canceled" | "cancelada" => "appointment.cancelled",
            "confirmed" | "confirmada" => "appointment.confirmed",
            other => {
                errors.extend(row_errors(
                    file,
                    line,
                    &raw,
                    vec![FieldError {
                        field: "status".into(),
                        reason: format!("unknown status {other:?} (expected scheduled, cancelled or confirmed)"),
                    }],
                ));
                continue;
            }
        };
        let opt = |s: &str| {
            if s.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::Value::String(s.into())
            }
        };
        let event = |kind: &str| {
            // Every column is in the id: an edited row must be a new event,
            // never "the same event with other content" (a conflict).
            let digest = Sha256::digest(
                format!("{reference}|{starts_at}|{phone}|{location}|{service}|{kind}|{name}").as_bytes(),
            );
            BookingEvent::from_value(serde_json::json!({
                "event_id": format!("csv-{}", &hex::encode(digest)[..24]),
                "type": kind,
                "ref": reference,
                "starts_at": opt(&starts_at),
                "contact": if phone.is_empty() { serde_json::Value::Null } else {
                    serde_json::json!({"phone": phone, "name": opt(&name)})
                },
                "service": opt(&service),
                "location": opt(&location),
            }))
        };
        // A confirmed row is also the appointment itself (an export may
        // list an appointment only once, already confirmed): its scheduled
        // event has the same id as a plain scheduled row with that content,
        // so it is a duplicate when the appointment is already known.
        let kinds: &[&str] = if kind == "appointment.confirmed" {
            &["appointment.scheduled", kind]
        } else {
            &[kind]
        };
        match kinds.iter().map(|k| event(k)).collect::<Result<Vec<_>, _>>() {
            Ok(events) => rows.extend(events.into_iter().map(|event| Row {
                line,
                event,
                raw: raw.clone(),
            })),
            Err(errs) => {
                let errs = errs
                    .into_iter()
                    .map(|mut e| {
                        e.field = match e.field.as_str() {
                            "contact.phone" | "contact" => "phone".into(),
                            "contact.name" => "name".into(),
                            f => f.to_string(),
                        };
                        e
                    })
                    .collect();
                errors.extend(row_errors(file, line, &raw, errs))
            }
        }
    }
    (rows, errors)
}

/// The 1-based physical line of a record, counted from its byte offset:
/// with CRLF endings the csv crate starts a record at the `\n` that ends
/// the previous one and counts lines one short.
fn physical_line(text: &str, p: &csv::Position) -> usize {
    let bytes = text.as_bytes();
    let mut at = (p.byte() as usize).min(bytes.len());
    while at < bytes.len() && matches!(bytes[at], b'\r' | b'\n') {
        at += 1;
    }
    bytes[..at].iter().filter(|b| **b == b'\n').count() + 1
}

/// The delimiter that splits the header row into the most known columns;
/// a comma when none does better (the error then names the missing
/// columns as a comma-separated file would have them).
fn delimiter(text: &str) -> u8 {
    let header = text.lines().find(|l| !l.starts_with('#')).unwrap_or_default();
    let known = |d: u8| {
        header
            .split(char::from(d))
            .filter(|h| {
                let h = h.trim().trim_matches('"');
                COLUMNS.iter().any(|c| c.eq_ignore_ascii_case(h))
            })
            .count()
    };
    let mut best = b',';
    for d in [b';', b'\t'] {
        if known(d) > known(best) {
            best = d;
        }
    }
    best
}

/// The record as one CSV line, quoted where needed, so a rejects file
/// reads back as the same fields.
fn csv_line(record: &csv::StringRecord, delimiter: u8) -> String {
    let mut w = csv::WriterBuilder::new()
        .delimiter(delimiter)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let _ = w.write_record(record);
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8_lossy(&bytes).trim_end_matches('\n').to_string()
}

#[cfg(test)]
mod tests {
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
}
