//! Lines of a `VEVENT` that could not be read: which refuse the event and
//! which are skipped with a note (docs/design.md, "Calendar imports").

use super::event::{Ctx, Refusal, refusal};
use super::lines::Comp;

/// The properties a `VEVENT` is read from: a line of one of them that
/// cannot be read refuses the event (a guess could be a wrong hour or a
/// wrong patient). `ATTENDEE` is one: a broken one may be the attendee
/// with the `tel:` URI. A line too broken to say which property it is
/// cannot be one we would read.
const USED: &[&str] = &[
    "UID",
    "DTSTART",
    "SEQUENCE",
    "STATUS",
    "RRULE",
    "RDATE",
    "EXDATE",
    "RECURRENCE-ID",
    "SUMMARY",
    "LOCATION",
    "ATTENDEE",
    "X-UNAVEZ-PHONE",
    "X-UNAVEZ-NAME",
];

fn is_used(ctx: &Ctx<'_>, prop: &str) -> bool {
    USED.contains(&prop)
        || ctx
            .opts
            .config
            .phone_properties
            .iter()
            .any(|p| p.eq_ignore_ascii_case(prop))
}

/// A component with lines that could not be read is refused by those of
/// properties it is read from, or by a broken nesting. The other lines
/// (`X-APPLE-…` pieces of a broken fold, vendor properties, `DTEND`,
/// alarms) are skipped with a note naming file:line, as python
/// `icalendar` and `ical.js` skip them.
pub(super) fn unreadable_lines(ctx: &Ctx<'_>, c: &Comp, notes: &mut Vec<String>) -> Result<(), Vec<Refusal>> {
    let mut refused = Vec::new();
    for e in &c.errors {
        match e.prop.as_deref() {
            // A broken nesting: the event may have lost lines.
            None if e.reason.starts_with("BEGIN:") => refused.push(refusal(e.line, "line", e.reason.clone())),
            Some(p) if is_used(ctx, p) => refused.push(refusal(e.line, "line", e.reason.clone())),
            _ => notes.push(format!(
                "{}:{}: line skipped ({}); unavez does not read it",
                ctx.file, e.line, e.reason
            )),
        }
    }
    for child in &c.children {
        skipped_lines(ctx.file, child, notes);
    }
    if refused.is_empty() { Ok(()) } else { Err(refused) }
}

/// Notes for the unreadable lines of a component that is not an event
/// (`VALARM`, `VTIMEZONE`, the calendar itself) and of its children.
fn skipped_lines(file: &str, c: &Comp, notes: &mut Vec<String>) {
    for e in &c.errors {
        notes.push(format!("{file}:{}: line skipped in {} ({})", e.line, c.name, e.reason));
    }
    for child in &c.children {
        skipped_lines(file, child, notes);
    }
}
