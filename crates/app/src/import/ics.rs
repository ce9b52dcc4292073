//! iCalendar agendas (`.ics`), read with the `icalendar` crate's parser.
//!
//! One `VEVENT` is one appointment event:
//!
//! | iCalendar | booking event |
//! |---|---|
//! | `UID` | `ref` (sanitized to the ref charset, see [`uid_to_ref`]) |
//! | `SEQUENCE` | `version` = SEQUENCE + 1 (absent → no version: the next one when the content changes) |
//! | `STATUS:CANCELLED` | `appointment.cancelled`; anything else (`CONFIRMED`, `TENTATIVE`, absent) → `appointment.scheduled` |
//! | `DTSTART` | `starts_at`: `;TZID=Area/City` (IANA), UTC `…Z`, or floating (the configured zone) |
//! | `X-UNAVEZ-PHONE`, else `ATTENDEE…:tel:+51…` | `contact.phone` (E.164) |
//! | `X-UNAVEZ-NAME`, else the `CN` of that attendee | `contact.name` |
//! | `SUMMARY` / `LOCATION` | `service` / `location` |
//!
//! `STATUS:CONFIRMED` in iCalendar means the *event* is definite, not that
//! the customer confirmed, so it never cancels "please confirm" reminders.
//! With a `SEQUENCE`, the event id is derived from UID + SEQUENCE + STATUS,
//! so re-importing an export is a no-op and a change must raise `SEQUENCE`,
//! as RFC 5545 requires: two VEVENTs with one UID and one SEQUENCE but
//! different properties are a conflict, refused. Without a `SEQUENCE` the
//! exporter does not version its events, so the id covers the VEVENT's
//! content (like a CSV row) and a changed VEVENT gets the next version.
//! `DTSTAMP` is the export time, not the event's, so it is not used as
//! `occurred_at`: only the past-appointment flood guard applies to calendar
//! imports.

use chrono::{NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use icalendar::parser::{Component, Property, read_calendar, unfold};
use sha2::{Digest, Sha256};

use super::{Row, RowError, row_errors};
use crate::domain::event::{BookingEvent, FieldError, MAX_VERSION};
use crate::domain::key::check_ref;

/// Parses an iCalendar text; floating times are read in `tz`.
pub fn parse(text: &str, file: &str, tz: Tz) -> (Vec<Row>, Vec<RowError>) {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    // The parser works on unfolded text and reports no source lines, so the
    // VEVENTs are located in the original text first; both walks see them
    // in document order.
    let spans = vevent_spans(text);
    let normalized = unfold(text).replace("\r\n", "\n");
    let calendar = match read_calendar(&normalized) {
        Ok(c) => c,
        Err(e) => {
            let reason = e
                .lines()
                .find(|l| !l.trim().is_empty() && l.trim() != "error:")
                .unwrap_or("unreadable");
            errors.extend(row_errors(
                file,
                1,
                "",
                vec![FieldError {
                    field: "file".into(),
                    reason: format!("not valid iCalendar: {}", reason.trim()),
                }],
            ));
            return (rows, errors);
        }
    };
    let mut events = Vec::new();
    collect_vevents(&calendar.components, &mut events);
    if events.is_empty() {
        errors.extend(row_errors(
            file,
            1,
            "",
            vec![FieldError {
                field: "file".into(),
                reason: "no VEVENT found".into(),
            }],
        ));
        return (rows, errors);
    }
    for (i, ev) in events.into_iter().enumerate() {
        let (line, raw) = spans.get(i).cloned().unwrap_or((1, String::new()));
        match to_event(ev, tz) {
            Ok(event) => rows.push(Row { line, event, raw }),
            Err(errs) => errors.extend(row_errors(file, line, &raw, errs)),
        }
    }
    (rows, errors)
}

/// (1-based line of `BEGIN:VEVENT`, the VEVENT's original text).
fn vevent_spans(text: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut open: Option<(usize, Vec<&str>)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.eq_ignore_ascii_case("BEGIN:VEVENT") {
            open = Some((i + 1, vec![line]));
        } else if let Some((start, mut lines)) = open.take() {
            lines.push(line);
            if t.eq_ignore_ascii_case("END:VEVENT") {
                spans.push((start, lines.join("\n")));
            } else {
                open = Some((start, lines));
            }
        }
    }
    if let Some((start, lines)) = open {
        spans.push((start, lines.join("\n")));
    }
    spans
}

fn collect_vevents<'a, 'b>(components: &'b [Component<'a>], out: &mut Vec<&'b Component<'a>>) {
    for c in components {
        if c.name.as_str().eq_ignore_ascii_case("VEVENT") {
            out.push(c);
        } else {
            collect_vevents(&c.components, out);
        }
    }
}

fn prop<'b, 'a>(c: &'b Component<'a>, name: &str) -> Option<&'b Property<'a>> {
    c.properties.iter().find(|p| p.name.as_str().eq_ignore_ascii_case(name))
}

fn value(c: &Component<'_>, name: &str) -> Option<String> {
    prop(c, name)
        .map(|p| p.val.as_str().trim().to_string())
        .filter(|s| !s.is_empty())
}

fn param(p: &Property<'_>, key: &str) -> Option<String> {
    p.params
        .iter()
        .find(|x| x.key.as_str().eq_ignore_ascii_case(key))
        .and_then(|x| x.val.as_ref())
        .map(|v| v.as_str().trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
}

fn err(field: &str, reason: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        reason: reason.into(),
    }
}

fn to_event(c: &Component<'_>, tz: Tz) -> Result<BookingEvent, Vec<FieldError>> {
    let mut errors = Vec::new();
    let uid = value(c, "UID");
    let reference = match &uid {
        Some(u) => uid_to_ref(u),
        None => {
            errors.push(err("ref", "missing (UID)"));
            String::new()
        }
    };
    if prop(c, "RRULE").is_some() || prop(c, "RECURRENCE-ID").is_some() {
        errors.push(err(
            "rrule",
            "recurring events are not supported (export one VEVENT per appointment)",
        ));
    }
    let sequence = match value(c, "SEQUENCE") {
        None => None,
        Some(s) => match s.parse::<i64>() {
            Ok(n) if (0..MAX_VERSION).contains(&n) => Some(n),
            _ => {
                errors.push(err(
                    "version",
                    format!("SEQUENCE must be an integer from 0 to {}, got {s:?}", MAX_VERSION - 1),
                ));
                None
            }
        },
    };
    let status = value(c, "STATUS").unwrap_or_default().to_ascii_uppercase();
    let kind = match status.as_str() {
        "CANCELLED" => "appointment.cancelled",
        "" | "CONFIRMED" | "TENTATIVE" => "appointment.scheduled",
        other => {
            errors.push(err(
                "status",
                format!("unknown STATUS {other:?} (expected CONFIRMED, TENTATIVE or CANCELLED)"),
            ));
            "appointment.scheduled"
        }
    };
    let starts_at = match prop(c, "DTSTART") {
        Some(p) => match dtstart(p, tz) {
            Ok(t) => Some(t),
            Err(e) => {
                errors.push(e);
                None
            }
        },
        None if kind == "appointment.scheduled" => {
            errors.push(err("starts_at", "missing (DTSTART)"));
            None
        }
        None => None,
    };
    let (phone, cn) = phone_and_name(c);
    let name = value(c, "X-UNAVEZ-NAME").or(cn);
    if phone.is_none() && kind == "appointment.scheduled" {
        errors.push(err("phone", "missing (X-UNAVEZ-PHONE or ATTENDEE;CN=Name:tel:+51…)"));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let (service, location) = (value(c, "SUMMARY"), value(c, "LOCATION"));
    let uid = uid.unwrap_or_default();
    let identity = match sequence {
        Some(seq) => format!("{uid}|{seq}|{status}"),
        None => {
            let o = |v: &Option<String>| v.clone().unwrap_or_default();
            format!(
                "{uid}||{status}|{}|{}|{}|{}|{}",
                o(&starts_at),
                o(&phone),
                o(&name),
                o(&service),
                o(&location)
            )
        }
    };
    let digest = Sha256::digest(identity.as_bytes());
    let obj = serde_json::json!({
        "event_id": format!("ics-{}", &hex::encode(digest)[..24]),
        "type": kind,
        "ref": reference,
        "version": sequence.map(|s| s + 1),
        "starts_at": starts_at,
        "contact": phone.map(|p| serde_json::json!({"phone": p, "name": name})),
        "service": service,
        "location": location,
    });
    BookingEvent::from_value(obj).map_err(|errs| {
        errs.into_iter()
            .map(|mut e| {
                e.field = match e.field.as_str() {
                    "contact.name" => "name".into(),
                    f if f.starts_with("contact") => "phone".into(),
                    f => f.into(),
                };
                e
            })
            .collect()
    })
}

/// DTSTART as RFC 3339: `TZID` (IANA name), UTC (`Z`) or floating (`tz`).
fn dtstart(p: &Property<'_>, tz: Tz) -> Result<String, FieldError> {
    let raw = p.val.as_str().trim();
    if param(p, "VALUE").is_some_and(|v| v.eq_ignore_ascii_case("DATE")) || raw.len() == 8 {
        return Err(err("starts_at", format!("all-day DTSTART {raw:?} has no time of day")));
    }
    let bad = || {
        err(
            "starts_at",
            format!("unparsable DTSTART {raw:?} (expected YYYYMMDDTHHMMSS[Z])"),
        )
    };
    if let Some(utc) = raw.strip_suffix('Z').or_else(|| raw.strip_suffix('z')) {
        let naive = NaiveDateTime::parse_from_str(utc, "%Y%m%dT%H%M%S").map_err(|_| bad())?;
        return Ok(Utc.from_utc_datetime(&naive).to_rfc3339());
    }
    let naive = NaiveDateTime::parse_from_str(raw, "%Y%m%dT%H%M%S").map_err(|_| bad())?;
    let zone = match param(p, "TZID") {
        Some(name) => zone_by_name(&name).ok_or_else(|| {
            err(
                "starts_at",
                format!("unknown TZID {name:?} (expected an IANA zone such as America/Lima)"),
            )
        })?,
        None => tz,
    };
    // Lima has no DST; elsewhere an ambiguous local time takes the earlier
    // instant and a skipped one is an error rather than a guess.
    let local = zone.from_local_datetime(&naive).earliest().ok_or_else(|| {
        err(
            "starts_at",
            format!("{raw} does not exist in {zone} (daylight-saving gap)"),
        )
    })?;
    Ok(local.fixed_offset().to_rfc3339())
}

fn zone_by_name(name: &str) -> Option<Tz> {
    // Some exporters prefix the IANA name with a vendor path.
    let name = name
        .trim_start_matches("/mozilla.org/20070129_1/")
        .trim_start_matches('/');
    match name {
        // Outlook's name for UTC-5 without DST (Lima, Bogotá, Quito).
        "SA Pacific Standard Time" => Some(chrono_tz::America::Lima),
        n => n.parse().ok(),
    }
}

/// `X-UNAVEZ-PHONE`, else the first `ATTENDEE` whose value is a `tel:`
/// URI (RFC 3966 visual separators `-` `.` `(` `)` removed); with the
/// attendee's `CN` as the name.
fn phone_and_name(c: &Component<'_>) -> (Option<String>, Option<String>) {
    let attendee = c
        .properties
        .iter()
        .filter(|p| p.name.as_str().eq_ignore_ascii_case("ATTENDEE"))
        .find(|p| p.val.as_str().trim().to_ascii_lowercase().starts_with("tel:"));
    let cn = attendee.and_then(|p| param(p, "CN"));
    if let Some(phone) = value(c, "X-UNAVEZ-PHONE") {
        return (Some(phone), cn);
    }
    let phone = attendee.map(|p| {
        p.val.as_str().trim()[4..]
            .chars()
            .filter(|ch| !matches!(ch, '-' | '.' | '(' | ')'))
            .collect::<String>()
    });
    (phone, cn)
}

/// A UID as a commitment ref. Valid refs (`cita-1042`) are kept as they
/// are. Otherwise the part before `@` is kept with every character outside
/// `[A-Za-z0-9._/-]` turned into `-`, plus `-` and 8 letters of a hash of
/// the whole UID so distinct UIDs stay distinct. When that still is not a
/// valid ref (e.g. a run of 7+ digits, which refs refuse as possible phone
/// numbers) the ref is `ics-` and 16 letters of the hash. Letters only
/// (`a`–`p`), so the hash never forms a digit run.
pub fn uid_to_ref(uid: &str) -> String {
    if check_ref(uid).is_ok() {
        return uid.to_string();
    }
    let digest = Sha256::digest(uid.as_bytes());
    let letters: String = digest
        .iter()
        .flat_map(|b| [b >> 4, b & 15])
        .map(|n| char::from(b'a' + n))
        .collect();
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
    let candidate = format!("{}-{}", cleaned.trim_matches('-'), &letters[..8]);
    if cleaned.trim_matches('-').is_empty() || cleaned.len() > 48 || check_ref(&candidate).is_err() {
        return format!("ics-{}", &letters[..16]);
    }
    candidate
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventType;

    const LIMA: Tz = chrono_tz::America::Lima;

    fn cal(events: &str) -> String {
        format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Clinica//Agenda//ES\r\n{events}END:VCALENDAR\r\n")
    }

    const ANA: &str = "BEGIN:VEVENT\r\nUID:cita-1042\r\nDTSTAMP:20261129T150000Z\r\nSEQUENCE:2\r\n\
        DTSTART;TZID=America/Lima:20270112T093000\r\nSUMMARY:Odontología\r\nLOCATION:Sede Miraflores\\, piso 2\r\n\
        ATTENDEE;CN=Ana Quispe;ROLE=REQ-PARTICIPANT:tel:+51987654321\r\nEND:VEVENT\r\n";

    #[test]
    fn a_vevent_becomes_a_scheduled_event() {
        let (rows, errors) = parse(&cal(ANA), "a.ics", LIMA);
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
        assert!(rows[0].raw.starts_with("BEGIN:VEVENT") && rows[0].raw.ends_with("END:VEVENT"));
    }

    #[test]
    fn event_ids_are_stable_and_follow_uid_sequence_status() {
        let (a, _) = parse(&cal(ANA), "a.ics", LIMA);
        let (b, _) = parse(&cal(ANA), "b.ics", LIMA);
        assert_eq!(a[0].event.event_id, b[0].event.event_id);
        let (c, _) = parse(&cal(&ANA.replace("SEQUENCE:2", "SEQUENCE:3")), "a.ics", LIMA);
        assert_ne!(a[0].event.event_id, c[0].event.event_id);
        let (d, _) = parse(
            &cal(&ANA.replace("SEQUENCE:2\r\n", "SEQUENCE:2\r\nSTATUS:CANCELLED\r\n")),
            "a.ics",
            LIMA,
        );
        assert_ne!(a[0].event.event_id, d[0].event.event_id);
        assert_eq!(d[0].event.kind, EventType::AppointmentCancelled);
    }

    #[test]
    fn utc_floating_and_x_phone_forms() {
        let utc = ANA.replace("DTSTART;TZID=America/Lima:20270112T093000", "DTSTART:20270112T143000Z");
        let (rows, _) = parse(&cal(&utc), "a.ics", LIMA);
        assert_eq!(
            rows[0].event.starts_at_utc().unwrap().to_rfc3339(),
            "2027-01-12T14:30:00+00:00"
        );
        let floating = ANA.replace("DTSTART;TZID=America/Lima:20270112T093000", "DTSTART:20270112T093000");
        let (rows, _) = parse(&cal(&floating), "a.ics", LIMA);
        assert_eq!(
            rows[0].event.starts_at.unwrap().to_rfc3339(),
            "2027-01-12T09:30:00-05:00"
        );
        let x = ANA
            .replace(
                "ATTENDEE;CN=Ana Quispe;ROLE=REQ-PARTICIPANT:tel:+51987654321\r\n",
                "X-UNAVEZ-PHONE:+51911222333\r\nX-UNAVEZ-NAME:Rosa\r\n",
            )
            .replace("SEQUENCE:2\r\n", "");
        let (rows, errors) = parse(&cal(&x), "a.ics", LIMA);
        assert!(errors.is_empty(), "{errors:?}");
        let c = rows[0].event.contact.as_ref().unwrap();
        assert_eq!((c.phone.as_str(), c.name.as_deref()), ("+51911222333", Some("Rosa")));
        assert_eq!(rows[0].event.version, None, "no SEQUENCE: the ledger versions it");
        let sep = ANA.replace("tel:+51987654321", "tel:+51-987-654-321");
        let (rows, _) = parse(&cal(&sep), "a.ics", LIMA);
        assert_eq!(rows[0].event.contact.as_ref().unwrap().phone, "+51987654321");
    }

    #[test]
    fn bad_vevents_are_reported_at_their_begin_line() {
        let bad_phone = ANA
            .replace("tel:+51987654321", "tel:987654321")
            .replace("cita-1042", "cita-1");
        let bad_time = ANA.replace("20270112T093000", "mañana").replace("cita-1042", "cita-2");
        let no_uid = ANA.replace("UID:cita-1042\r\n", "");
        let bad_zone = ANA
            .replace("America/Lima", "Mars/Olympus")
            .replace("cita-1042", "cita-3");
        let all_day = ANA
            .replace(
                "DTSTART;TZID=America/Lima:20270112T093000",
                "DTSTART;VALUE=DATE:20270112",
            )
            .replace("cita-1042", "cita-4");
        let (rows, errors) = parse(
            &cal(&format!("{ANA}{bad_phone}{bad_time}{no_uid}{bad_zone}{all_day}")),
            "a.ics",
            LIMA,
        );
        assert_eq!(rows.len(), 1);
        let shown: Vec<String> = errors
            .iter()
            .map(|e| format!("{}:{}: {}", e.file, e.line, e.field))
            .collect();
        assert_eq!(
            shown,
            [
                "a.ics:13: phone",
                "a.ics:22: starts_at",
                "a.ics:31: ref",
                "a.ics:39: starts_at",
                "a.ics:48: starts_at"
            ]
        );
        assert!(errors[0].reason.contains("E.164"), "{}", errors[0].reason);
        assert!(errors[3].reason.contains("Mars/Olympus"));
        assert!(errors[4].reason.contains("all-day"));
    }

    #[test]
    fn unknown_status_and_recurrence_are_refused_and_garbage_is_named() {
        let (_, errors) = parse(
            &cal(&ANA.replace("SEQUENCE:2\r\n", "STATUS:MAYBE\r\nRRULE:FREQ=WEEKLY\r\n")),
            "a.ics",
            LIMA,
        );
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["rrule", "status"]);
        let (_, errors) = parse("hola", "a.ics", LIMA);
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
            let (rows, errors) = parse(&text, "a.ics", LIMA);
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
        let (a, _) = parse(&cal(&bare), "a.ics", LIMA);
        let (same, _) = parse(&cal(&bare), "b.ics", LIMA);
        let (moved, _) = parse(&cal(&bare.replace("20270112T093000", "20270113T093000")), "a.ics", LIMA);
        assert_eq!(a[0].event.version, None);
        assert_eq!(
            a[0].event.event_id, same[0].event.event_id,
            "a re-export is a duplicate"
        );
        assert_ne!(
            a[0].event.event_id, moved[0].event.event_id,
            "an edited VEVENT is a new event"
        );
        // With a SEQUENCE, the id is UID + SEQUENCE + STATUS: the same id
        // with other content, which the ledger refuses as a conflict.
        let (s1, _) = parse(&cal(ANA), "a.ics", LIMA);
        let (s2, _) = parse(&cal(&ANA.replace("20270112T093000", "20270113T093000")), "a.ics", LIMA);
        assert_eq!(s1[0].event.event_id, s2[0].event.event_id);
    }

    #[test]
    fn an_oversize_name_is_named_as_the_name() {
        let long = ANA.replace("CN=Ana Quispe", &format!("CN={}", "A".repeat(121)));
        let (_, errors) = parse(&cal(&long), "a.ics", LIMA);
        assert_eq!(errors[0].field, "name", "{errors:?}");
        assert!(errors[0].reason.contains("too long"));
    }
}
