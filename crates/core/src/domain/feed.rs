//! Calendar feeds: when a vanished event means a cancellation.
//!
//! A clinic's calendar publishes no cancellations: a cancelled appointment
//! is an event that is no longer in the feed. Reading that as a
//! cancellation is only safe when the poll can be trusted to list the whole
//! calendar. This module decides, purely:
//!
//! - whether a poll can be trusted at all ([`trust`]): a failed fetch, a
//!   non-2xx answer, an empty body, a body without `VCALENDAR` or without
//!   a single `VEVENT` never cancels anything;
//! - which events of the previous successful poll vanished ([`judge`]):
//!   upcoming ones (starting within the feed's window), whose `UID` is no
//!   longer anywhere in the body. Presence is by `UID` in the body, not by
//!   what imported: an event refused for, say, an unknown `TZID` is still
//!   there;
//! - whether they are cancelled or held for a person: more than
//!   `mass_disappearance_pct` percent or more than `mass_disappearance_max`
//!   of the window's upcoming events vanishing at once is held;
//! - the next baseline ([`Judgement::baseline`]).

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

/// One event of a successful poll, as the baseline keeps it: the
/// commitment's reference, the `UID` it came from, and when it starts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Seen {
    pub reference: String,
    pub uid: String,
    pub starts_at: DateTime<Utc>,
}

/// Why a poll is not trusted to say what vanished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Untrusted {
    /// No answer: connection refused, timeout, too large, too many
    /// redirects…
    Fetch {
        reason: String,
    },
    /// An answer that is not 2xx (304 is handled before: nothing changed).
    Status {
        code: u16,
    },
    EmptyBody,
    /// No `BEGIN:VCALENDAR` (an HTML login page, a truncated body).
    NoCalendar,
    /// A calendar without a single event: an account switched, a filter
    /// gone wrong. A real, empty agenda is rare enough to ask a person.
    NoEvents,
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Untrusted::Fetch { reason } => write!(f, "fetch failed: {reason}"),
            Untrusted::Status { code } => write!(f, "HTTP {code}"),
            Untrusted::EmptyBody => f.write_str("empty body"),
            Untrusted::NoCalendar => f.write_str("no VCALENDAR in the body"),
            Untrusted::NoEvents => f.write_str("a calendar without any VEVENT"),
        }
    }
}

/// What the poll's body held, as far as trust goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyShape {
    pub bytes: usize,
    pub has_vcalendar: bool,
    pub vevents: usize,
}

/// Whether a fetched 2xx body may decide disappearances.
pub fn trust(shape: BodyShape) -> Result<(), Untrusted> {
    if shape.bytes == 0 {
        return Err(Untrusted::EmptyBody);
    }
    if !shape.has_vcalendar {
        return Err(Untrusted::NoCalendar);
    }
    if shape.vevents == 0 {
        return Err(Untrusted::NoEvents);
    }
    Ok(())
}

/// `[[import.feed]]`'s limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How far ahead the feed is trusted.
    pub window: Duration,
    /// More than this percentage of the window's upcoming events vanishing
    /// at once is held.
    pub mass_pct: u32,
    /// More than this many is held.
    pub mass_max: u32,
}

/// What a trusted poll means for the events that vanished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Disappearance {
    /// Nothing vanished.
    None,
    /// Cancel these: cancelled at the source.
    Cancel { gone: Vec<Seen> },
    /// Too many at once: hold these for a person.
    Hold { gone: Vec<Seen>, upcoming: usize },
}

/// The decision on one trusted poll.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judgement {
    pub disappearance: Disappearance,
    /// The next poll's baseline: this poll's upcoming events, and the
    /// previous ones whose `UID` is still in the body but did not import
    /// this time (refused, or an occurrence the import no longer lists),
    /// so a later disappearance of them is still seen.
    pub baseline: Vec<Seen>,
    /// Held events whose `UID` is back in the body: released.
    pub returned: Vec<Seen>,
}

fn upcoming(s: &Seen, now: DateTime<Utc>, limits: &Limits) -> bool {
    s.starts_at >= now && s.starts_at <= now + limits.window
}

/// Whether `gone` of `upcoming` vanishing at once is a mass disappearance.
pub fn is_mass(gone: usize, upcoming: usize, limits: &Limits) -> bool {
    let over_pct = (gone as u128) * 100 > u128::from(limits.mass_pct) * (upcoming as u128);
    gone > limits.mass_max as usize || over_pct
}

/// Judges a trusted poll: `previous` is the last successful poll's
/// baseline, `present` every `UID` in this body, `imported` this poll's
/// events that imported, `held` what is already held in review.
pub fn judge(
    previous: &[Seen],
    present: &BTreeSet<String>,
    imported: &[Seen],
    held: &[Seen],
    now: DateTime<Utc>,
    limits: &Limits,
) -> Judgement {
    let held_refs: BTreeSet<&str> = held.iter().map(|s| s.reference.as_str()).collect();
    let upcoming_before: Vec<&Seen> = previous.iter().filter(|s| upcoming(s, now, limits)).collect();
    let gone: Vec<Seen> = upcoming_before
        .iter()
        .filter(|s| !present.contains(&s.uid) && !held_refs.contains(s.reference.as_str()))
        .map(|s| (*s).clone())
        .collect();
    let disappearance = if gone.is_empty() {
        Disappearance::None
    } else if is_mass(gone.len(), upcoming_before.len(), limits) {
        Disappearance::Hold {
            gone,
            upcoming: upcoming_before.len(),
        }
    } else {
        Disappearance::Cancel { gone }
    };
    let mut baseline: BTreeSet<Seen> = imported.iter().filter(|s| upcoming(s, now, limits)).cloned().collect();
    let listed: BTreeSet<&str> = baseline.iter().map(|s| s.reference.as_str()).collect();
    let kept: Vec<Seen> = upcoming_before
        .iter()
        .filter(|s| present.contains(&s.uid) && !listed.contains(s.reference.as_str()))
        .map(|s| (*s).clone())
        .collect();
    baseline.extend(kept);
    let returned = held.iter().filter(|s| present.contains(&s.uid)).cloned().collect();
    Judgement {
        disappearance,
        baseline: baseline.into_iter().collect(),
        returned,
    }
}

/// The event id of a cancellation for a vanished event starts with this,
/// then the feed's name and `:`.
pub const VANISHED_ID_PREFIX: &str = "feed:";

/// The event id prefix of feed `feed`'s cancellations of vanished events.
pub fn vanished_prefix(feed: &str) -> String {
    format!("{VANISHED_ID_PREFIX}{feed}:vanished:")
}

/// Whether an event back in the feed revives its commitment: it lists the
/// appointment as live, the commitment is cancelled, and what cancelled
/// it last was this feed's reading of its disappearance. An event that
/// comes back is then the next version (an update notice, never a second
/// booking notice). A commitment cancelled by anything else (the booking
/// API, a file, the calendar's own `STATUS:CANCELLED`) stays cancelled.
pub fn revives(listed_live: bool, commitment_cancelled: bool, last_event_id: Option<&str>, feed: &str) -> bool {
    listed_live && commitment_cancelled && last_event_id.is_some_and(|id| id.starts_with(&vanished_prefix(feed)))
}

/// Whether a feed failing since `failing_since` has failed for at least
/// `minutes` (`[alerts] feed_stale_minutes`; 0 turns the alert off).
pub fn is_stale(failing_since: Option<DateTime<Utc>>, now: DateTime<Utc>, minutes: u32) -> bool {
    minutes > 0 && failing_since.is_some_and(|s| now - s >= Duration::minutes(i64::from(minutes)))
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;
