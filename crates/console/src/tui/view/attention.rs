//! Atención and a Tablero counter's rows: the work queue's table, with
//! the patient's name, a human time and what to do next.

use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState};

use super::{HEAD, SELECTED, page_info, short_purpose};
use crate::domain::attention::Situation;
use crate::domain::guard::ResendAsk;
use crate::domain::mask::mask_phone;
use crate::domain::text::inert;
use crate::i18n::fill;
use crate::store::{AttentionRow, RowKind};
use crate::tui::app::{App, age, guard};
use crate::tui::keys::Screen;

#[allow(clippy::too_many_arguments)]
pub(super) fn draw_attention_like(
    f: &mut Frame<'_>,
    app: &App,
    area: Rect,
    rows: &[AttentionRow],
    selected: usize,
    total: i64,
    offset: u32,
    loaded: bool,
) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(list_title(app))
        .title_bottom(page_info(app, offset, rows.len(), total));
    if rows.is_empty() {
        let msg = empty_message(app, loaded);
        f.render_widget(Paragraph::new(msg).style(app.palette.dim()).block(block), area);
        return;
    }
    let columns = Columns::for_width(area.width);
    let body = rows.iter().map(|r| columns.row(app, r));
    let table = Table::new(body, columns.widths())
        .header(columns.header(app))
        .block(block)
        .row_highlight_style(SELECTED)
        .column_spacing(1);
    let mut state = TableState::default().with_selected(Some(selected));
    f.render_stateful_widget(table, area, &mut state);
}

/// A Tablero counter's day and what it counts; else Atención (handled or
/// open).
fn list_title(app: &App) -> String {
    let t = app.t;
    if app.screen == Screen::Counter {
        app.counter_query
            .as_ref()
            .map(|q| {
                let what = q
                    .reason
                    .as_deref()
                    .map(|r| t.reason(r))
                    .unwrap_or_else(|| q.states.first().map(|s| t.state(s)).unwrap_or(""));
                format!(" {} · {} ", t.words.day(q.day.date(), app.now, app.tz), inert(what))
            })
            .unwrap_or_default()
    } else if app.calls.list && !app.show_handled {
        format!(" {} · {} ", t.screen_attention, t.call_list_title)
    } else if app.show_handled {
        format!(" {} · {} ", t.screen_attention, t.handled_title)
    } else {
        format!(" {} ", t.screen_attention)
    }
}

/// Why the list has no rows: still loading, the filter, no handled cases,
/// or nothing at all.
fn empty_message(app: &App, loaded: bool) -> &'static str {
    let t = app.t;
    if !loaded {
        t.loading
    } else if !app.filter.is_empty() {
        t.no_results
    } else if app.show_handled && app.screen == Screen::Attention {
        t.handled_none
    } else {
        t.empty_list
    }
}

/// Which columns fit. Narrow terminals (80 columns) keep who, when, the
/// phone's last digits, the state and what to do; wider ones add the age
/// (100), the message (120) and the last evidence (140).
struct Columns {
    medium: bool,
    message: bool,
    wide: bool,
    name_width: u16,
}

impl Columns {
    fn for_width(width: u16) -> Columns {
        let medium = width >= 100;
        Columns {
            medium,
            message: width >= 120,
            wide: width >= 140,
            name_width: if medium { 16 } else { 10 },
        }
    }

    fn header(&self, app: &App) -> Row<'static> {
        let t = app.t;
        let mut header = vec![t.col_commitment, t.col_time, t.col_name, t.col_phone];
        if self.message {
            header.push(t.col_purpose);
        }
        header.push(t.col_state);
        if self.medium {
            header.push(t.col_age);
        }
        header.push(t.col_next);
        if self.wide {
            header.push(t.col_evidence);
        }
        Row::new(header).style(HEAD)
    }

    /// Fixed columns keep their width (a masked phone must show its last
    /// digits even at 80 columns); the last column takes what is left.
    fn widths(&self) -> Vec<Constraint> {
        let mut widths = vec![
            Constraint::Length(10),
            Constraint::Length(12),
            Constraint::Length(self.name_width),
            Constraint::Length(15),
        ];
        if self.message {
            widths.push(Constraint::Length(14));
        }
        widths.push(Constraint::Length(11));
        if self.medium {
            widths.push(Constraint::Length(6));
        }
        if self.wide {
            // The next step's words are short; the evidence takes the rest.
            widths.push(Constraint::Length(16));
        }
        widths.push(Constraint::Fill(1));
        widths
    }

    fn row(&self, app: &App, r: &AttentionRow) -> Row<'static> {
        let t = app.t;
        let when = r
            .starts_at
            .map(|s| human_time(app, s))
            .unwrap_or_else(|| t.detail_none.into());
        let phone = r.phone.as_deref().map(mask_phone).unwrap_or_default();
        let name = r
            .name
            .as_deref()
            .map(|n| short_name(&inert(n), self.name_width.into()))
            .unwrap_or_default();
        let reference = match r.commitment_ref.as_str() {
            "" => t.detail_none.to_string(),
            c => inert(c).into_owned(),
        };
        let mut cells = vec![
            Cell::from(reference),
            Cell::from(when),
            Cell::from(name),
            Cell::from(inert(&phone).into_owned()),
        ];
        if self.message {
            cells.push(Cell::from(inert(&purpose_text(app, r)).into_owned()));
        }
        cells.push(state_cell(app, r));
        if self.medium {
            cells.push(Cell::from(age(app.now, r.since)));
        }
        cells.push(Cell::from(next_text(app, r)));
        if self.wide {
            cells.push(Cell::from(evidence_text(app, r)));
        }
        Row::new(cells)
    }
}

/// The message column: the intention's purpose, or what kind of case the
/// row is.
fn purpose_text(app: &App, r: &AttentionRow) -> String {
    let t = app.t;
    match r.kind {
        RowKind::RescheduleRequest => t.reschedule_request.to_string(),
        RowKind::RefusedEvent => t.refused_event.to_string(),
        RowKind::ChannelEvent => t.channel_event.to_string(),
        RowKind::Intention => short_purpose(&r.purpose),
    }
}

/// The next-step column: who handled it and when (handled view), or what
/// to do now.
fn next_text(app: &App, r: &AttentionRow) -> String {
    let t = app.t;
    if let Some(line) = super::calls::pending_on(app, r) {
        return line;
    }
    if let Some(line) = super::calls::tries_text(app, r) {
        return line;
    }
    match (&r.handled, app.show_handled && app.screen == Screen::Attention) {
        (Some(h), true) => {
            let by = fill(
                t.handled_by,
                &[("when", &human_time(app, h.at)), ("who", &inert(&h.operator))],
            );
            // Why, when known: a call's outcome in words, else the reason.
            match app.calls.reasons.get(&h.action_id) {
                Some(r) => {
                    let why =
                        crate::domain::call::CallOutcome::from_stored(r).map_or(r.as_str(), |o| t.call_outcome(o));
                    format!("{by} · {}", inert(why))
                }
                None => by,
            }
        }
        (Some(_), false) if app.screen == Screen::Attention => {
            format!("{} · {}", t.reopened, hint_text(app, r))
        }
        // A channel event's reason is what the technician acts on, in a
        // few words (the state says parked or refused; the technician's
        // guide has the whole story).
        _ if r.kind == RowKind::ChannelEvent => {
            inert(short_reason(app, r.state_reason.as_deref().unwrap_or_default())).into_owned()
        }
        _ => hint_text(app, r),
    }
}

/// What to do now, from the guards of this role on this row, after the
/// front desk's request when there is one (issue 25 §3).
fn hint_text(app: &App, r: &AttentionRow) -> String {
    let t = app.t;
    let step = t.next_step(guard::row_hint(app.role(), r, app.resend_ctx()));
    match guard::parse_ask(r.resend_ask.as_deref()) {
        ResendAsk::Requested { reason, .. } => {
            format!("{} · {step}", inert(&fill(t.ask_requested, &[("reason", &reason)])))
        }
        ResendAsk::Declined { by, reason } => format!(
            "{} · {step}",
            inert(&fill(t.ask_declined, &[("by", &by), ("reason", &reason)]))
        ),
        ResendAsk::None => step.to_string(),
    }
}

/// The evidence column: how many pieces of evidence and the last event.
fn evidence_text(app: &App, r: &AttentionRow) -> String {
    // issue 25 §2: a front-desk row says the signal and who in words; the
    // raw evidence or note is in Detalle's technical view (`e`).
    let plain = r.kind != RowKind::ChannelEvent;
    let last = r.last_event.as_deref().map(|e| say_event(app, e, plain));
    match (&last, r.evidence_count) {
        (Some(e), _) if r.kind == RowKind::ChannelEvent => inert(e).into_owned(),
        // An acknowledged message nobody confirmed delivering: the words
        // first, since the state column only has room for a few.
        (_, n) if r.state == Situation::Unconfirmed => format!(
            "{} · {n} · {}",
            app.t.reason("unconfirmed"),
            inert(last.as_deref().unwrap_or_default())
        ),
        (_, 0) if r.kind == RowKind::Intention => {
            format!("0 · {}", inert(last.as_deref().unwrap_or(app.t.no_evidence)))
        }
        (Some(e), n) => format!("{n} · {}", inert(e)),
        (None, _) => String::new(),
    }
}

/// A name that fits `width`: whole, else `Carlos C.`, else cut with `…`.
pub fn short_name(name: &str, width: usize) -> String {
    if name.chars().count() <= width {
        return name.to_string();
    }
    let mut words = name.split_whitespace();
    if let (Some(first), Some(second)) = (words.next(), words.next()) {
        let initial = second.chars().next().map(|c| format!(" {c}.")).unwrap_or_default();
        let short = format!("{first}{initial}");
        if short.chars().count() <= width {
            return short;
        }
    }
    name.chars().take(width.saturating_sub(1)).chain(['…']).collect()
}

/// An Atención row's last event (`signal (cause): note`, see
/// `AttentionRow::last_event`) with the signal and cause in words.
fn say_event(app: &App, e: &str, plain: bool) -> String {
    let Some((signal, rest)) = e.split_once(" (") else {
        return e.to_string();
    };
    let Some((cause, note)) = rest.split_once(')') else {
        return e.to_string();
    };
    let note = if plain { "" } else { note };
    format!("{} ({}){note}", app.t.signal(signal), app.t.cause(cause))
}

/// A channel event's reason in a few words (the code itself when it has
/// none: the i18n test keeps that from happening).
fn short_reason<'a>(app: &App, code: &'a str) -> &'a str {
    app.t
        .channel_event_reasons
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, l)| *l)
        .unwrap_or(code)
}

/// The state column: the intention's state in words, or a channel event's
/// "apartado" / "rechazado" (in review's colour: a person must look).
fn state_cell(app: &App, r: &AttentionRow) -> Cell<'static> {
    let s = r.state;
    Cell::from(inert(app.t.situation(s)).into_owned()).style(app.palette.situation(s))
}

/// A local, human time: `hoy 14:30`, `mañana 09:00`, `ayer 18:10`, else
/// `03/03 10:00`, with the year only when it is not this one (issue 25 §2).
pub fn human_time(app: &App, t: DateTime<Utc>) -> String {
    app.t.words.when(t, app.now, app.tz)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::config::Role;
    use crate::tui::keys::Access;

    #[test]
    fn a_date_outside_the_current_year_shows_its_year() {
        let lima = chrono_tz::America::Lima;
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 13, 0, 0).unwrap();
        let access = Access {
            role: Role::Supervisor,
            read_only: false,
        };
        let app = App::new(crate::i18n::strings(Default::default()), "ana", access, lima, now);
        let at = |y, mo, d| lima.with_ymd_and_hms(y, mo, d, 9, 30, 0).unwrap().with_timezone(&Utc);
        assert_eq!(human_time(&app, at(2026, 12, 20)), "20/12 09:30");
        assert_eq!(human_time(&app, at(2027, 1, 5)), "05/01/2027 09:30");
        assert_eq!(human_time(&app, at(9999, 12, 31)), "31/12/9999 09:30");
        assert_eq!(human_time(&app, at(2025, 11, 30)), "30/11/2025 09:30");
        assert_eq!(
            super::super::local(&app, at(2027, 1, 5), "%d/%m %H:%M:%S"),
            "05/01/2027 09:30:00"
        );
        assert_eq!(super::super::local(&app, at(2027, 1, 5), "%H:%M"), "09:30");
    }
}
