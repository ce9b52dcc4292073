//! Rendering: a pure function of [`App`]. Every word comes from the string
//! table; phones are masked; times are shown in the configured zone and
//! ages are computed from the app's clock (fixed in snapshot tests).
//!
//! `panels.rs` draws Detalle and Reproceso, `overlay.rs` the form, the
//! confirmation and the help.

mod attention;
mod banner;
mod board;
mod overlay;
mod panels;

use attention::{draw_attention_like, human_time, short_name};
use banner::draw_banner;
use board::draw_board;
use overlay::{draw_confirm, draw_dispatchers, draw_error, draw_form, draw_help, draw_log};
use panels::{draw_detail, draw_reprocess};

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

fn local(app: &App, t: DateTime<Utc>, fmt: &str) -> String {
    t.with_timezone(&app.tz).format(fmt).to_string()
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
        (None, None) if d.others.is_some() => ("■", t.dispatcher_stopped.to_string(), red),
        (None, None) => ("○", t.dispatcher_off.to_string(), app.palette.dim()),
        (Some(true), _) if d.paused => ("⏸", t.dispatcher_paused.to_string() + &more(others.len()), red),
        (Some(true), _) => ("●", t.dispatcher_running.to_string() + &more(others.len()), green),
        (Some(false), _) => ("■", t.dispatcher_stopped.to_string(), red),
    };
    match detail.word {
        true => Span::styled(format!("{symbol} {}: {label}", t.dispatcher), style),
        false => Span::styled(format!("{symbol} {label}"), style),
    }
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
    let unverified = app.identity_unverified.then(|| mark(t.identity_unverified));
    let read_only = app.access.read_only.then(|| mark(t.read_only));
    // The title, the operator, the dispatcher's state and the clock are
    // always shown; then, while they fit and in this order: the word
    // "despachador", the read-only mark, the host and pid of another
    // process's dispatcher, the unverified-identity mark; the queue and the
    // last error take what room is left (the error in full with `:error`).
    let clock = format!(" · {} ", local(app, app.now, "%d/%m %H:%M"));
    let width = area.width as usize;
    let used = span_len;
    let len = |s: &Option<Span<'_>>| s.as_ref().map(|s| s.content.chars().count()).unwrap_or(0);
    let total = |detail: Detail, ro: bool, unv: bool| {
        used(&left)
            + dispatcher_span(app, detail).content.chars().count()
            + clock.chars().count()
            + if ro { len(&read_only) } else { 0 }
            + if unv { len(&unverified) } else { 0 }
    };
    let (mut detail, mut ro, mut unv) = (Detail::default(), false, false);
    for step in 0..4 {
        let (d2, ro2, unv2) = match step {
            0 => (Detail { word: true, ..detail }, ro, unv),
            1 => (detail, read_only.is_some(), unv),
            2 => (Detail { host: true, ..detail }, ro, unv),
            _ => (detail, ro, unverified.is_some()),
        };
        if total(d2, ro2, unv2) <= width {
            (detail, ro, unv) = (d2, ro2, unv2);
        }
    }
    left.extend(unverified.filter(|_| unv));
    left.extend(read_only.filter(|_| ro));
    let state = dispatcher_span(app, detail);
    let mut room = width.saturating_sub(used(&left) + state.content.chars().count() + clock.chars().count() + 2);
    let mut extra = String::new();
    if let Some(q) = d.queue {
        let part = format!(" · {} {q}", t.queue);
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
    spans.push(Span::styled(app.breadcrumbs(), HEAD));
    if !app.filter.is_empty() {
        spans.push(Span::styled(
            format!("  [{}: {}]", t.filter, inert(&app.filter)),
            Style::new().fg(app.palette.warn),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
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

/// Whether the desk should call: soon, nothing delivered or read for the
/// current version, not confirmed, not contacted.
fn needs_call(app: &App, u: &UpcomingRow) -> bool {
    let soon = u.starts_at.is_some_and(|s| s - app.now < Duration::hours(24));
    let reached = u
        .notifications
        .iter()
        .any(|n| n.version == u.version && matches!(n.state.as_str(), "delivered" | "read"));
    u.kind == CommitmentKind::Appointment
        && u.status != CommitmentStatus::Cancelled
        && soon
        && !reached
        && u.confirmed_at.is_none()
        && u.manual_contact_at.is_none()
}

fn draw_upcoming(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let r = &app.upcoming;
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.screen_upcoming))
        .title_bottom(page_info(app, r.offset, r.rows.len(), r.total));
    if r.rows.is_empty() {
        let msg = match (r.loaded, app.filter.is_empty()) {
            (false, _) => t.loading,
            (true, false) => t.no_results,
            (true, true) => t.empty_list,
        };
        f.render_widget(Paragraph::new(msg).style(app.palette.dim()).block(block), area);
        return;
    }
    let header = Row::new([
        t.col_time,
        t.col_commitment,
        t.col_name,
        t.col_phone,
        t.col_status,
        t.col_notifications,
    ])
    .style(HEAD);
    let wide = area.width >= 110;
    let rows = r.rows.iter().map(|u| upcoming_row(app, u, wide));
    let widths = [
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Length(if wide { 16 } else { 10 }),
        Constraint::Length(15),
        Constraint::Length(if wide { 22 } else { 14 }),
        Constraint::Fill(1),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(block)
        .row_highlight_style(SELECTED);
    let mut state = TableState::default().with_selected(Some(r.selected));
    f.render_stateful_widget(table, area, &mut state);
}

/// One Próximas row; its status in the warning colour when the desk
/// should call. `wide` (110 columns or more) gives names more room.
fn upcoming_row(app: &App, u: &UpcomingRow, wide: bool) -> Row<'static> {
    let t = app.t;
    let when = u
        .starts_at
        .map(|s| human_time(app, s))
        .unwrap_or_else(|| t.detail_none.into());
    let call = needs_call(app, u);
    let style = if call {
        Style::new().fg(app.palette.warn)
    } else {
        Style::new()
    };
    Row::new([
        Cell::from(when),
        Cell::from(inert(&u.commitment_ref).into_owned()),
        Cell::from(
            u.name
                .as_deref()
                .map(|n| short_name(&inert(n), if wide { 16 } else { 10 }))
                .unwrap_or_default(),
        ),
        Cell::from(inert(&u.phone.as_deref().map(mask_phone).unwrap_or_default()).into_owned()),
        Cell::from(upcoming_status(app, u, call)).style(style),
        Cell::from(notifications_text(app, u)),
    ])
}

/// The commitment's status (an order's own word), then whether the desk
/// should call and whether a reschedule was asked for.
fn upcoming_status(app: &App, u: &UpcomingRow, call: bool) -> String {
    let t = app.t;
    let status = if u.status == CommitmentStatus::Cancelled {
        t.cancelled_appt
    } else if u.manual_contact_at.is_some() {
        t.manual_contact_done
    } else if u.confirmed_at.is_some() {
        t.confirmed
    } else if u.kind == CommitmentKind::Appointment {
        t.scheduled
    } else {
        ""
    };
    let mut status = if u.kind == CommitmentKind::Order {
        u.status.as_str().to_string()
    } else {
        status.to_string()
    };
    if call {
        status = format!("{status} · {}", t.needs_call);
    }
    if u.reschedule_requested_at.is_some() {
        status = format!("{status} · {}", t.reschedule_request);
    }
    status
}

/// The notifications of the current version (all of an order's, and every
/// resend, marked `↻`): short purpose and state each.
fn notifications_text(app: &App, u: &UpcomingRow) -> String {
    u.notifications
        .iter()
        .filter(|n| n.version == u.version || n.is_resend || u.kind == CommitmentKind::Order)
        .map(|n| {
            let p = short_purpose(&n.purpose);
            let p = p.strip_prefix("record. ").unwrap_or(&p).to_string();
            format!(
                "{}{}:{}",
                if n.is_resend { "↻" } else { "" },
                inert(&p),
                inert(app.t.state(&n.state))
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn draw_flash(f: &mut Frame<'_>, app: &App, area: Rect) {
    let line = match app.mode {
        Mode::Filter => Line::from(format!("/{}▏", inert(&app.input))),
        Mode::Command => Line::from(format!(":{}▏", inert(&app.input))),
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

/// The footer's key hints: help first and quit last always, the others in
/// registry order while they fit whole (nothing is cut mid-word; `?`
/// lists the rest).
fn footer_spans(app: &App, width: usize) -> Vec<Span<'static>> {
    let key = Style::new().fg(app.palette.accent).add_modifier(Modifier::BOLD);
    let hints: Vec<(String, &'static str, Action)> = visible(app.screen, app.access)
        .filter(|c| c.hint)
        .map(|c| {
            let k = c.keys.first().map(|k| k.label()).unwrap_or_default();
            (k, (c.label)(app.t), c.action)
        })
        .collect();
    let len = |(k, l, _): &(String, &str, Action)| k.chars().count() + 1 + l.chars().count() + 2;
    let fixed: Vec<_> = hints
        .iter()
        .filter(|h| matches!(h.2, Action::Help | Action::Quit))
        .cloned()
        .collect();
    let mut room = width.saturating_sub(fixed.iter().map(len).sum());
    // Opening, searching and marking handled come first: every role
    // works the queue with them.
    let mut rest: Vec<_> = hints
        .iter()
        .filter(|h| !matches!(h.2, Action::Help | Action::Quit))
        .collect();
    rest.sort_by_key(|h| match h.2 {
        Action::Open => 0,
        Action::OpenFilter => 1,
        Action::Op(OpKind::Resolve) => 2,
        _ => 3,
    });
    let mut shown = Vec::new();
    for h in rest {
        if len(h) <= room {
            room -= len(h);
            shown.push(h.clone());
        }
    }
    // Back in registry order, so hints keep their usual places.
    shown.sort_by_key(|h| hints.iter().position(|x| x.2 == h.2));
    let help = fixed.iter().filter(|h| h.2 == Action::Help);
    let quit = fixed.iter().filter(|h| h.2 == Action::Quit);
    let mut spans = Vec::new();
    for (k, l, _) in help.chain(shown.iter()).chain(quit) {
        spans.push(Span::styled(format!("{k} "), key));
        spans.push(Span::styled(format!("{l}  "), app.palette.dim()));
    }
    spans
}
