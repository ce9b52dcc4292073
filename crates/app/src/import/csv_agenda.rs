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
    let delimiter = delimiter(text);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .flexible(true)
        // `#` lines are the reasons in a rejects file (a row cannot start
        // with `#`: refs are letters, digits and `-_./`).
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let index = match column_index(&mut reader) {
        Ok(index) => index,
        Err(e) => return (Vec::new(), row_errors(file, 1, "", vec![e])),
    };
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    let mut lines = LineCounter::default();
    for record in reader.records() {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map(|p| lines.physical_line(text, p)).unwrap_or(0);
                errors.extend(row_errors(file, line, "", vec![field_error("csv", e.to_string())]));
                continue;
            }
        };
        let line = record.position().map(|p| lines.physical_line(text, p)).unwrap_or(0);
        let raw = csv_line(&record, delimiter);
        match row_events(&record, &index) {
            Ok(events) => rows.extend(events.into_iter().map(|event| Row {
                line,
                event,
                raw: raw.clone(),
            })),
            Err(errs) => errors.extend(row_errors(file, line, &raw, errs)),
        }
    }
    (rows, errors)
}

fn field_error(field: &str, reason: String) -> FieldError {
    FieldError {
        field: field.into(),
        reason,
    }
}

/// Where each of [`COLUMNS`] is in the header row; missing ones are named.
fn column_index(reader: &mut csv::Reader<&[u8]>) -> Result<[usize; 7], FieldError> {
    let headers = reader.headers().map_err(|e| field_error("header", e.to_string()))?;
    let at = COLUMNS.map(|c| headers.iter().position(|h| h.eq_ignore_ascii_case(c)));
    let missing: Vec<&str> = COLUMNS
        .iter()
        .zip(&at)
        .filter(|(_, i)| i.is_none())
        .map(|(c, _)| *c)
        .collect();
    if !missing.is_empty() {
        let reason = format!("missing column(s): {}", missing.join(", "));
        return Err(field_error("header", reason));
    }
    Ok(at.map(|i| i.unwrap_or_default()))
}

/// The booking events of one row, or what is wrong with it, by column.
fn row_events(record: &csv::StringRecord, index: &[usize; 7]) -> Result<Vec<BookingEvent>, Vec<FieldError>> {
    let [reference, starts_at, phone, name, service, location, status] =
        index.map(|i| record.get(i).unwrap_or("").to_string());
    let kind = match status.to_ascii_lowercase().as_str() {
        "scheduled" | "programada" | "rescheduled" | "reprogramada" => "appointment.scheduled",
        "cancelled" | "canceled" | "cancelada" => "appointment.cancelled",
        "confirmed" | "confirmada" => "appointment.confirmed",
        other => {
            let reason = format!("unknown status {other:?} (expected scheduled, cancelled or confirmed)");
            return Err(vec![field_error("status", reason)]);
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
        let digest =
            Sha256::digest(format!("{reference}|{starts_at}|{phone}|{location}|{service}|{kind}|{name}").as_bytes());
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
    kinds
        .iter()
        .map(|k| event(k))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|errs| {
            // The event's field names, said as the file's columns.
            errs.into_iter()
                .map(|mut e| {
                    e.field = match e.field.as_str() {
                        "contact.phone" | "contact" => "phone".into(),
                        "contact.name" => "name".into(),
                        f => f.to_string(),
                    };
                    e
                })
                .collect()
        })
}

/// Physical line numbers of records, counted incrementally: records come
/// in file order, so each count starts where the previous one stopped
/// (counting from byte 0 for every record made a 200,000-row agenda
/// quadratic: minutes instead of seconds).
#[derive(Default)]
struct LineCounter {
    /// A byte offset already counted up to, and the newlines before it.
    at: usize,
    newlines: usize,
}

impl LineCounter {
    /// The 1-based physical line of a record, from its byte offset: with
    /// CRLF endings the csv crate starts a record at the `\n` that ends
    /// the previous one and counts lines one short.
    fn physical_line(&mut self, text: &str, p: &csv::Position) -> usize {
        let bytes = text.as_bytes();
        let mut at = (p.byte() as usize).min(bytes.len());
        while at < bytes.len() && matches!(bytes[at], b'\r' | b'\n') {
            at += 1;
        }
        if at < self.at {
            // Never expected (positions only grow); start over rather than
            // report a wrong line.
            *self = Self::default();
        }
        self.newlines += bytes[self.at..at].iter().filter(|b| **b == b'\n').count();
        self.at = at;
        self.newlines + 1
    }
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
#[path = "csv_agenda_tests.rs"]
mod tests;
