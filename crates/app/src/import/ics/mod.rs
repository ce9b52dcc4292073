//! iCalendar agendas (`.ics`) as clinics export them from Google Calendar,
//! Outlook and Apple Calendar. The full rules, for users:
//! `docs/reference/import.md#icalendar`.
//!
//! One `VEVENT` (or one occurrence of a recurring one) is one appointment
//! event:
//!
//! | iCalendar | booking event |
//! |---|---|
//! | `UID` | `ref` ([`uid_to_ref`]); an occurrence adds `/` and its original start in UTC (`/2027-01-12T1430Z`) |
//! | `SEQUENCE` | `version` = SEQUENCE + 1 (absent, or an occurrence → no version: the next one when the content changes) |
//! | `STATUS:CANCELLED` | `appointment.cancelled`; anything else → `appointment.scheduled` |
//! | `DTSTART` | `starts_at` ([`tz`]); a date without a time is an all-day event, skipped with a note |
//! | `X-UNAVEZ-PHONE`, an `ATTENDEE` `tel:` URI, else a phone typed in `[import] phone_properties` | `contact.phone` ([`phone`]); the event's `note` says which property |
//! | `X-UNAVEZ-NAME`, that attendee's `CN`, else SUMMARY's first piece | `contact.name` |
//! | `SUMMARY` (without the name and phone) / `LOCATION` | `service` / `location` |
//! | `RRULE`, `RDATE`, `EXDATE`, `RECURRENCE-ID` | occurrences within `[import] recurrence_days` ([`recur`]) |
//!
//! `STATUS:CONFIRMED` means the *event* is definite, not that the customer
//! confirmed. With a `SEQUENCE`, a single event's id is UID + SEQUENCE +
//! STATUS, so a re-import is a no-op and a change must raise `SEQUENCE`
//! (RFC 5545); without one, the id covers the content. `DTSTAMP` is the
//! export time, so it is not `occurred_at`.

mod event;
mod lines;
mod phone;
mod recur;
mod tz;
mod unreadable;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tolerance_tests;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use super::{Row, RowError};
use crate::config::ImportConfig;
#[cfg(test)]
use event::uid_to_ref;
use lines::Comp;

/// What a calendar import needs besides the text.
pub struct Options<'a> {
    /// The operating zone: floating times without `X-WR-TIMEZONE`.
    pub tz: Tz,
    pub now: DateTime<Utc>,
    pub config: &'a ImportConfig,
}

/// Counts of what a calendar held, for the import report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CalendarCounts {
    /// `VEVENT`s in the file (overrides of a recurring event included).
    pub vevents: usize,
    /// Booking events made from recurring `VEVENT`s.
    pub occurrences: usize,
    /// All-day events (holidays, blocked days): not appointments.
    pub skipped_all_day: usize,
    /// Recurring events whose every occurrence is already past.
    pub skipped_past: usize,
    /// Recurring events whose next occurrence lies beyond the horizon
    /// (`[import] recurrence_days`): a later import plans them.
    pub skipped_beyond_horizon: usize,
    /// `VEVENT`s refused with a reason (see `rejected`).
    pub refused: usize,
}

/// A parsed calendar.
#[derive(Debug, Default)]
pub struct Parsed {
    pub rows: Vec<Row>,
    pub errors: Vec<RowError>,
    pub counts: CalendarCounts,
    /// What was skipped or ignored, and where (`file:line: …`).
    pub notes: Vec<String>,
    /// Every `VEVENT`'s `UID`, refused ones included: a calendar feed
    /// decides presence by these.
    pub uids: std::collections::BTreeSet<String>,
    /// Whether the text has a `VCALENDAR` at all.
    pub has_vcalendar: bool,
}

/// [`event::uid_to_ref`], for the feeds.
pub fn ref_of_uid(uid: &str) -> String {
    event::uid_to_ref(uid)
}

/// The file's components that matter.
struct Contents<'d> {
    vevents: Vec<&'d Comp>,
    vtimezones: Vec<&'d Comp>,
    /// `X-WR-TIMEZONE` of the (first) calendar that has one.
    wr_timezone: Option<String>,
    /// `(line, component, reason)` of lines outside events that could not
    /// be read.
    skipped: Vec<(usize, String, String)>,
}

fn collect<'d>(comps: &'d [Comp], out: &mut Contents<'d>) {
    for c in comps {
        if c.name != "VEVENT" {
            // Unreadable lines outside events refuse nothing: noted.
            out.skipped
                .extend(c.errors.iter().map(|e| (e.line, c.name.clone(), e.reason.clone())));
        }
        match c.name.as_str() {
            "VEVENT" => out.vevents.push(c),
            "VTIMEZONE" => {
                out.vtimezones.push(c);
                collect(&c.children, out);
            }
            _ => {
                if c.name == "VCALENDAR" && out.wr_timezone.is_none() {
                    out.wr_timezone = c.text("X-WR-TIMEZONE");
                }
                collect(&c.children, out);
            }
        }
    }
}

/// Parses an iCalendar text into booking events, per-event errors and notes.
pub fn parse(text: &str, file: &str, opts: &Options<'_>) -> Parsed {
    let doc = lines::read(text);
    let mut out = Parsed::default();
    for s in &doc.stray {
        out.notes.push(format!("{file}:{}: {}", s.line, s.reason));
    }
    let mut contents = Contents {
        vevents: Vec::new(),
        vtimezones: Vec::new(),
        wr_timezone: None,
        skipped: Vec::new(),
    };
    collect(&doc.components, &mut contents);
    out.has_vcalendar = doc.components.iter().any(|c| c.name == "VCALENDAR");
    out.uids = contents.vevents.iter().filter_map(|c| c.text("UID")).collect();
    for (line, comp, reason) in &contents.skipped {
        out.notes
            .push(format!("{file}:{line}: line skipped in {comp} ({reason})"));
    }
    if contents.vevents.is_empty() {
        out.errors.push(RowError {
            file: file.to_string(),
            line: 1,
            field: "file".into(),
            reason: "no VEVENT found (is this an iCalendar file?)".into(),
            raw: String::new(),
        });
        return out;
    }
    out.counts.vevents = contents.vevents.len();
    let country = opts.config.default_country.trim().to_ascii_uppercase();
    let zones = tz::Zones::new(contents.vtimezones, &country);
    let floating = match contents.wr_timezone.as_deref().map(|n| zones.resolve(n)) {
        Some(Ok(z)) => z,
        Some(Err(e)) => {
            out.notes.push(format!(
                "{file}: X-WR-TIMEZONE ignored ({e}); floating times read in {}",
                opts.tz
            ));
            tz::Zone::Iana(opts.tz)
        }
        None => tz::Zone::Iana(opts.tz),
    };
    // Overrides (RECURRENCE-ID) belong to the recurring VEVENT of their
    // UID; one whose series is not in the file stands alone.
    let mut overrides: HashMap<String, Vec<&Comp>> = HashMap::new();
    let recurring: std::collections::HashSet<String> = contents
        .vevents
        .iter()
        .filter(|c| c.prop("RRULE").is_some() || c.prop("RDATE").is_some())
        .filter(|c| c.prop("RECURRENCE-ID").is_none())
        .filter_map(|c| c.text("UID"))
        .collect();
    for c in &contents.vevents {
        if c.prop("RECURRENCE-ID").is_some()
            && let Some(uid) = c.text("UID").filter(|u| recurring.contains(u))
        {
            overrides.entry(uid).or_default().push(c);
        }
    }
    let ctx = event::Ctx {
        file,
        zones: &zones,
        floating: &floating,
        opts,
    };
    for c in &contents.vevents {
        let uid = c.text("UID");
        let is_override = c.prop("RECURRENCE-ID").is_some() && uid.as_ref().is_some_and(|u| recurring.contains(u));
        if is_override {
            continue;
        }
        let own: &[&Comp] = uid
            .as_ref()
            .and_then(|u| overrides.get(u))
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        event::vevent(&ctx, c, own, &mut out);
    }
    out
}
