//! The patient card and the `:paciente` chooser (issue 25 §1).

use super::*;
use crate::tui::keys::Command;
use crate::tui::sentence::message_sentence;

use super::overlay::popup;

/// The card: who (name, masked phone), the actions this role may take,
/// then each commitment of the window with its messages, one sentence
/// each. The selected message is what `enter` and the action keys act on.
pub(super) fn draw_patient(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", app.patient_title()))
        .title_bottom(format!(" {} ", t.patient_window));
    let Some(card) = &app.patient.card else {
        f.render_widget(Paragraph::new(t.loading).style(app.palette.dim()).block(block), area);
        return;
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(inert(card.name.as_deref().unwrap_or(t.detail_none)).into_owned(), HEAD),
        Span::raw("  "),
        Span::raw(mask_phone(&card.phone)),
    ])];
    lines.push(actions_line(app));
    lines.push(Line::from(""));
    if card.commitments.is_empty() {
        lines.push(Line::styled(t.patient_empty, app.palette.dim()));
    }
    let messages = app.patient.messages();
    let selected = messages.get(app.patient.selected).copied();
    let mut selected_line = 0usize;
    for (ci, c) in card.commitments.iter().enumerate() {
        let when = c
            .starts_at
            .map(|s| human_time(app, s))
            .unwrap_or_else(|| t.detail_none.into());
        // The same words as Próximas citas (`agendada · LLAMAR`).
        let status = upcoming_status(app, c, needs_call(app, c));
        lines.push(Line::from(vec![
            Span::styled(format!("{when}  "), HEAD),
            Span::raw(format!("{} · {status}", inert(&c.commitment_ref))),
        ]));
        for (ni, n) in c.notifications.iter().enumerate() {
            let is_selected = selected == Some((ci, ni));
            if is_selected {
                selected_line = lines.len();
            }
            let text = format!(
                "  {}{}: {}",
                if n.is_resend { "↻" } else { "" },
                inert(&short_purpose(&n.purpose)),
                inert(&message_sentence(t, n))
            );
            let style = if is_selected {
                SELECTED
            } else {
                state_style(app, &n.state)
            };
            lines.push(Line::styled(text, style));
        }
    }
    if !messages.is_empty() {
        lines.push(Line::from(""));
        lines.push(Line::styled(t.patient_open, app.palette.dim()));
    }
    // Keep the selected message on screen.
    let inner = area.height.saturating_sub(2) as usize;
    let scroll = selected_line.saturating_sub(inner.saturating_sub(2)) as u16;
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        area,
    );
}

/// `Puede: c cancelar envío · m contacto manual · x marcar atendido`: the
/// operator actions of the registry this operator may use here, those the
/// selected message's guards refuse dimmed with why.
fn actions_line(app: &App) -> Line<'static> {
    let ops: Vec<&Command> = visible(Screen::Patient, app.access)
        .filter(|c| c.op().is_some())
        .collect();
    if ops.is_empty() {
        return Line::styled(app.t.patient_no_actions, app.palette.dim());
    }
    let key = Style::new().fg(app.palette.accent).add_modifier(Modifier::BOLD);
    let mut spans = vec![Span::styled(format!("{}: ", app.t.patient_actions), app.palette.dim())];
    for (i, c) in ops.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", app.palette.dim()));
        }
        // A key its guard refuses on the selected message is dimmed, with
        // why, as in the footer: the card never offers what will fail.
        match super::refused_because(app, c) {
            Some(why) => spans.push(Span::styled(
                format!("{} {} ({why})", c.key_label(), (c.label)(app.t)),
                app.palette.dim(),
            )),
            None => {
                spans.push(Span::styled(format!("{} ", c.key_label()), key));
                spans.push(Span::raw((c.label)(app.t)));
            }
        }
    }
    Line::from(spans)
}

/// Several patients match `:paciente`: one line each (digit, name,
/// masked phone), the chosen one highlighted.
pub(super) fn draw_chooser(f: &mut Frame<'_>, app: &App) {
    let t = app.t;
    let choices = &app.patient.choices;
    let area = popup(f.area(), 56, choices.len() as u16 + 4);
    f.render_widget(Clear, area);
    let mut lines: Vec<Line<'_>> = choices
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = p.name.as_deref().map(|n| short_name(&inert(n), 28)).unwrap_or_default();
            let text = format!("{}  {:<28}  {}", i + 1, name, mask_phone(&p.phone));
            if i == app.patient.chosen {
                Line::styled(text, SELECTED)
            } else {
                Line::from(text)
            }
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::styled(t.chooser_hint, app.palette.dim()));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.chooser_title));
    f.render_widget(Paragraph::new(lines).block(block), area);
}
