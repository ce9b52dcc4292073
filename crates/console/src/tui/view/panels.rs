//! Detalle's technical view and the Reproceso panel.

use super::*;
use ratatui::text::Text;
use ratatui::widgets::Gauge;

use crate::store::IntentionDetail;

/// Detalle's technical view (`e`): the stored words as they are (key,
/// template and parameters, evidence ids, notes, HTTP lines).
pub(super) fn technical_lines(app: &App, d: &IntentionDetail, lines: &mut Vec<Line<'static>>) {
    intention_lines(app, d, lines);
    history_lines(app, d, lines);
    attempt_lines(app, d, lines);
    related_lines(app, d, lines);
}

/// The intention itself: key and state, commitment, recipient and due
/// time, who asked for it and why, and its content.
fn intention_lines(app: &App, d: &IntentionDetail, lines: &mut Vec<Line<'static>>) {
    let t = app.t;
    let none = || t.detail_none.to_string();
    let i = &d.intention;
    let state_line = format!(
        "{}{}",
        t.state(i.state.as_str()),
        i.state_reason
            .as_deref()
            .map(|r| format!(" ({})", inert(t.reason(r))))
            .unwrap_or_default()
    );
    lines.push(Line::from(vec![
        Span::styled(format!("#{} {}", i.id, inert(&i.key)), HEAD),
        Span::raw("  "),
        Span::styled(state_line, state_style(app, i.state.as_str())),
    ]));
    lines.push(Line::from(format!(
        "{} {} v{} · {} {} · {} {}",
        t.col_commitment,
        inert(&i.commitment_ref),
        i.commitment_version,
        t.detail_to,
        inert(&mask_phone(&i.recipient)),
        t.detail_due,
        local(app, i.due_at, "%d/%m %H:%M")
    )));
    if let Some(reason) = &i.reason {
        lines.push(Line::from(format!(
            "{}: {} · {} {} · {}",
            t.form_responsible,
            inert(&i.created_by),
            t.detail_authorized,
            inert(&i.authorized_by.clone().unwrap_or_else(none)),
            inert(reason)
        )));
    }
    lines.push(Line::styled(t.detail_content, HEAD));
    lines.push(Line::from(format!(
        "  {}: {} [{}] {}",
        t.detail_template,
        inert(&i.template),
        inert(&i.language),
        inert(&format!("{:?}", i.parameters))
    )));
    lines.push(Line::from(format!("  {}: {}", t.detail_text, inert(&i.body))));
}

/// Every state change, dimmed where it was recorded but not applied.
fn history_lines(app: &App, d: &IntentionDetail, lines: &mut Vec<Line<'static>>) {
    let t = app.t;
    lines.push(Line::styled(t.detail_history, HEAD));
    for h in &d.history {
        let mut s = format!(
            "  {} {} → {} {} ({})",
            local(app, h.at, "%d/%m %H:%M:%S"),
            inert(h.from_state.as_deref().map(|s| t.state(s)).unwrap_or("·")),
            inert(t.state(&h.to_state)),
            inert(&t.signal(&h.signal)),
            inert(t.cause(&h.cause))
        );
        if !h.applied {
            s.push_str(&format!(" {}", t.detail_recorded_only));
        }
        if let Some(e) = &h.evidence {
            s.push_str(&format!(" [{}]", inert(e)));
        }
        if let Some(n) = &h.note {
            s.push_str(&format!(" {}", inert(n)));
        }
        lines.push(Line::from(s).style(if h.applied { Style::new() } else { app.palette.dim() }));
    }
}

/// Every send attempt with what the channel answered.
fn attempt_lines(app: &App, d: &IntentionDetail, lines: &mut Vec<Line<'static>>) {
    let t = app.t;
    let none = || t.detail_none.to_string();
    lines.push(Line::styled(t.detail_attempts, HEAD));
    if d.attempts.is_empty() {
        lines.push(Line::from(format!("  {}", t.detail_none)));
    }
    for a in &d.attempts {
        lines.push(Line::from(format!(
            "  {} {} {} http {} cmd {} msg {} {}",
            a.n,
            local(app, a.started_at, "%H:%M:%S"),
            inert(a.outcome.as_str()),
            a.http_status.map(|s| s.to_string()).unwrap_or_else(none),
            inert(&a.command_id.clone().unwrap_or_else(none)),
            inert(&a.message_id.clone().unwrap_or_else(none)),
            inert(&a.error_detail.clone().unwrap_or_default())
        )));
    }
}

/// Resends of this intention, or the one it resends.
fn related_lines(app: &App, d: &IntentionDetail, lines: &mut Vec<Line<'static>>) {
    let t = app.t;
    lines.push(Line::styled(t.detail_related, HEAD));
    if d.related.is_empty() {
        lines.push(Line::from(format!("  {}", t.detail_none)));
    }
    for r in &d.related {
        lines.push(Line::from(format!(
            "  #{} {} {} ({})",
            r.id,
            inert(&r.key),
            inert(t.state(&r.state)),
            inert(&r.relation)
        )));
    }
}

pub(super) fn draw_reprocess(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let v = &app.reprocess;
    let [left, right] = Layout::horizontal([Constraint::Length(24), Constraint::Fill(1)]).areas(area);
    let mut lines = vec![
        Line::from(format!(
            "{}: {}",
            t.reprocess_day,
            t.words.day(app.day, app.now, app.tz)
        )),
        Line::from(""),
    ];
    lines.push(Line::styled(t.reprocess_states, HEAD));
    for (i, s) in IntentionState::ALL.iter().enumerate() {
        let mark = if v.states.contains(s) { "[x]" } else { "[ ]" };
        let line = Line::from(format!("{mark} {}", t.state(s.as_str())));
        lines.push(if i == v.cursor { line.style(SELECTED) } else { line });
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.screen_reprocess));
    f.render_widget(Paragraph::new(lines).block(block), left);

    let (title, items) = match (&v.done, &v.plan) {
        (Some(done), _) if done.day.date() == app.day => (t.screen_reprocess, &done.items),
        (_, Some(plan)) => (t.reprocess_preview, plan),
        _ => {
            let mut msg = vec![Line::styled(
                v.error.as_ref().map_or(t.reprocess_unavailable, |e| t.failure(e.kind)),
                Style::new().fg(app.palette.warn),
            )];
            if let Some(e) = v.error.as_ref().filter(|e| !e.detail.is_empty()) {
                msg.push(Line::styled(inert(&e.detail).into_owned(), app.palette.dim()));
            }
            let block = Block::default()
                .borders(Borders::ALL)
                .title_bottom(format!(" {} ", t.reprocess_hint));
            f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: false }).block(block), right);
            return;
        }
    };
    // A real run under way: its gauge on top, the list below.
    let right = match v.running {
        Some(p) => {
            let [gauge, rest] = Layout::vertical([Constraint::Length(3), Constraint::Fill(1)]).areas(right);
            draw_gauge(f, app, p, gauge);
            rest
        }
        None => right,
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {title} · {} ", crate::tui::app::summary_text(t, items)))
        .title_bottom(format!(" {} ", t.reprocess_hint));
    let header = [t.col_commitment, t.col_state, t.col_action, t.col_why];
    let cells: Vec<[String; 4]> = items
        .iter()
        .map(|i| {
            let state = match i.result {
                Some(r) => format!("{} → {}", t.state(i.state.as_str()), t.state(r.as_str())),
                None => t.state(i.state.as_str()).to_string(),
            };
            [
                inert(&i.key).into_owned(),
                state,
                t.reprocess_action(i.action).to_string(),
                inert(&t.reprocess_why(&i.because, app.now, app.tz)).into_owned(),
            ]
        })
        .collect();
    let widths = reprocess_widths(&header, &cells, right.width.saturating_sub(2));
    // The action and the reason wrap at word boundaries instead of being
    // cut: a technician reads "queda para una persona", not "queda para una".
    let rows = cells.into_iter().map(|c| {
        let [key, state, action, why] = c;
        let action = wrap_words(&action, widths[2]);
        let why = wrap_words(&why, widths[3]);
        let height = action.len().max(why.len()).max(1) as u16;
        Row::new([
            Cell::from(key),
            Cell::from(state),
            Cell::from(Text::from(action.into_iter().map(Line::from).collect::<Vec<_>>())),
            Cell::from(Text::from(why.into_iter().map(Line::from).collect::<Vec<_>>())),
        ])
        .height(height)
    });
    let constraints = widths.map(Constraint::Length);
    let table = Table::new(rows, constraints)
        .header(Row::new(header).style(HEAD))
        .column_spacing(1);
    f.render_widget(table.block(block), right);
}

/// Reproceso's column widths for `inner` columns: the key and the state as
/// wide as their longest text (the key at most 30), the action as wide as
/// its longest text but at most a third of what is left, the reason the
/// rest. Wrapping, not cutting, absorbs what does not fit.
fn reprocess_widths(header: &[&str; 4], cells: &[[String; 4]], inner: u16) -> [u16; 4] {
    let widest = |col: usize| {
        cells
            .iter()
            .map(|c| Line::from(c[col].as_str()).width())
            .chain([Line::from(header[col]).width()])
            .max()
            .unwrap_or(0) as u16
    };
    let key = widest(0).min(30);
    let state = widest(1);
    let left = inner.saturating_sub(key + state + 3);
    let action = widest(2).min(left / 3).max(Line::from(header[2]).width() as u16);
    [key, state, action, left.saturating_sub(action).max(1)]
}

/// `text` in lines of at most `width` columns, broken at spaces; a word
/// longer than a line is split where it must be.
pub(super) fn wrap_words(text: &str, width: u16) -> Vec<String> {
    let width = usize::from(width.max(1));
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word = word.to_string();
        loop {
            let used = Line::from(line.as_str()).width();
            let need = Line::from(word.as_str()).width() + usize::from(used > 0);
            if used + need <= width {
                if used > 0 {
                    line.push(' ');
                }
                line.push_str(&word);
                break;
            }
            if used > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // A word wider than the line: its first `width` columns.
            let cut = word.char_indices().map(|(i, _)| i).nth(width).unwrap_or(word.len());
            lines.push(word[..cut].to_string());
            word = word[cut..].to_string();
            if word.is_empty() {
                break;
            }
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// How far a real reprocess run is: done of total, as the worker last said
/// (nothing counted yet: "starting").
fn draw_gauge(f: &mut Frame<'_>, app: &App, p: crate::dispatch::reprocess::Progress, area: Rect) {
    let t = app.t;
    let (ratio, label) = if p.total == 0 {
        (0.0, t.reprocess_starting.to_string())
    } else {
        let done = p.done.min(p.total);
        (
            done as f64 / p.total as f64,
            fill(
                t.reprocess_running,
                &[("done", &done.to_string()), ("total", &p.total.to_string())],
            ),
        )
    };
    let gauge = Gauge::default()
        .block(Block::default().borders(Borders::ALL))
        .gauge_style(Style::new().fg(app.palette.accent))
        .ratio(ratio)
        .label(label);
    f.render_widget(gauge, area);
}

#[cfg(test)]
mod tests {
    use super::wrap_words;

    #[test]
    fn words_wrap_at_spaces_and_long_words_split() {
        assert_eq!(wrap_words("queda para una persona", 15), ["queda para una", "persona"]);
        assert_eq!(wrap_words("espera a una persona", 20), ["espera a una persona"]);
        assert_eq!(wrap_words("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap_words("", 4), Vec::<String>::new());
        assert_eq!(wrap_words("ñandú árbol", 5), ["ñandú", "árbol"]);
    }
}
