//! The Tablero: the day's counters (enter opens the rows behind one) and,
//! on terminals of 100 columns or more, the day drawn by the hour.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::Span;
use ratatui::widgets::{Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Paragraph, Row, Table, TableState};

use super::{DIM, HEAD, SELECTED};
use crate::domain::text::inert;
use crate::tui::app::App;

pub(super) fn draw_board(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let title = format!(" {} · {} {} ", t.screen_board, t.board_day, app.day.format("%Y-%m-%d"));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title)
        .title_bottom(format!(" {} ", t.board_hint));
    let items = app.board_items();
    if items.is_empty() {
        f.render_widget(Paragraph::new(t.loading).style(DIM).block(block), area);
        return;
    }
    let (table_area, chart_area) = if area.width >= 100 {
        let [a, b] = Layout::horizontal([Constraint::Length(66), Constraint::Fill(1)]).areas(area);
        (a, Some(b))
    } else {
        (area, None)
    };
    let header = Row::new([t.col_counter, t.col_value]).style(HEAD);
    let rows = items.iter().map(|i| {
        let style = if i.query.is_some() { Style::new() } else { DIM };
        Row::new([
            Cell::from(inert(&i.label).into_owned()),
            Cell::from(inert(&i.value).into_owned()),
        ])
        .style(style)
    });
    let table = Table::new(rows, [Constraint::Min(38), Constraint::Length(25)])
        .header(header)
        .block(block)
        .row_highlight_style(SELECTED);
    let mut state = TableState::default().with_selected(Some(app.board_selected));
    f.render_stateful_widget(table, table_area, &mut state);
    if let Some(area) = chart_area {
        draw_hours(f, app, area);
    }
}

/// Messages per hour of the day by outcome: sent (accepted or sent),
/// delivered, read, failed; the queue waiting now in the title.
fn draw_hours(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let series: [(&[&str], &str, Color); 4] = [
        (&["accepted", "sent"], "sent", Color::Cyan),
        (&["delivered"], "delivered", Color::Green),
        (&["read"], "read", Color::Blue),
        (&["failed"], "failed", Color::Red),
    ];
    let points: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|(states, _, _)| {
            (0..24)
                .map(|h| {
                    let n: i64 = app
                        .board_hours
                        .iter()
                        .filter(|c| c.hour == h && states.contains(&c.state.as_str()))
                        .map(|c| c.n)
                        .sum();
                    (h as f64, n as f64)
                })
                .collect()
        })
        .collect();
    let max = points.iter().flatten().map(|p| p.1).fold(1.0, f64::max);
    let datasets: Vec<Dataset<'_>> = series
        .iter()
        .zip(&points)
        .map(|((_, label, color), data)| {
            Dataset::default()
                .name(t.state(label))
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::new().fg(*color))
                .data(data)
        })
        .collect();
    let queue = app
        .dispatcher
        .queue
        .map(|q| format!(" · {} {q}", t.queue))
        .unwrap_or_default();
    let chart = Chart::new(datasets)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" {}{queue} ", t.board_chart)),
        )
        .x_axis(
            Axis::default()
                .bounds([0.0, 23.0])
                .labels(["0h", "6h", "12h", "18h", "23h"].map(|l| Span::styled(l, DIM))),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, max])
                .labels(["0".to_string(), format!("{max:.0}")].map(|l| Span::styled(l, DIM))),
        );
    f.render_widget(chart, area);
}
