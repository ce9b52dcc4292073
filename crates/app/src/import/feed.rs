//! A calendar feed's body, parsed as `unavez import` parses an `.ics`
//! file, plus what the poller needs to decide whether the poll can be
//! trusted (the feed rule itself is core's `domain::feed`).

use chrono::{DateTime, Utc};

use super::{Parsed, RowError, decode_named, ics, within_horizon};
use crate::config::ImportConfig;

/// A calendar feed's body, read as `unavez import` reads an `.ics` file,
/// with what says whether the poll can be trusted: every `UID` in it
/// (refused events included), whether it has a `VCALENDAR`, how many
/// `VEVENT`s.
pub struct FeedBody {
    pub parsed: Parsed,
    pub uids: std::collections::BTreeSet<String>,
    pub has_vcalendar: bool,
    pub vevents: usize,
}

/// Parses a feed's body; `file` names it in errors and notes.
pub fn parse_feed(
    bytes: &[u8],
    file: &str,
    tz: chrono_tz::Tz,
    calendar: &ImportConfig,
    now: DateTime<Utc>,
) -> Result<FeedBody, RowError> {
    let (text, encoding) = decode_named(bytes, file)?;
    let opts = ics::Options {
        tz,
        now,
        config: calendar,
    };
    let p = ics::parse(&text, file, &opts);
    let (rows, far) = within_horizon(p.rows, file, calendar.max_days_ahead, now);
    let mut errors = p.errors;
    errors.extend(far);
    Ok(FeedBody {
        uids: p.uids,
        has_vcalendar: p.has_vcalendar,
        vevents: p.counts.vevents,
        parsed: Parsed {
            rows,
            errors,
            encoding,
            header: None,
            calendar: Some(p.counts),
            notes: p.notes,
        },
    })
}

/// The commitment ref an iCalendar `UID` imports as (an occurrence of a
/// series adds `/` and its start).
pub fn ref_of_uid(uid: &str) -> String {
    ics::ref_of_uid(uid)
}
