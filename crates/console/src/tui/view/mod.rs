//! Rendering: a pure function of [`App`]. Every word comes from the string
//! table; phones are masked; times are shown in the configured zone and
//! ages are computed from the app's clock (fixed in snapshot tests).
//!
//! `detail.rs` draws Detalle (`panels.rs` its technical view and
//! Reproceso), `overlay.rs` the form, the confirmation and the help,
//! `upcoming.rs` Próximas citas, `patient.rs` the patient card and its
//! chooser.

mod attention;
mod banner;
mod board;
mod calls;
mod detail;
mod feeds;
mod overlay;
mod panels;
mod patient;
mod upcoming;

use attention::{draw_attention_like, human_time, short_name};
use banner::draw_banner;
use board::draw_board;
use detail::draw_detail;
use overlay::{draw_confirm, draw_dispatchers, draw_doctor, draw_error, draw_form, draw_help, draw_log};
use panels::draw_reprocess;
use patient::{draw_chooser, draw_patient};
use upcoming::{draw_upcoming, needs_call, upcoming_status};

use chrono::{DateTime, Duration, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};

use super::app::{App, FlashKind};
use super::keys::{Action, Mode, Screen, visible};
use crate::domain::commitment::{CommitmentKind, CommitmentStatus};
use crate::domain::mask::mask_phone;
use crate::domain::state::IntentionState;
use crate::domain::text::inert;
use crate::i18n::fill;
use crate::ops::OpKind;
use crate::store::UpcomingRow;

/// The smallest terminal the console lays out; below it, a notice.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

pub(super) const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
pub(super) const HEAD: Style = Style::new().add_modifier(Modifier::BOLD);

/// Draws the whole console.
pub fn draw(f: &mut Frame<'_>, app: &App) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let size = format!("{}×{} < {MIN_WIDTH}×{MIN_HEIGHT}", area.width, area.height);
        let text = vec![
            Line::from(app.t.too_small).style(HEAD),
            Line::from(size).style(app.palette.dim()),
            Line::from(fill(app.t.too_small_hint, &[("quit", "q")])).style(app.palette.dim()),
        ];
        f.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    }
    let [header, tabs, body, flash, footer] = Layout::vertical([
        Constraint::Length(1 + app.banner_lines()),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    draw_header(f, app, header);
    draw_tabs(f, app, tabs);
    match app.screen {
        Screen::Attention => draw_attention_like(
            f,
            app,
            body,
            &app.attention.rows,
            app.attention.selected,
            app.attention.total,
            app.attention.offset,
            app.attention.loaded,
        ),
        Screen::Counter => draw_attention_like(
            f,
            app,
            body,
            &app.counter.rows,
            app.counter.selected,
            app.counter.total,
            app.counter.offset,
            app.counter.loaded,
        ),
        Screen::Upcoming => draw_upcoming(f, app, body),
        Screen::Board => draw_board(f, app, body),
        Screen::Detail => draw_detail(f, app, body),
        Screen::Reprocess => draw_reprocess(f, app, body),
        Screen::Patient => draw_patient(f, app, body),
    }
    draw_flash(f, app, flash);
    draw_footer(f, app, footer);
    match app.mode {
        Mode::Form => draw_form(f, app),
        Mode::Confirm | Mode::ConfirmWord => draw_confirm(f, app),
        Mode::Help => draw_help(f, app),
        Mode::Log => draw_log(f, app),
        Mode::Error => draw_error(f, app),
        Mode::Dispatchers => draw_dispatchers(f, app),
        Mode::Doctor => draw_doctor(f, app),
        Mode::Feeds => feeds::draw_feeds(f, app),
        Mode::Chooser => draw_chooser(f, app),
        Mode::CallChooser => calls::draw_call_chooser(f, app),
        _ => {}
    }
    neutralize_controls(f);
    if app.no_color {
        strip_colors(f);
    }
}

/// `NO_COLOR`: every colour goes, the modifiers stay, so the selected row
/// (reversed) and the red states (reversed too) still read as such.
fn strip_colors(f: &mut Frame<'_>) {
    let buf = f.buffer_mut();
    let area = buf.area;
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let cell = &mut buf[(x, y)];
            cell.set_fg(Color::Reset);
            cell.set_bg(Color::Reset);
        }
    }
}

/// The last line of defence: stored text is made inert where it is put on
/// screen, but a cell that still holds a control character would reach the
/// terminal as a command (ratatui writes cell symbols as they are), so it
/// is shown as U+FFFD instead.
fn neutralize_controls(f: &mut Frame<'_>) {
    let buf = f.buffer_mut();
    let area = buf.area;
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let cell = &mut buf[(x, y)];
            if cell.symbol().chars().any(crate::domain::text::is_control) {
                cell.set_symbol("\u{fffd}");
            }
        }
    }
}

/// `t` in the clinic's zone as `fmt` says; a day and month (`%d/%m…`)
/// outside the current year gets its year (`31/12/9999`), so a date a
/// year away never reads as this year's.
fn local(app: &App, t: DateTime<Utc>, fmt: &str) -> String {
    use chrono::Datelike as _;
    let l = t.with_timezone(&app.tz);
    let other_year = l.year() != app.now.with_timezone(&app.tz).year();
    match fmt.strip_prefix("%d/%m") {
        Some(rest) if other_year => l.format(&format!("%d/%m/%Y{rest}")).to_string(),
        _ => l.format(fmt).to_string(),
    }
}

/// How much of the dispatcher's label fits the header: the word
/// "despachador" and, for another process's dispatcher, its host and pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Detail {
    word: bool,
    host: bool,
}

/// The dispatcher's state at a glance: a symbol and a colour each, paused
/// and stopped in red (inverse, so they read without colour too). Without
/// one of its own, the console shows the live dispatcher of another process
/// (from its heartbeat row), or stopped when none beats.
fn dispatcher_span(app: &App, detail: Detail) -> Span<'static> {
    use crate::domain::heartbeat::DispatcherState;
    let t = app.t;
    let d = &app.dispatcher;
    let red = Style::new()
        .fg(app.palette.error)
        .add_modifier(Modifier::BOLD | Modifier::REVERSED);
    let green = Style::new().fg(app.palette.ok);
    let others = d.others.as_deref().unwrap_or_default();
    let more = |n: usize| match n {
        0 => String::new(),
        n => fill(t.dispatcher_more, &[("n", &n.to_string())]),
    };
    let (symbol, label, style) = match (d.running, others.first()) {
        (None, Some(hb)) => {
            let (symbol, state, style) = match hb.state {
                DispatcherState::Paused => ("⏸", t.dispatcher_paused, red),
                _ => ("●", t.dispatcher_running, green),
            };
            let label = match detail.host {
                false => state.to_string(),
                true => fill(
                    t.dispatcher_elsewhere,
                    &[
                        ("state", state),
                        ("host", &inert(&hb.host)),
                        ("pid", &hb.pid.to_string()),
                    ],
                ),
            };
            (symbol, label + &more(others.len() - 1), style)
        }
        (None, None) if d.others.is_some() => ("■", t.dispatcher_stopped_doctor.to_string(), red),
        (None, None) => ("○", t.dispatcher_off.to_string(), app.palette.dim()),
        (Some(true), _) if d.paused => ("⏸", t.dispatcher_paused.to_string() + &more(others.len()), red),
        (Some(true), _) => ("●", t.dispatcher_running.to_string() + &more(others.len()), green),
        (Some(false), _) => ("■", stopped_label(app), red),
    };
    match detail.word {
        true => Span::styled(format!("{symbol} {}: {label}", t.dispatcher), style),
        false => Span::styled(format!("{symbol} {label}"), style),
    }
}

/// A stopped dispatcher in the configured language, with its cause when
/// the console knows it (issue 25 §5); either way it points to `:doctor`,
/// which checks everything a dispatcher needs (issue 26 §1).
fn stopped_label(app: &App) -> String {
    use crate::tui::app::StopCause;
    let t = app.t;
    let why = match &app.dispatcher.stopped_because {
        None => return t.dispatcher_stopped_doctor.to_string(),
        Some(StopCause::MissingKey { var }) => fill(t.cause_missing_key, &[("var", &inert(var))]),
        Some(StopCause::Other(detail)) => fill(t.cause_other, &[("detail", &shorten(&inert(detail), 40))]),
    };
    fill(t.dispatcher_stopped_because, &[("why", &why)])
}

/// Characters of a span list.
fn span_len(spans: &[Span<'_>]) -> usize {
    spans.iter().map(|s| s.content.chars().count()).sum()
}

/// Cuts `text` to `room` characters with `…` (whole when it fits).
pub(super) fn shorten(text: &str, room: usize) -> String {
    if text.chars().count() <= room {
        return text.to_string();
    }
    text.chars().take(room.saturating_sub(1)).chain(['…']).collect()
}

fn draw_header(f: &mut Frame<'_>, app: &App, area: Rect) {
    let [area, banner] = Layout::vertical([Constraint::Length(1), Constraint::Length(app.banner_lines())]).areas(area);
    if banner.height > 0 {
        draw_banner(f, app, banner);
    }
    let t = app.t;
    let d = &app.dispatcher;
    let mut left = vec![
        Span::styled(
            format!(" {} ", t.app_title),
            Style::new()
                .fg(app.palette.on_accent)
                .bg(app.palette.accent)
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(" {} ({})", inert(&app.operator), t.role(app.role()))),
    ];
    let mark = |text: &str| Span::styled(format!(" [{text}]"), Style::new().fg(app.palette.warn));
    let read_only = app.access.read_only.then(|| mark(t.read_only));
    // The title, the operator, the dispatcher's state and the clock are
    // always shown; then, while they fit and in this order: the word
    // "despachador", the read-only mark, the host and pid of another
    // process's dispatcher; the queue and the last error take what room is
    // left (the error in full with `:error`). An unverified identity is
    // said once, in `?` help, not on every header (issue 25 §5).
    let clock = format!(" · {} ", local(app, app.now, "%d/%m %H:%M"));
    let width = area.width as usize;
    let used = span_len;
    let len = |s: &Option<Span<'_>>| s.as_ref().map(|s| s.content.chars().count()).unwrap_or(0);
    let total = |detail: Detail, ro: bool| {
        used(&left)
            + dispatcher_span(app, detail).content.chars().count()
            + clock.chars().count()
            + if ro { len(&read_only) } else { 0 }
    };
    let (mut detail, mut ro) = (Detail::default(), false);
    for step in 0..3 {
        let (d2, ro2) = match step {
            0 => (Detail { word: true, ..detail }, ro),
            1 => (detail, read_only.is_some()),
            _ => (Detail { host: true, ..detail }, ro),
        };
        if total(d2, ro2) <= width {
            (detail, ro) = (d2, ro2);
        }
    }
    left.extend(read_only.filter(|_| ro));
    let state = dispatcher_span(app, detail);
    let mut room = width.saturating_sub(used(&left) + state.content.chars().count() + clock.chars().count() + 2);
    let mut extra = String::new();
    if let Some(q) = d.queue {
        let part = format!(" · {} {q}", t.header_due_now);
        if part.chars().count() <= room {
            room -= part.chars().count();
            extra.push_str(&part);
        }
    }
    if let Some(e) = &d.last_error {
        let head = format!(" · {}: ", t.last_error);
        if room > head.chars().count() + 8 {
            let text = shorten(&inert(e), room - head.chars().count());
            extra.push_str(&head);
            extra.push_str(&text);
        } else if room >= 4 {
            // No room for words: a mark that there is one (`:error`).
            extra.push_str(" · ⚠");
        }
    }
    let right_len = state.content.chars().count() + extra.chars().count() + clock.chars().count();
    let pad = width.saturating_sub(used(&left) + right_len);
    left.push(Span::raw(" ".repeat(pad)));
    left.push(state);
    left.push(Span::styled(extra, app.palette.dim()));
    left.push(Span::styled(clock, HEAD));
    f.render_widget(Paragraph::new(Line::from(left)), area);
}

fn draw_tabs(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let mut spans = Vec::new();
    for (i, s) in Screen::tabs(app.role()).iter().enumerate() {
        let style = if *s == app.screen || (app.back.first() == Some(s)) {
            Style::new().fg(app.palette.accent).add_modifier(Modifier::BOLD)
        } else {
            app.palette.dim()
        };
        spans.push(Span::styled(format!(" {} {} ", i + 1, s.title(t)), style));
    }
    spans.push(Span::raw(" │ "));
    // Nothing is cut mid-word at 80 columns: the trail loses its first
    // steps, the search its label, before a word would be cut.
    let mut room = (area.width as usize).saturating_sub(span_len(&spans));
    let crumbs = fit_breadcrumbs(&app.breadcrumbs(), room);
    room = room.saturating_sub(crumbs.chars().count());
    spans.push(Span::styled(crumbs, HEAD));
    if !app.filter.is_empty() {
        let filter = inert(&app.filter);
        let tag = [format!("  [{}: {filter}]", t.filter), format!("  [/{filter}]")]
            .into_iter()
            .find(|tag| tag.chars().count() <= room);
        if let Some(tag) = tag {
            spans.push(Span::styled(tag, Style::new().fg(app.palette.warn)));
        }
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// `Atención › Paciente María Flores › Detalle` in `room` columns: its
/// first steps become `…` while it does not fit.
fn fit_breadcrumbs(crumbs: &str, room: usize) -> String {
    let parts: Vec<&str> = crumbs.split(" › ").collect();
    for skip in 0..parts.len() {
        let text = if skip == 0 {
            crumbs.to_string()
        } else {
            format!("… › {}", parts[skip..].join(" › "))
        };
        if text.chars().count() <= room {
            return text;
        }
    }
    parts.last().map(|s| s.to_string()).unwrap_or_default()
}

pub(super) fn page_info(app: &App, offset: u32, shown: usize, total: i64) -> String {
    if total == 0 {
        return String::new();
    }
    format!(" {} {}–{} / {total} ", app.t.page, offset + 1, offset as usize + shown)
}

pub(super) fn state_style(app: &App, state: &str) -> Style {
    app.palette.state(state)
}

/// `aviso-reserva` → `reserva`, `recordatorio-24h` → `24h`: the column
/// header already says these are messages.
pub(super) fn short_purpose(p: &str) -> String {
    match p.strip_prefix("recordatorio-") {
        Some(offset) => format!("record. {offset}"),
        None => p.strip_prefix("aviso-").unwrap_or(p).to_string(),
    }
}

fn draw_flash(f: &mut Frame<'_>, app: &App, area: Rect) {
    let line = match app.mode {
        Mode::Filter => Line::from(format!("/{}▏", inert(&app.input))),
        Mode::Command => Line::from(format!(":{}▏", inert(&app.input))),
        // An action waiting out its grace: the countdown, and how to undo.
        _ if app.pending_line().is_some() => Line::styled(
            app.pending_line().unwrap_or_default(),
            Style::new().fg(app.palette.accent),
        ),
        _ => match &app.flash {
            Some(fl) => {
                let style = match fl.kind {
                    FlashKind::Info => Style::new(),
                    FlashKind::Success => Style::new().fg(app.palette.ok),
                    FlashKind::Refused => Style::new().fg(app.palette.warn),
                    FlashKind::Error => Style::new().fg(app.palette.error).add_modifier(Modifier::BOLD),
                };
                Line::styled(inert(&fl.text).into_owned(), style)
            }
            None => Line::from(""),
        },
    };
    f.render_widget(Paragraph::new(line), area);
}

fn draw_footer(f: &mut Frame<'_>, app: &App, area: Rect) {
    let spans = footer_spans(app, area.width as usize);
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// One footer hint: key, label, action, refused (dimmed).
type Hint = (String, String, Action, bool);

/// The footer's key hints: help first and quit last always, the others in
/// registry order while they fit whole (nothing is cut mid-word; `?`
/// lists the rest). A key whose guard refuses on the case under the
/// cursor stays, dimmed, with the refusal in a few words (issue 25 §3)
/// while that leaves room for the role's main keys (§7); else dimmed
/// alone: its reason is in `?` help and is said at once if pressed.
fn footer_spans(app: &App, width: usize) -> Vec<Span<'static>> {
    let key = Style::new().fg(app.palette.accent).add_modifier(Modifier::BOLD);
    let (hints, shown) = match footer_pick(app, width, true) {
        (hints, shown, true) => (hints, shown),
        _ => {
            let (hints, shown, _) = footer_pick(app, width, false);
            (hints, shown)
        }
    };
    let fixed = |a: Action| hints.iter().filter(move |h| h.2 == a);
    let mut spans = Vec::new();
    for (k, l, _, refused) in fixed(Action::Help).chain(shown.iter()).chain(fixed(Action::Quit)) {
        let key_style = if *refused { app.palette.dim() } else { key };
        spans.push(Span::styled(format!("{k} "), key_style));
        spans.push(Span::styled(format!("{l}  "), app.palette.dim()));
    }
    spans
}

/// The hints and those that fit beside help and quit, with or without the
/// refusals' reasons; and whether every main key of the role fits.
fn footer_pick(app: &App, width: usize, reasons: bool) -> (Vec<Hint>, Vec<Hint>, bool) {
    let hints: Vec<Hint> = visible(app.screen, app.access)
        .filter(|c| c.hint)
        .map(|c| {
            let k = c.keys.first().map(|k| k.label()).unwrap_or_default();
            let label = footer_label(app, c, width);
            match refused_because(app, c) {
                Some(why) if reasons => (k, format!("{label} ({why})"), c.action, true),
                Some(_) => (k, label.to_string(), c.action, true),
                None => (k, label.to_string(), c.action, false),
            }
        })
        .collect();
    let len = |(k, l, _, _): &Hint| k.chars().count() + 1 + l.chars().count() + 2;
    let fixed = |h: &&Hint| matches!(h.2, Action::Help | Action::Quit);
    let mut room = width.saturating_sub(hints.iter().filter(fixed).map(len).sum());
    // The role's main actions and searching come first, refused or not,
    // then opening, then any other key, refused ones last.
    let main = |a: Action| match a {
        Action::Op(OpKind::Cancel) => Some(0),
        Action::Op(OpKind::AuthorizeResend | OpKind::RequestResend) => Some(1),
        Action::Op(OpKind::Resolve) => Some(2),
        Action::OpenFilter => Some(3),
        _ => None,
    };
    let mut rest: Vec<&Hint> = hints.iter().filter(|h| !fixed(h)).collect();
    rest.sort_by_key(|h| match (main(h.2), h.2) {
        (Some(rank), _) => rank,
        (None, Action::Open) => 4,
        _ if h.3 => 6,
        _ => 5,
    });
    let mut shown: Vec<Hint> = Vec::new();
    let mut mains_fit = true;
    for h in rest {
        if len(h) <= room {
            room -= len(h);
            shown.push(h.clone());
        } else if main(h.2).is_some() {
            mains_fit = false;
        }
    }
    // Back in registry order, so hints keep their usual places.
    shown.sort_by_key(|h| hints.iter().position(|x| x.2 == h.2));
    (hints, shown, mains_fit)
}

// --- §7 (issue 25): the footer keeps the main actions at 80 columns ---

/// A command's footer label: the short word of a main action below 100
/// columns (`c cancelar`, `a reenviar`, `x atendido`), else its label.
fn footer_label(app: &App, c: &crate::tui::keys::Command, width: usize) -> &'static str {
    let t = app.t;
    match c.action {
        Action::Op(op) if width < 100 => match op {
            OpKind::Cancel => t.hint_cancel,
            OpKind::AuthorizeResend => t.hint_resend,
            OpKind::Resolve => t.hint_resolve,
            OpKind::ManualContact => t.hint_manual_contact,
            _ => (c.label)(t),
        },
        _ => (c.label)(t),
    }
}

/// Why a command's guard refuses it on the case under the cursor, in a
/// few words (`None`: it would be accepted, or it is no case action).
pub(super) fn refused_because(app: &App, c: &crate::tui::keys::Command) -> Option<&'static str> {
    match app.key_verdict(c.op()?) {
        Err(crate::domain::guard::Why::Rule(r)) => Some(app.t.refusal_short(&r)),
        Err(crate::domain::guard::Why::Role) => Some(app.t.short_role),
        Ok(()) => None,
    }
}
