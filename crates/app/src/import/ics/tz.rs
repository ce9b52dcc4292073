//! Time zones of an iCalendar file: `TZID`s as exporters write them, and
//! the `VTIMEZONE` definitions the file carries.
//!
//! A `TZID` is resolved, in order, as:
//! 1. an IANA name (`America/Lima`), case-insensitively, also behind a
//!    vendor prefix (`/freeassociation.sourceforge.net/Tzfile/America/Lima`,
//!    `/mozilla.org/20070129_1/America/Lima`);
//! 2. a Windows zone name (`SA Pacific Standard Time`) through the CLDR
//!    `windowsZones` table (the `localzone` crate's copy), preferring the
//!    configured country's zone, else CLDR's world default;
//! 3. an Outlook display name (`(UTC-05:00) Bogota, Lima, Quito`): the
//!    listed city in the configured country, else the first listed city
//!    that names an IANA zone;
//! 4. the file's own `VTIMEZONE` with that `TZID`: its `X-LIC-LOCATION` if
//!    that is an IANA name, else its `STANDARD`/`DAYLIGHT` observances;
//! 5. a common alias ([`alias`]): `US-Eastern`, `America-Chicago`
//!    (a `-` for the `/`), `posix/Europe/Vaduz`, and names some exporters
//!    write for a region (`Western/Central Europe`, `Eastern Time (US &
//!    Canada)`). Last, because the file's own definition is better than a
//!    guess.
//!
//! A `TZID` none of these resolve refuses its event: a wrong hour is worse
//! than a refused event.

use std::collections::HashMap;

use chrono::{DateTime, Duration, FixedOffset, NaiveDateTime, TimeZone};
use chrono_tz::Tz;

use super::lines::Comp;
use super::recur;

/// A zone local times are read in.
#[derive(Debug, Clone)]
pub enum Zone {
    Iana(Tz),
    /// Defined by the file's `VTIMEZONE` (no IANA name found for it).
    Defined(Defined),
}

impl Zone {
    /// The instant of a local time. An ambiguous time (clocks set back)
    /// takes the earlier instant; a time that does not exist (clocks set
    /// forward) is an error rather than a guess.
    pub fn localize(&self, t: NaiveDateTime) -> Result<DateTime<FixedOffset>, String> {
        match self {
            Zone::Iana(z) => z
                .from_local_datetime(&t)
                .earliest()
                .map(|d| d.fixed_offset())
                .ok_or_else(|| format!("{t} does not exist in {z} (daylight-saving gap)")),
            Zone::Defined(d) => d.localize(t),
        }
    }

    /// The wall-clock time of an instant in this zone.
    pub fn to_local(&self, t: DateTime<chrono::Utc>) -> NaiveDateTime {
        match self {
            Zone::Iana(z) => t.with_timezone(z).naive_local(),
            Zone::Defined(d) => {
                let utc = t.naive_utc();
                utc + Duration::seconds(d.offset_at(utc).into())
            }
        }
    }

    pub fn name(&self) -> String {
        match self {
            Zone::Iana(z) => z.name().to_string(),
            Zone::Defined(d) => d.tzid.clone(),
        }
    }
}

/// One `STANDARD` or `DAYLIGHT` onset: from this UTC instant on, the
/// offset is `to` (seconds east of UTC).
#[derive(Debug, Clone, Copy)]
struct Onset {
    utc: NaiveDateTime,
    from: i32,
    to: i32,
}

/// A zone built from `VTIMEZONE` observances.
#[derive(Debug, Clone)]
pub struct Defined {
    tzid: String,
    /// Sorted by instant.
    onsets: Vec<Onset>,
}

impl Defined {
    fn offset_at(&self, utc: NaiveDateTime) -> i32 {
        match self.onsets.iter().rev().find(|o| o.utc <= utc) {
            Some(o) => o.to,
            None => self.onsets.first().map(|o| o.from).unwrap_or(0),
        }
    }

    fn localize(&self, t: NaiveDateTime) -> Result<DateTime<FixedOffset>, String> {
        let mut offsets: Vec<i32> = self.onsets.iter().flat_map(|o| [o.from, o.to]).collect();
        offsets.sort_unstable();
        offsets.dedup();
        // The earliest instant whose offset, by the observances, is the one
        // that reads `t` on the wall.
        offsets
            .into_iter()
            .map(|o| (t - Duration::seconds(o.into()), o))
            .filter(|(utc, o)| self.offset_at(*utc) == *o)
            .min_by_key(|(utc, _)| *utc)
            .and_then(|(utc, o)| {
                let off = FixedOffset::east_opt(o)?;
                Some(off.from_utc_datetime(&utc))
            })
            .ok_or_else(|| format!("{t} does not exist in {} (daylight-saving gap)", self.tzid))
    }
}

/// The zones a file names, resolved once each.
pub struct Zones<'a> {
    defined: HashMap<String, &'a Comp>,
    country: &'a str,
}

impl<'a> Zones<'a> {
    /// `vtimezones`: every `VTIMEZONE` of the file; `country`: the
    /// configured default country (ISO 3166), to pick among CLDR's zones.
    pub fn new(vtimezones: Vec<&'a Comp>, country: &'a str) -> Zones<'a> {
        let defined = vtimezones
            .into_iter()
            .filter_map(|c| c.text("TZID").map(|id| (id, c)))
            .collect();
        Zones { defined, country }
    }

    /// Resolves a `TZID`, or says why it cannot.
    pub fn resolve(&self, tzid: &str) -> Result<Zone, String> {
        let tzid = tzid.trim().trim_matches('"');
        if let Some(z) = by_name(tzid, self.country) {
            return Ok(Zone::Iana(z));
        }
        let Some(vtz) = self.defined.get(tzid) else {
            return alias(tzid).map(Zone::Iana).ok_or_else(|| {
                format!(
                    "unknown TZID {tzid:?} (not an IANA or Windows zone name or a known alias, and the file defines no VTIMEZONE for it)"
                )
            });
        };
        if let Some(z) = vtz.text("X-LIC-LOCATION").and_then(|l| by_name(&l, self.country)) {
            return Ok(Zone::Iana(z));
        }
        defined(tzid, vtz)
            .map(Zone::Defined)
            .or_else(|e| alias(tzid).map(Zone::Iana).ok_or(e))
    }
}

/// Names exporters write for a region rather than a zone, lower case, and
/// the IANA zone whose rules they mean (today's rules: every zone of the
/// region keeps the same clock).
const REGION_NAMES: &[(&str, &str)] = &[
    ("western/central europe", "Europe/Berlin"),
    ("central europe", "Europe/Berlin"),
    ("central european time", "Europe/Berlin"),
    ("central european standard time", "Europe/Berlin"),
    ("western europe", "Europe/Lisbon"),
    ("western european time", "Europe/Lisbon"),
    ("eastern europe", "Europe/Bucharest"),
    ("eastern european time", "Europe/Bucharest"),
    ("eastern time (us & canada)", "America/New_York"),
    ("central time (us & canada)", "America/Chicago"),
    ("mountain time (us & canada)", "America/Denver"),
    ("pacific time (us & canada)", "America/Los_Angeles"),
    ("peru", "America/Lima"),
    ("peru time", "America/Lima"),
    ("peru standard time", "America/Lima"),
    ("hora de peru", "America/Lima"),
    ("hora de perú", "America/Lima"),
];

/// Step 5: a common alias of an IANA name.
pub fn alias(tzid: &str) -> Option<Tz> {
    let name = tzid.trim().trim_matches('"').trim();
    let lower = name.to_lowercase();
    if let Some((_, iana_name)) = REGION_NAMES.iter().find(|(k, _)| *k == lower) {
        return iana_name.parse().ok();
    }
    // tzdata's own directories of the same zones.
    for prefix in ["posix/", "right/"] {
        if let Some(rest) = lower.strip_prefix(prefix) {
            return iana(rest).ok();
        }
    }
    // `US-Eastern`, `America-Chicago`, `America-Argentina-Buenos_Aires`:
    // a `-` where IANA has `/`, only between the area and a known name.
    let area = name.split('-').next().unwrap_or_default();
    let areas = [
        "Africa",
        "America",
        "Antarctica",
        "Asia",
        "Atlantic",
        "Australia",
        "Canada",
        "Europe",
        "Indian",
        "Mexico",
        "Pacific",
        "US",
    ];
    if areas.iter().any(|a| a.eq_ignore_ascii_case(area)) && name.len() > area.len() + 1 {
        let rest = &name[area.len() + 1..];
        for candidate in [
            format!("{area}/{rest}"),
            format!("{area}/{}", rest.replacen('-', "/", 1)),
        ] {
            if let Ok(z) = iana(&candidate) {
                return Some(z);
            }
        }
    }
    None
}

/// Steps 1–3 of the module's order.
pub fn by_name(name: &str, country: &str) -> Option<Tz> {
    let name = name.trim().trim_matches('"');
    if let Ok(z) = iana(name) {
        return Some(z);
    }
    // Vendor prefixes: try each suffix after a '/'.
    if name.starts_with('/') {
        let mut rest = name;
        while let Some(i) = rest.find('/') {
            rest = &rest[i + 1..];
            if let Ok(z) = iana(rest) {
                return Some(z);
            }
        }
    }
    let windows =
        localzone::win_zone_to_iana(name, Some(country)).or_else(|| localzone::win_zone_to_iana(name, Some("001")));
    if let Some(z) = windows.and_then(|n| n.parse().ok()) {
        return Some(z);
    }
    display_name(name, country)
}

/// An IANA name, in any letter case.
fn iana(name: &str) -> Result<Tz, ()> {
    name.parse::<Tz>().or_else(|_| {
        chrono_tz::TZ_VARIANTS
            .iter()
            .find(|z| z.name().eq_ignore_ascii_case(name))
            .copied()
            .ok_or(())
    })
}

/// `(UTC-05:00) Bogota, Lima, Quito` → the listed city in the configured
/// country (`America/Lima` for PE), else the first city that is the last
/// part of an IANA name (`America/Bogota`). The cities share the offset,
/// but not always the daylight-saving rules, and the clinic's own city is
/// the one it would name.
fn display_name(name: &str, country: &str) -> Option<Tz> {
    let rest = name.strip_prefix("(UTC")?.split_once(')')?.1;
    let cities: Vec<Tz> = rest
        .split(',')
        .filter_map(|city| {
            let city = city.trim().replace(' ', "_");
            if city.is_empty() {
                return None;
            }
            chrono_tz::TZ_VARIANTS
                .iter()
                .find(|z| {
                    z.name()
                        .rsplit('/')
                        .next()
                        .is_some_and(|last| last.eq_ignore_ascii_case(&city))
                })
                .copied()
        })
        .collect();
    let in_country = |z: &Tz| {
        localzone::iana_to_win_zone(z.name())
            .and_then(|(windows, _)| localzone::win_zone_to_iana(windows, Some(country)))
            == Some(z.name())
    };
    cities.iter().find(|z| in_country(z)).or(cities.first()).copied()
}

/// A zone from a `VTIMEZONE`'s observances (RFC 5545 §3.6.5): each one's
/// `DTSTART` (local time in its `TZOFFSETFROM`) and `RRULE`/`RDATE`
/// onsets, expanded through 2100.
fn defined(tzid: &str, vtz: &Comp) -> Result<Defined, String> {
    let mut onsets = Vec::new();
    for obs in vtz
        .children
        .iter()
        .filter(|c| c.name == "STANDARD" || c.name == "DAYLIGHT")
    {
        let what = |p: &str| format!("VTIMEZONE {tzid:?} {}: {p}", obs.name);
        let from = offset(obs.text("TZOFFSETFROM").as_deref()).ok_or_else(|| what("bad TZOFFSETFROM"))?;
        let to = offset(obs.text("TZOFFSETTO").as_deref()).ok_or_else(|| what("bad TZOFFSETTO"))?;
        // A date alone (`DTSTART;VALUE=DATE:20170101`) starts at midnight.
        let start = obs
            .text("DTSTART")
            .and_then(|s| {
                NaiveDateTime::parse_from_str(&s, "%Y%m%dT%H%M%S")
                    .or_else(|_| {
                        chrono::NaiveDate::parse_from_str(&s, "%Y%m%d").map(|d| d.and_time(chrono::NaiveTime::MIN))
                    })
                    .ok()
            })
            .ok_or_else(|| what("bad DTSTART"))?;
        let mut locals = vec![start];
        if let Some(rule) = obs.text("RRULE") {
            let end = NaiveDateTime::parse_from_str("21000101T000000", "%Y%m%dT%H%M%S").unwrap_or(start);
            // Onsets before 1970 matter to no appointment.
            let from = NaiveDateTime::parse_from_str("19700101T000000", "%Y%m%dT%H%M%S").unwrap_or(start);
            locals = recur::expand(&rule, start, &[], from.max(start), end, 400)
                .map_err(|e| what(&e))?
                .0;
            if locals.is_empty() {
                locals.push(start);
            }
        }
        for rdate in obs.all("RDATE").flat_map(|p| p.value.split(',')) {
            if let Ok(t) = NaiveDateTime::parse_from_str(rdate.trim(), "%Y%m%dT%H%M%S") {
                locals.push(t);
            }
        }
        onsets.extend(locals.into_iter().map(|local| Onset {
            utc: local - Duration::seconds(from.into()),
            from,
            to,
        }));
    }
    if onsets.is_empty() {
        return Err(format!("VTIMEZONE {tzid:?} has no STANDARD or DAYLIGHT observance"));
    }
    onsets.sort_by_key(|o| o.utc);
    Ok(Defined {
        tzid: tzid.to_string(),
        onsets,
    })
}

/// `-0500`, `+0530`, `+013000` → seconds east of UTC.
fn offset(s: Option<&str>) -> Option<i32> {
    let s = s?.trim();
    let (sign, digits) = match s.as_bytes().first()? {
        b'+' => (1, &s[1..]),
        b'-' => (-1, &s[1..]),
        _ => return None,
    };
    if !(digits.len() == 4 || digits.len() == 6) || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| digits.get(r).and_then(|d| d.parse::<i32>().ok());
    let secs = n(0..2)? * 3600 + n(2..4)? * 60 + if digits.len() == 6 { n(4..6)? } else { 0 };
    Some(sign * secs)
}

#[cfg(test)]
#[path = "tz_tests.rs"]
mod tests;
