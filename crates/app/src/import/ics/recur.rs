//! Recurrence rules (RFC 5545 §3.3.10) expanded with the `rrule` crate.
//!
//! Expansion runs on *wall-clock* times (local times carried as if they
//! were UTC), because a weekly 09:30 appointment stays at 09:30 across a
//! daylight-saving change; the caller turns each local time into an
//! instant in the event's own zone afterwards.

use chrono::{NaiveDateTime, TimeZone};

/// Local times of `rule` from `start`, in `[after, before]`, at most
/// `limit`, without those in `exdates`; and whether the rule goes on after
/// `before`. `until_local` turns a UTC `UNTIL` into the series' local time.
pub fn expand(
    rule: &str,
    start: NaiveDateTime,
    exdates: &[NaiveDateTime],
    after: NaiveDateTime,
    before: NaiveDateTime,
    limit: u16,
) -> Result<(Vec<NaiveDateTime>, bool), String> {
    let series = Series {
        rule,
        start,
        rdates: &[],
        exdates,
    };
    expand_with(&series, after, before, limit, &|t| t)
}

/// A recurring event: its rule, first start and extra and excluded dates,
/// all as local times.
pub struct Series<'a> {
    pub rule: &'a str,
    pub start: NaiveDateTime,
    pub rdates: &'a [NaiveDateTime],
    pub exdates: &'a [NaiveDateTime],
}

/// [`expand`] with a conversion of `UNTIL=…Z` to local time.
pub fn expand_with(
    series: &Series<'_>,
    after: NaiveDateTime,
    before: NaiveDateTime,
    limit: u16,
    until_local: &dyn Fn(NaiveDateTime) -> NaiveDateTime,
) -> Result<(Vec<NaiveDateTime>, bool), String> {
    let wall = |t: NaiveDateTime| rrule::Tz::UTC.from_utc_datetime(&t);
    let rule = local_until(series.rule, until_local);
    let parsed: rrule::RRule<rrule::Unvalidated> =
        rule.parse().map_err(|e| format!("unreadable RRULE {rule:?}: {e}"))?;
    let set = parsed
        .build(wall(series.start))
        .map_err(|e| format!("invalid RRULE {rule:?}: {e}"))?;
    let mut set = set.after(wall(after)).before(wall(before));
    for x in series.exdates {
        set = set.exdate(wall(*x));
    }
    for x in series.rdates {
        set = set.rdate(wall(*x));
    }
    let later = set
        .clone()
        .after(wall(before))
        .before(wall(before + chrono::Duration::days(3660)));
    // A recurrence set is a set (RFC 5545 §3.8.5.2): an RDATE equal to
    // DTSTART or to a rule's occurrence is one occurrence.
    let mut dates: Vec<NaiveDateTime> = set.all(limit).dates.into_iter().map(|d| d.naive_utc()).collect();
    dates.sort_unstable();
    dates.dedup();
    Ok((dates, !later.all(1).dates.is_empty()))
}

/// Rewrites `UNTIL` as a wall-clock time in the `…Z` form the crate wants
/// for a UTC start: a UTC value through `until_local`, a floating one as
/// is, a date as the end of that day.
fn local_until(rule: &str, until_local: &dyn Fn(NaiveDateTime) -> NaiveDateTime) -> String {
    rule.trim()
        .split(';')
        .filter(|part| !part.trim().is_empty())
        .map(|part| {
            let Some((k, v)) = part.split_once('=') else {
                return part.to_string();
            };
            if !k.trim().eq_ignore_ascii_case("UNTIL") {
                return part.to_string();
            }
            let v = v.trim();
            let fmt = "%Y%m%dT%H%M%S";
            let local = if let Some(utc) = v.strip_suffix(['Z', 'z']) {
                NaiveDateTime::parse_from_str(utc, fmt).ok().map(until_local)
            } else if v.len() == 8 {
                NaiveDateTime::parse_from_str(&format!("{v}T235959"), fmt).ok()
            } else {
                NaiveDateTime::parse_from_str(v, fmt).ok()
            };
            match local {
                Some(t) => format!("UNTIL={}Z", t.format(fmt)),
                None => part.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
#[path = "recur_tests.rs"]
mod tests;
