//! The call list's pieces of the screen (issue 25, section 4): the
//! outcome chooser, the countdown on the row whose action waits, and the
//! tries of an unanswered case.

use ratatui::Frame;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::overlay::popup;
use crate::domain::call::CallOutcome;
use crate::i18n::fill;
use crate::ops::PendingOp;
use crate::store::AttentionRow;
use crate::tui::app::App;

/// The chooser: one line per outcome, its digit first.
pub(super) fn draw_call_chooser(f: &mut Frame<'_>, app: &App) {
    let t = app.t;
    let area = popup(f.area(), 56, CallOutcome::ALL.len() as u16 + 5);
    f.render_widget(Clear, area);
    let mut lines: Vec<Line<'_>> = CallOutcome::ALL
        .into_iter()
        .map(|o| {
            Line::from(vec![
                Span::styled(format!(" {} ", o.digit()), Style::new().fg(app.palette.accent)),
                Span::raw(t.call_outcome(o)),
            ])
        })
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::styled(t.call_chooser_note, app.palette.dim()));
    let title = match app.calls.chooser.as_ref() {
        Some(target) => format!(" {} · {} ", t.call_chooser_title, target.commitment_ref),
        None => format!(" {} ", t.call_chooser_title),
    };
    let block = Block::default().borders(Borders::ALL).title(title);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }).block(block), area);
}

/// The countdown, on the row whose action waits.
pub(super) fn pending_on(app: &App, r: &AttentionRow) -> Option<String> {
    let d = app.calls.pending.as_ref()?;
    let on_row = match &d.op {
        PendingOp::CallOutcome { intention_id, .. } => r.intention_id == Some(*intention_id),
        PendingOp::Resolve { case } => r.kind == case.kind && r.subject_id == case.subject_id,
        _ => false,
    };
    if on_row { app.pending_row() } else { None }
}

/// "2 intentos" on the call list, for a case called without an answer.
pub(super) fn tries_text(app: &App, r: &AttentionRow) -> Option<String> {
    let n = app.call_tries(r.intention_id?);
    (app.calls.list && n > 0).then(|| fill(app.t.call_tries, &[("n", &n.to_string())]))
}
