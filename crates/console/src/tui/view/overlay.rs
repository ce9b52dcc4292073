//! Overlays: an action's form, its confirmation, and the `?` help.

use super::*;
use crate::i18n::fill;
use crate::tui::app::ResendConfirm;
use crate::tui::worker::PendingOp;

pub(super) fn popup(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width.saturating_sub(2)).max(10);
    let h = height.min(area.height.saturating_sub(2)).max(3);
    Rect {
        x: area.x + (area.width.saturating_sub(w)) / 2,
        y: area.y + (area.height.saturating_sub(h)) / 2,
        width: w,
        height: h,
    }
}

/// A bordered popup `width` wide and as tall as `lines` wrap inside it (at
/// least `min_height`), drawn over what is below: every overlay whose text
/// decides its height.
pub(super) fn draw_wrapped(f: &mut Frame<'_>, lines: Vec<Line<'_>>, width: u16, min_height: u16, block: Block<'_>) {
    let inner = usize::from(width.saturating_sub(2)).max(1);
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
    let area = popup(
        f.area(),
        width,
        u16::try_from(rows + 2).unwrap_or(u16::MAX).max(min_height),
    );
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), area);
}

pub(super) fn draw_form(f: &mut Frame<'_>, app: &App) {
    let Some(form) = &app.form else { return };
    let t = app.t;
    let area = popup(f.area(), 76, 10);
    f.render_widget(Clear, area);
    let target = match (&form.target.intention_id, &form.target.key) {
        (Some(id), Some(key)) if form.op != OpKind::ManualContact => format!(
            "#{id} {} ({})",
            inert(key),
            inert(form.target.state.map(|s| t.situation(s)).unwrap_or(""))
        ),
        _ => inert(&form.target.commitment_ref).into_owned(),
    };
    let mut lines = vec![
        Line::from(target),
        Line::from(format!(
            "{}: {} ({})",
            t.form_responsible,
            inert(&app.operator),
            t.role(app.role())
        )),
    ];
    if form.op == OpKind::Verify {
        let options = app
            .verify_choices()
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if i == form.outcome {
                    format!("[{}]", app.choice_label(c))
                } else {
                    format!(" {} ", app.choice_label(c))
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        lines.push(Line::from(format!("{}: {options}", t.form_outcome)));
    }
    lines.push(Line::from(format!("{}: {}▏", t.form_reason, inert(&form.reason))));
    if let Some(e) = form.error {
        lines.push(Line::styled(e, Style::new().fg(app.palette.error)));
    }
    lines.push(Line::styled(t.form_submit_hint, app.palette.dim()));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.op_label(form.op)));
    f.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), area);
}

pub(super) fn draw_confirm(f: &mut Frame<'_>, app: &App) {
    let Some(c) = &app.confirm else { return };
    let t = app.t;
    let width: u16 = if c.resend.is_some() { 98 } else { 76 };
    let mut lines = vec![Line::from(inert(&c.scope).into_owned())];
    // Sends and cancellations are never undone, and the console says so
    // (issue 25 §4): no grace period, no `u`.
    let no_undo = match c.op {
        PendingOp::Resend { .. } | PendingOp::Reprocess { .. } => Some(t.confirm_no_undo_send),
        PendingOp::Cancel { .. } => Some(t.confirm_no_undo_cancel),
        _ => None,
    };
    if let Some(no_undo) = no_undo {
        lines.push(Line::styled(no_undo, Style::new().fg(app.palette.warn)));
    }
    if let Some(r) = &c.resend {
        lines.push(Line::from(""));
        lines.extend(resend_lines(app, r));
    }
    lines.push(Line::from(""));
    match c.resend.as_ref().filter(|_| app.mode == Mode::ConfirmWord) {
        Some(r) => {
            let word = t.resend_word;
            lines.push(Line::styled(format!("» {}▏", inert(&r.word)), HEAD));
            if let Some(e) = &r.error {
                lines.push(Line::styled(e.clone(), Style::new().fg(app.palette.error)));
            }
            lines.push(Line::styled(fill(t.resend_type_word, &[("word", word)]), HEAD));
        }
        // Nothing to confirm until the evidence is on screen (`s` is
        // ignored meanwhile), so the hint waits for it too.
        None if c.resend.as_ref().is_some_and(|r| r.evidence.is_none()) => {}
        // A confirmation its guard refuses never offers `s` (issue 25 §3).
        None => match c.resend.as_ref().and_then(|r| r.evidence.as_ref()?.refusal.as_ref()) {
            Some(why) => lines.push(Line::styled(
                fill(t.confirm_refused, &[("why", t.refusal_short(why))]),
                HEAD,
            )),
            None => lines.push(Line::styled(t.confirm_hint, HEAD)),
        },
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.confirm_title))
        .border_style(Style::new().fg(app.palette.warn));
    draw_wrapped(f, lines, width, 8, block);
}

/// A resend's evidence: every earlier message of the family with its
/// times and who authorized it, the day's count against the cap, and what
/// the guard will say.
fn resend_lines(app: &App, r: &ResendConfirm) -> Vec<Line<'static>> {
    let t = app.t;
    let Some(ev) = &r.evidence else {
        return vec![Line::styled(t.resend_evidence_loading, app.palette.dim())];
    };
    let mut lines = vec![Line::styled(t.resend_evidence_title, HEAD)];
    for m in &ev.messages {
        let reached = m.delivered_at.is_some() || m.read_at.is_some();
        let [head, detail] = t.resend_member(m, m.id == ev.original_id, app.tz, app.now);
        let style = if reached {
            Style::new().fg(app.palette.ok)
        } else {
            Style::new()
        };
        lines.push(Line::styled(format!("  {head}"), style));
        lines.push(Line::styled(format!("      {detail}"), style));
    }
    lines.push(Line::from(fill(
        t.resend_cap_line,
        &[
            ("n", &ev.authorized_today.to_string()),
            ("limit", &ev.max_per_day.to_string()),
        ],
    )));
    if let Some(why) = &ev.refusal {
        lines.push(Line::styled(
            fill(t.resend_would_refuse, &[("why", &t.refusal(why, app.now))]),
            Style::new().fg(app.palette.warn),
        ));
    } else if ev.needs_acknowledgement() {
        lines.push(Line::styled(
            t.resend_reached_warning,
            Style::new().fg(app.palette.error).add_modifier(Modifier::BOLD),
        ));
    }
    lines
}

pub(super) fn draw_help(f: &mut Frame<'_>, app: &App) {
    let t = app.t;
    let cmds: Vec<_> = visible(app.screen, app.access).collect();
    let area = popup(f.area(), 60, app.help_lines() + 2);
    f.render_widget(Clear, area);
    // A key its guard refuses on the case under the cursor is dimmed,
    // with why (issue 25 §3).
    let mut lines: Vec<Line<'_>> = cmds
        .iter()
        .map(|c| match super::refused_because(app, c) {
            Some(why) => Line::styled(
                format!("{:<12}{} ({why})", c.key_label(), (c.label)(t)),
                app.palette.dim(),
            ),
            None => Line::from(vec![
                Span::styled(format!("{:<12}", c.key_label()), Style::new().fg(app.palette.accent)),
                Span::raw((c.label)(t)),
            ]),
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::styled(t.colon_line(&app.colon_commands()), app.palette.dim()));
    lines.push(Line::styled(t.help_roles, app.palette.dim()));
    // Identity is said once, here, and only where it matters (issue 25 §5);
    // first, so that no scrolling hides it.
    if app.identity_unverified {
        lines.insert(
            0,
            Line::styled(
                fill(t.identity_unmapped, &[("user", &app.os_account)]),
                Style::new().fg(app.palette.warn),
            ),
        );
    }
    // Scrolls (`j`/`k`, pgup/pgdn) when it is taller than the screen;
    // the bottom border says how.
    let inner = area.height.saturating_sub(2);
    let scroll = app.help_scroll.min(app.help_lines().saturating_sub(inner));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} · {} ", t.help_title, app.screen.title(t)))
        .title_bottom(format!(" {} ", t.help_scroll));
    f.render_widget(
        Paragraph::new(lines)
            .wrap(ratatui::widgets::Wrap { trim: true })
            .block(block)
            .scroll((scroll, 0)),
        area,
    );
}

/// A session action's time: to the second today; an action of a session
/// that crossed midnight reads like every other front-desk date
/// (`ayer 23:50`).
fn log_time(app: &App, at: DateTime<Utc>) -> String {
    let local = at.with_timezone(&app.tz);
    if local.date_naive() == app.now.with_timezone(&app.tz).date_naive() {
        local.format("%H:%M:%S").to_string()
    } else {
        app.t.words.when(at, app.now, app.tz)
    }
}

/// `L`: what this operator did in this session, newest first.
pub(super) fn draw_log(f: &mut Frame<'_>, app: &App) {
    let t = app.t;
    let shown = crate::tui::app::LOG_LINES;
    let area = popup(f.area(), 80, (app.log.len().clamp(1, shown) as u16) + 2);
    f.render_widget(Clear, area);
    let lines: Vec<Line<'_>> = if app.log.is_empty() {
        vec![Line::styled(t.log_empty, app.palette.dim())]
    } else {
        app.log
            .iter()
            .rev()
            .skip(app.calls.log_scroll)
            .take(shown)
            .map(|(at, text)| {
                Line::from(vec![
                    Span::styled(format!("{} ", log_time(app, *at)), Style::new().fg(app.palette.accent)),
                    Span::raw(crate::domain::text::inert(text).into_owned()),
                ])
            })
            .collect()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.log_title))
        .title_bottom(match app.log.len() {
            n if n > shown => format!(
                " {}–{} / {n} · ↑↓ pgup pgdn ",
                app.calls.log_scroll + 1,
                (app.calls.log_scroll + shown).min(n)
            ),
            _ => String::new(),
        });
    f.render_widget(
        Paragraph::new(lines)
            .wrap(ratatui::widgets::Wrap { trim: true })
            .block(block),
        area,
    );
}

/// Every live dispatcher (`:despachadores`): this console's own when it
/// runs one, then those of other processes from their heartbeat rows, most
/// recent beat first, each with its state, host and pid, since when it runs
/// and how long ago it last beat.
pub(super) fn draw_dispatchers(f: &mut Frame<'_>, app: &App) {
    use crate::domain::heartbeat::DispatcherState;
    let t = app.t;
    let d = &app.dispatcher;
    let state = |s: DispatcherState| match s {
        DispatcherState::Paused => t.dispatcher_paused,
        DispatcherState::Stopped => t.dispatcher_stopped,
        _ => t.dispatcher_running,
    };
    let mut lines: Vec<Line<'_>> = Vec::new();
    if d.running == Some(true) {
        let own = if d.paused {
            DispatcherState::Paused
        } else {
            DispatcherState::Running
        };
        lines.push(Line::from(fill(t.dispatchers_this_console, &[("state", state(own))])));
    }
    for hb in d.others.as_deref().unwrap_or_default() {
        lines.push(Line::from(fill(
            t.dispatchers_row,
            &[
                ("state", state(hb.state)),
                ("host", &inert(&hb.host)),
                ("pid", &hb.pid.to_string()),
                ("since", &local(app, hb.started_at, "%d/%m %H:%M")),
                ("beat", &crate::tui::app::age(app.now, hb.beat_at)),
            ],
        )));
    }
    if lines.is_empty() {
        lines.push(Line::styled(t.dispatchers_none, app.palette.dim()));
    }
    let area = popup(f.area(), 90, u16::try_from(lines.len().min(20) + 2).unwrap_or(22));
    f.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.dispatchers_title));
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// The last errors whole (`enter` on an error's flash, or `:error`): the
/// console's, in the operator's words and then technically, and the
/// dispatcher's.
pub(super) fn draw_error(f: &mut Frame<'_>, app: &App) {
    let t = app.t;
    let mut lines: Vec<Line<'_>> = Vec::new();
    if let Some(e) = &app.failure {
        lines.push(Line::styled(t.error_console, HEAD));
        lines.push(Line::styled(t.failure(e.kind), Style::new().fg(app.palette.error)));
        lines.push(Line::styled(format!("{}:", t.error_technical), app.palette.dim()));
        lines.push(Line::from(inert(&e.detail).into_owned()));
    }
    if let Some(e) = &app.dispatcher.last_error {
        if !lines.is_empty() {
            lines.push(Line::from(""));
        }
        lines.push(Line::styled(t.error_dispatcher, HEAD));
        lines.push(Line::from(inert(e).into_owned()));
    }
    if lines.is_empty() {
        lines.push(Line::styled(t.no_error, app.palette.dim()));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.error_title))
        .border_style(Style::new().fg(app.palette.error));
    draw_wrapped(f, lines, 90, 0, block);
}

/// `:doctor`: the same checks, messages and fixes as `unavez doctor`.
pub(super) fn draw_doctor(f: &mut Frame<'_>, app: &App) {
    use crate::doctor::Status;
    let (t, words) = (app.t, app.t.doctor);
    let mut lines: Vec<Line<'_>> = Vec::new();
    match &app.doctor {
        None => lines.push(Line::styled(t.loading, app.palette.dim())),
        Some(checks) => {
            for c in checks {
                let (message, fix) = words.say(c, t.templates);
                let (mark, style) = match c.status {
                    Status::Ok => ("✓", Style::new().fg(app.palette.ok)),
                    Status::Skip => ("·", app.palette.dim()),
                    Status::Warn => ("!", Style::new().fg(app.palette.warn)),
                    Status::Fail => ("✗", Style::new().fg(app.palette.error)),
                };
                lines.push(Line::styled(
                    format!("{mark} {:<12} {}", c.id.as_str(), inert(&message)),
                    style,
                ));
                if !fix.is_empty() && matches!(c.status, Status::Warn | Status::Fail) {
                    lines.push(Line::from(format!("  {:<12} → {}", "", inert(&fix))));
                }
            }
            let healthy = crate::doctor::healthy(checks);
            lines.push(Line::from(""));
            lines.push(Line::styled(if healthy { words.all_ok } else { words.some_bad }, HEAD));
        }
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", words.title));
    draw_wrapped(f, lines, 100, 0, block);
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::config::Role;
    use crate::tui::keys::Access;

    /// A session that crossed New Year's Eve: today's actions to the
    /// second, last night's as "ayer 23:50", never a bare time of
    /// another day.
    #[test]
    fn a_log_time_names_its_day_when_it_is_not_today() {
        let lima = chrono_tz::America::Lima;
        let now = lima.with_ymd_and_hms(2027, 1, 1, 0, 20, 0).unwrap().with_timezone(&Utc);
        let access = Access {
            role: Role::FrontDesk,
            read_only: false,
        };
        let app = App::new(crate::i18n::strings(Default::default()), "ana", access, lima, now);
        let at = |y, mo, d, h, mi, s| lima.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap().with_timezone(&Utc);
        assert_eq!(log_time(&app, at(2027, 1, 1, 0, 5, 9)), "00:05:09");
        assert_eq!(log_time(&app, at(2026, 12, 31, 23, 50, 0)), "ayer 23:50");
        assert_eq!(log_time(&app, at(2026, 12, 30, 9, 0, 0)), "30/12/2026 09:00");
    }
}
