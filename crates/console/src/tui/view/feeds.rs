//! `:calendario`'s overlay (issue 27 §2): each calendar feed with held
//! disappearances, and which appointments (reference, masked patient,
//! time); the keys this operator may use at the bottom.

use super::overlay::draw_wrapped;
use super::*;
use crate::tui::keys::feed_keys_visible;

pub(super) fn draw_feeds(f: &mut Frame<'_>, app: &App) {
    let t = app.t;
    let mut lines: Vec<Line<'_>> = Vec::new();
    match &app.feeds.holds {
        None => lines.push(Line::styled(t.loading, app.palette.dim())),
        Some(holds) if holds.is_empty() => lines.push(Line::from(t.feeds_none)),
        Some(holds) => {
            for (i, h) in holds.iter().enumerate() {
                let heading = fill(
                    t.feeds_heading,
                    &[("feed", &inert(&h.feed)), ("n", &h.held.len().to_string())],
                );
                let style = if i == app.feeds.selected {
                    HEAD.patch(SELECTED)
                } else {
                    HEAD
                };
                lines.push(Line::styled(heading, style));
                for a in &h.held {
                    let when = a.starts_at.with_timezone(&app.tz).format("%Y-%m-%d %H:%M");
                    let who = a.patient.as_deref().unwrap_or("—");
                    lines.push(Line::from(format!("  {:<20} {:<16} {when}", inert(&a.reference), who)));
                }
            }
        }
    }
    lines.push(Line::from(""));
    let keys: Vec<Span<'_>> = feed_keys_visible(app.access)
        .filter(|c| c.hint)
        .flat_map(|c| {
            [
                Span::styled(format!("{} ", c.key_label()), Style::new().fg(app.palette.accent)),
                Span::raw(format!("{}  ", (c.label)(t))),
            ]
        })
        .collect();
    lines.push(Line::from(keys));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.feeds_title));
    draw_wrapped(f, lines, 90, 0, block);
}
