//! Overlays: an action's form, its confirmation, and the `?` help.

use super::*;

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

pub(super) fn draw_form(f: &mut Frame<'_>, app: &App) {
    let Some(form) = &app.form else { return };
    let t = app.t;
    let area = popup(f.area(), 76, 10);
    f.render_widget(Clear, area);
    let target = match (&form.target.intention_id, &form.target.key) {
        (Some(id), Some(key)) if form.op != OpKind::ManualContact => format!(
            "#{id} {key} ({})",
            form.target.state.as_deref().map(|s| t.state(s)).unwrap_or("")
        ),
        _ => form.target.commitment_ref.clone(),
    };
    let mut lines = vec![
        Line::from(target),
        Line::from(format!(
            "{}: {} ({})",
            t.form_responsible,
            app.operator,
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
    lines.push(Line::from(format!("{}: {}▏", t.form_reason, form.reason)));
    if let Some(e) = form.error {
        lines.push(Line::styled(e, Style::new().fg(Color::Red)));
    }
    lines.push(Line::styled(t.form_submit_hint, DIM));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.op_label(form.op)));
    f.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), area);
}

pub(super) fn draw_confirm(f: &mut Frame<'_>, app: &App) {
    let Some(c) = &app.confirm else { return };
    let t = app.t;
    let area = popup(f.area(), 76, 8);
    f.render_widget(Clear, area);
    let lines = vec![
        Line::from(c.scope.clone()),
        Line::from(""),
        Line::styled(t.confirm_hint, HEAD),
    ];
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.confirm_title))
        .border_style(Style::new().fg(Color::Yellow));
    f.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), area);
}

pub(super) fn draw_help(f: &mut Frame<'_>, app: &App) {
    let t = app.t;
    let cmds: Vec<_> = visible(app.screen, app.access).collect();
    let area = popup(f.area(), 60, cmds.len() as u16 + 5);
    f.render_widget(Clear, area);
    let mut lines: Vec<Line<'_>> = cmds
        .iter()
        .map(|c| {
            Line::from(vec![
                Span::styled(format!("{:<12}", c.key_label()), Style::new().fg(Color::Cyan)),
                Span::raw((c.label)(t)),
            ])
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::styled(t.help_roles, DIM));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} · {} ", t.help_title, app.screen.title(t)));
    f.render_widget(Paragraph::new(lines).block(block), area);
}
