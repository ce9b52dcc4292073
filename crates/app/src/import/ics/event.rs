//! One `VEVENT` (and, for a recurring one, its occurrences and overrides)
//! → booking events.

use chrono::{DateTime, Duration, FixedOffset, NaiveDate, NaiveDateTime, Utc};
use sha2::{Digest, Sha256};

use super::lines::{Comp, Prop};
use super::recur::{self, Series};
use super::tz::{Zone, Zones};
use super::unreadable::unreadable_lines;
use super::{Options, Parsed, phone};
use crate::domain::event::{BookingEvent, MAX_REF_CHARS, MAX_VERSION};
use crate::domain::key::check_ref;
use crate::domain::mask::mask_phone;
use crate::import::{Row, RowError};

/// What every VEVENT of one file shares.
pub struct Ctx<'a> {
    pub file: &'a str,
    pub zones: &'a Zones<'a>,
    /// The zone of floating times (`X-WR-TIMEZONE`, else the configured one).
    pub floating: &'a Zone,
    pub opts: &'a Options<'a>,
}

/// Why a VEVENT (or one occurrence) is refused: `(line, field, reason)`.
pub(super) type Refusal = (usize, String, String);

pub(super) fn refusal(line: usize, field: &str, reason: impl Into<String>) -> Refusal {
    (line, field.to_string(), reason.into())
}

/// A `DTSTART`-like value.
enum When {
    AllDay(NaiveDate),
    At(NaiveDateTime, Zone),
}

/// Reads a date-time property: `VALUE=DATE`, UTC `…Z`, `TZID=…`, floating.
fn when(ctx: &Ctx<'_>, p: &Prop, value: &str) -> Result<When, String> {
    let v = value.trim();
    let date_only = p.param("VALUE").is_some_and(|x| x.eq_ignore_ascii_case("DATE")) || v.len() == 8;
    if date_only {
        return NaiveDate::parse_from_str(v, "%Y%m%d")
            .map(When::AllDay)
            .map_err(|_| format!("unparsable date {v:?} (expected YYYYMMDD)"));
    }
    let naive = |s: &str| {
        NaiveDateTime::parse_from_str(s, "%Y%m%dT%H%M%S")
            .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y%m%dT%H%M"))
            .map_err(|_| format!("unparsable {} {v:?} (expected YYYYMMDDTHHMMSS[Z])", p.name))
    };
    if let Some(utc) = v.strip_suffix(['Z', 'z']) {
        return Ok(When::At(naive(utc)?, Zone::Iana(chrono_tz::UTC)));
    }
    let t = naive(v)?;
    match p.param("TZID") {
        Some(id) => Ok(When::At(t, ctx.zones.resolve(id)?)),
        None => Ok(When::At(t, ctx.floating.clone())),
    }
}

/// A `When` as a wall-clock time of `zone` (an all-day value takes the
/// series' time of day: `EXDATE;VALUE=DATE` removes that day's occurrence).
fn local_in(w: &When, zone: &Zone, time_of_day: NaiveDateTime) -> Option<NaiveDateTime> {
    match w {
        When::AllDay(d) => Some(d.and_time(time_of_day.time())),
        When::At(t, z) if z.name() == zone.name() => Some(*t),
        When::At(t, z) => z.localize(*t).ok().map(|i| zone.to_local(i.with_timezone(&Utc))),
    }
}

/// Who the appointment is for, and what it is.
#[derive(Debug, Default, Clone)]
struct Who {
    phone: Option<String>,
    /// `(property, line)` the phone was read from.
    phone_from: Option<(String, usize)>,
    name: Option<String>,
    service: Option<String>,
    location: Option<String>,
}

/// Phone (explicit properties first, then text), name and service.
fn who(ctx: &Ctx<'_>, c: &Comp) -> Result<Who, Refusal> {
    let attendee = c
        .all("ATTENDEE")
        .find(|p| p.value.trim().to_ascii_lowercase().starts_with("tel:"));
    let explicit_name = c
        .text("X-UNAVEZ-NAME")
        .or_else(|| attendee.and_then(|p| p.param("CN")).map(str::to_string));
    let country = ctx.opts.config.country();
    let summary = c.text("SUMMARY");
    let mut w = Who {
        location: c.text("LOCATION"),
        ..Who::default()
    };
    let explicit = c
        .prop("X-UNAVEZ-PHONE")
        .map(|p| (p, p.value.trim().to_string()))
        .or_else(|| attendee.map(|p| (p, p.value.trim()[4..].to_string())));
    if let Some((p, raw)) = explicit {
        // Kept as written when it is no phone, so the event names it.
        let cleaned: String = raw
            .chars()
            .filter(|ch| !matches!(ch, '-' | '.' | '(' | ')' | ' '))
            .collect();
        w.phone = Some(phone::normalize(&raw, country).unwrap_or(cleaned));
        w.phone_from = Some((p.name.clone(), p.line));
        w.name = explicit_name;
        w.service = summary;
        return Ok(w);
    }
    let mut found: Vec<(String, usize, phone::Found)> = Vec::new();
    for name in &ctx.opts.config.phone_properties {
        let name = name.to_ascii_uppercase();
        if let (Some(text), Some(p)) = (c.text(&name), c.prop(&name)) {
            for f in phone::find(&text, country) {
                found.push((name.clone(), p.line, f));
            }
        }
    }
    if let Some((first_prop, _, first)) = found.first()
        && let Some((other_prop, line, other)) = found.iter().find(|(_, _, f)| f.phone != first.phone)
    {
        return Err(refusal(
            *line,
            "phone",
            format!(
                "two different phones: {} in {first_prop} and {} in {other_prop}; keep one",
                mask_phone(&first.phone),
                mask_phone(&other.phone)
            ),
        ));
    }
    let Some((prop, line, f)) = found.into_iter().next() else {
        w.name = explicit_name;
        w.service = summary;
        return Ok(w);
    };
    w.phone = Some(f.phone.clone());
    let text_of = |name: &str| c.text(name).unwrap_or_default();
    let summary_text = match prop.as_str() {
        "SUMMARY" => phone::without(&text_of("SUMMARY"), f.span),
        _ => summary.clone().unwrap_or_default(),
    };
    if prop == "LOCATION" {
        let rest = phone::segments(&phone::without(&text_of("LOCATION"), f.span)).join(" – ");
        w.location = Some(rest).filter(|s| !s.is_empty());
    }
    let mut pieces = phone::segments(&summary_text).into_iter();
    match explicit_name {
        Some(n) => {
            w.name = Some(n);
            w.service = Some(pieces.collect::<Vec<_>>().join(" – ")).filter(|s| !s.is_empty());
        }
        None => {
            w.name = pieces.next();
            w.service = Some(pieces.collect::<Vec<_>>().join(" – ")).filter(|s| !s.is_empty());
        }
    }
    w.phone_from = Some((prop, line));
    Ok(w)
}

/// The event kind a STATUS names.
fn kind(c: &Comp) -> Result<(&'static str, String), Refusal> {
    let status = c.text("STATUS").unwrap_or_default().to_ascii_uppercase();
    match status.as_str() {
        "CANCELLED" => Ok(("appointment.cancelled", status)),
        "" | "CONFIRMED" | "TENTATIVE" => Ok(("appointment.scheduled", status)),
        other => Err(refusal(
            c.prop("STATUS").map(|p| p.line).unwrap_or(c.begin),
            "status",
            format!("unknown STATUS {other:?} (expected CONFIRMED, TENTATIVE or CANCELLED)"),
        )),
    }
}

/// Handles one VEVENT that is not an override, with its overrides.
pub fn vevent(ctx: &Ctx<'_>, c: &Comp, overrides: &[&Comp], out: &mut Parsed) {
    if let Err(errs) = try_vevent(ctx, c, overrides, out) {
        refuse(ctx, c, errs, out);
    }
}

fn refuse(ctx: &Ctx<'_>, c: &Comp, errs: Vec<Refusal>, out: &mut Parsed) {
    out.counts.refused += 1;
    for (line, field, reason) in errs {
        out.errors.push(RowError {
            file: ctx.file.to_string(),
            line,
            field,
            reason,
            raw: c.raw.clone(),
        });
    }
}

fn try_vevent(ctx: &Ctx<'_>, c: &Comp, overrides: &[&Comp], out: &mut Parsed) -> Result<(), Vec<Refusal>> {
    unreadable_lines(ctx, c, &mut out.notes)?;
    let mut errors = Vec::new();
    let uid = c.text("UID");
    if uid.is_none() {
        errors.push(refusal(c.begin, "ref", "missing (UID)"));
    }
    let (kind, status) = kind(c).map_err(|e| vec![e])?;
    let start = match c.prop("DTSTART") {
        Some(p) => match when(ctx, p, &p.value) {
            Ok(When::AllDay(_)) => {
                out.counts.skipped_all_day += 1;
                out.notes.push(format!(
                    "{}:{}: all-day event skipped (a holiday or blocked day is not an appointment)",
                    ctx.file, c.begin
                ));
                return Ok(());
            }
            Ok(When::At(t, z)) => Some((t, z, p.line)),
            Err(e) => {
                errors.push(refusal(p.line, "starts_at", e));
                None
            }
        },
        None if kind == "appointment.scheduled" => {
            errors.push(refusal(c.begin, "starts_at", "missing (DTSTART)"));
            None
        }
        None => None,
    };
    let who = match who(ctx, c) {
        Ok(w) => w,
        Err(e) if kind == "appointment.scheduled" => {
            errors.push(e);
            Who::default()
        }
        Err(_) => Who::default(),
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let uid = uid.unwrap_or_default();
    let recurring = c.prop("RRULE").is_some() || c.prop("RDATE").is_some();
    match start {
        Some((t, zone, _)) if recurring => series(ctx, c, &uid, (t, &zone), &who, overrides, out),
        _ => {
            let starts_at = match &start {
                Some((t, z, line)) => Some(z.localize(*t).map_err(|e| vec![refusal(*line, "starts_at", e)])?),
                None => None,
            };
            // An occurrence whose series is not in the file keeps the
            // reference it has when the series is (no version, as any
            // occurrence).
            let orphan = orphan_ref(ctx, c, &uid)?;
            let version = if orphan.is_some() { None } else { sequence(c)? };
            let id = match version {
                Some(seq) => format!("{uid}|{seq}|{status}"),
                None => content_identity(&uid, orphan.as_deref().unwrap_or(""), &status, starts_at, &who),
            };
            let reference = orphan.unwrap_or_else(|| uid_to_ref(&uid));
            let ev = build(c, &reference, &id, kind, starts_at, version.map(|s| s + 1), &who)?;
            push(out, c, ev);
            Ok(())
        }
    }
}

/// The occurrence reference of a `VEVENT` with a `RECURRENCE-ID` whose
/// recurring `VEVENT` is not in the file (an invitation to one occurrence,
/// a series whose other occurrences were deleted); `None` without one.
fn orphan_ref(ctx: &Ctx<'_>, c: &Comp, uid: &str) -> Result<Option<String>, Vec<Refusal>> {
    let Some(p) = c.prop("RECURRENCE-ID") else {
        return Ok(None);
    };
    let unreadable = |e: String| vec![refusal(p.line, "rrule", format!("unreadable RECURRENCE-ID: {e}"))];
    let original = match when(ctx, p, &p.value).map_err(unreadable)? {
        When::AllDay(d) => d.and_time(chrono::NaiveTime::MIN).and_utc(),
        When::At(t, z) => z.localize(t).map_err(unreadable)?.with_timezone(&Utc),
    };
    Ok(Some(occurrence_ref(&uid_to_ref(uid), uid, original)))
}

fn push(out: &mut Parsed, c: &Comp, event: BookingEvent) {
    out.rows.push(Row {
        line: c.begin,
        event,
        raw: c.raw.clone(),
    });
}

fn sequence(c: &Comp) -> Result<Option<i64>, Vec<Refusal>> {
    let Some(p) = c.prop("SEQUENCE") else {
        return Ok(None);
    };
    match p.value.trim().parse::<i64>() {
        Ok(n) if (0..MAX_VERSION).contains(&n) => Ok(Some(n)),
        _ => Err(vec![refusal(
            p.line,
            "version",
            format!("SEQUENCE {:?} is not a non-negative integer", p.value.trim()),
        )]),
    }
}

/// The id of an event without a `SEQUENCE` follows its content, so an
/// edited event is a new event and a re-export a duplicate.
fn content_identity(uid: &str, rid: &str, status: &str, at: Option<DateTime<FixedOffset>>, w: &Who) -> String {
    let o = |v: &Option<String>| v.clone().unwrap_or_default();
    format!(
        "{uid}|{rid}|{status}|{}|{}|{}|{}|{}",
        at.map(|t| t.to_rfc3339()).unwrap_or_default(),
        o(&w.phone),
        o(&w.name),
        o(&w.service),
        o(&w.location)
    )
}

/// The occurrences of a recurring VEVENT between now and the horizon,
/// with its overrides (`RECURRENCE-ID`) and exclusions (`EXDATE`).
fn series(
    ctx: &Ctx<'_>,
    c: &Comp,
    uid: &str,
    (start, zone): (NaiveDateTime, &Zone),
    who: &Who,
    overrides: &[&Comp],
    out: &mut Parsed,
) -> Result<(), Vec<Refusal>> {
    let now = ctx.opts.now;
    let horizon = now + Duration::days(ctx.opts.config.recurrence_days.into());
    // An unreadable EXDATE refuses the series (a removed occurrence would
    // be sent); an unreadable RDATE only loses the occurrence it adds.
    let mut skipped = Vec::new();
    let mut dates = |name: &str| -> Result<Vec<NaiveDateTime>, Vec<Refusal>> {
        let mut out = Vec::new();
        for p in c.all(name) {
            // A PERIOD (`start/end` or `start/duration`) starts at its start.
            for v in p.value.split(',').filter_map(|v| v.split('/').next()) {
                if v.trim().is_empty() {
                    continue;
                }
                match when(ctx, p, v) {
                    Ok(w) => out.extend(local_in(&w, zone, start)),
                    Err(e) if name == "RDATE" => {
                        skipped.push(format!("{}:{}: RDATE value skipped ({e})", ctx.file, p.line))
                    }
                    Err(e) => return Err(vec![refusal(p.line, "rrule", e)]),
                }
            }
        }
        Ok(out)
    };
    let (exdates, rdates) = (dates("EXDATE")?, dates("RDATE")?);
    out.notes.append(&mut skipped);
    let rule_prop = c.prop("RRULE");
    // RDATE alone: a rule that yields only DTSTART.
    let rule = rule_prop
        .map(|p| p.value.clone())
        .unwrap_or_else(|| "FREQ=DAILY;COUNT=1".into());
    let s = Series {
        rule: &rule,
        start,
        rdates: &rdates,
        exdates: &exdates,
    };
    let to_local = |utc: NaiveDateTime| zone.to_local(utc.and_utc());
    let (mut locals, more) = recur::expand_with(&s, zone.to_local(now), zone.to_local(horizon), 1000, &to_local)
        .map_err(|e| vec![refusal(rule_prop.map(|p| p.line).unwrap_or(c.begin), "rrule", e)])?;
    let base = uid_to_ref(uid);
    let (kind, status) = kind(c).map_err(|e| vec![e])?;
    let mut emitted = 0;
    for o in overrides {
        let Some(rid) = o
            .prop("RECURRENCE-ID")
            .and_then(|p| when(ctx, p, &p.value).ok())
            .and_then(|w| local_in(&w, zone, start))
        else {
            refuse(ctx, o, vec![refusal(o.begin, "rrule", "unreadable RECURRENCE-ID")], out);
            continue;
        };
        locals.retain(|l| *l != rid);
        match occurrence_override(ctx, o, (uid, &base), (rid, zone), who, (now, horizon), &mut out.notes) {
            Ok(Some(ev)) => {
                push(out, o, ev);
                emitted += 1;
            }
            Ok(None) => {}
            Err(errs) => refuse(ctx, o, errs, out),
        }
    }
    for local in locals {
        let at = zone
            .localize(local)
            .map_err(|e| vec![refusal(c.begin, "starts_at", e)])?;
        let rid = occurrence_ref(&base, uid, at.with_timezone(&Utc));
        let id = content_identity(uid, &rid, &status, Some(at), who);
        push(out, c, build(c, &rid, &id, kind, Some(at), None, who)?);
        emitted += 1;
    }
    out.counts.occurrences += emitted;
    if emitted == 0 {
        let (what, counter) = if more {
            (
                "its next occurrence is beyond the horizon ([import] recurrence_days)",
                &mut out.counts.skipped_beyond_horizon,
            )
        } else {
            ("every occurrence is past", &mut out.counts.skipped_past)
        };
        *counter += 1;
        out.notes
            .push(format!("{}:{}: recurring event skipped: {what}", ctx.file, c.begin));
    }
    Ok(())
}

/// One override: `None` when its (possibly moved) start is outside the window.
fn occurrence_override(
    ctx: &Ctx<'_>,
    o: &Comp,
    (uid, base): (&str, &str),
    (rid, zone): (NaiveDateTime, &Zone),
    master: &Who,
    (now, horizon): (DateTime<Utc>, DateTime<Utc>),
    notes: &mut Vec<String>,
) -> Result<Option<BookingEvent>, Vec<Refusal>> {
    unreadable_lines(ctx, o, notes)?;
    let (kind, status) = kind(o).map_err(|e| vec![e])?;
    let start = match o.prop("DTSTART") {
        Some(p) => match when(ctx, p, &p.value).map_err(|e| vec![refusal(p.line, "starts_at", e)])? {
            When::AllDay(_) => return Ok(None),
            When::At(t, z) => z.localize(t).map_err(|e| vec![refusal(p.line, "starts_at", e)])?,
        },
        None => zone.localize(rid).map_err(|e| vec![refusal(o.begin, "starts_at", e)])?,
    };
    let original = zone.localize(rid).map_err(|e| vec![refusal(o.begin, "rrule", e)])?;
    let utc = start.with_timezone(&Utc);
    let in_window = utc >= now && utc <= horizon;
    if !in_window && kind == "appointment.scheduled" {
        return Ok(None);
    }
    let mut w = match who(ctx, o) {
        Ok(w) => w,
        Err(e) if kind == "appointment.scheduled" => return Err(vec![e]),
        Err(_) => Who::default(),
    };
    if w.phone.is_none() {
        w.phone = master.phone.clone();
        w.phone_from = master.phone_from.clone();
        w.name = w.name.or_else(|| master.name.clone());
    }
    let reference = occurrence_ref(base, uid, original.with_timezone(&Utc));
    let id = content_identity(uid, &reference, &status, Some(start), &w);
    build(o, &reference, &id, kind, Some(start), None, &w).map(Some)
}

/// `{ref}/{original start in UTC}`: stable across exports, free of long
/// digit runs (refs refuse 7+ digits as a possible phone).
fn occurrence_ref(base: &str, uid: &str, original: DateTime<Utc>) -> String {
    let suffix = original.format("/%Y-%m-%dT%H%MZ").to_string();
    if base.len() + suffix.len() <= MAX_REF_CHARS {
        return format!("{base}{suffix}");
    }
    format!("{}{suffix}", hashed_ref(uid))
}

/// Builds and validates one booking event; errors name the field and the
/// line of the property it came from.
fn build(
    c: &Comp,
    reference: &str,
    identity: &str,
    kind: &str,
    starts_at: Option<DateTime<FixedOffset>>,
    version: Option<i64>,
    w: &Who,
) -> Result<BookingEvent, Vec<Refusal>> {
    if kind == "appointment.scheduled" && w.phone.is_none() {
        return Err(vec![refusal(
            c.begin,
            "phone",
            "no phone found (X-UNAVEZ-PHONE, ATTENDEE tel:, or a phone typed in the text properties of [import] phone_properties)",
        )]);
    }
    let digest = Sha256::digest(identity.as_bytes());
    let note = w.phone_from.as_ref().map(|(p, _)| format!("phone from {p}"));
    let obj = serde_json::json!({
        "event_id": format!("ics-{}", &hex::encode(digest)[..24]),
        "type": kind,
        "ref": reference,
        "version": version,
        "starts_at": starts_at,
        "contact": w.phone.as_ref().map(|p| serde_json::json!({"phone": p, "name": w.name})),
        "service": w.service,
        "location": w.location,
        "note": note,
    });
    let line_of = |name: &str| c.prop(name).map(|p| p.line).unwrap_or(c.begin);
    BookingEvent::from_value(obj).map_err(|errs| {
        errs.into_iter()
            .map(|e| {
                let (field, line) = match e.field.as_str() {
                    "contact.name" => ("name".to_string(), c.begin),
                    f if f.starts_with("contact") => (
                        "phone".to_string(),
                        w.phone_from.as_ref().map(|(_, l)| *l).unwrap_or(c.begin),
                    ),
                    "service" => ("service".to_string(), line_of("SUMMARY")),
                    "location" => ("location".to_string(), line_of("LOCATION")),
                    f => (f.to_string(), c.begin),
                };
                (line, field, e.reason)
            })
            .collect()
    })
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
    let candidate = format!("{}-{}", cleaned.trim_matches('-'), &letters(uid)[..8]);
    if cleaned.trim_matches('-').is_empty() || cleaned.len() > 48 || check_ref(&candidate).is_err() {
        return hashed_ref(uid);
    }
    candidate
}

fn letters(uid: &str) -> String {
    Sha256::digest(uid.as_bytes())
        .iter()
        .flat_map(|b| [b >> 4, b & 15])
        .map(|n| char::from(b'a' + n))
        .collect()
}

#[cfg(test)]
pub(super) fn letters_for_test(uid: &str) -> String {
    letters(uid)
}

fn hashed_ref(uid: &str) -> String {
    format!("ics-{}", &letters(uid)[..16])
}
