//! The Tablero: the day's counters (enter opens the rows behind one) and
//! the day drawn by the hour: messages by outcome, latency to acceptance
//! (p50, p95) and queue depth.
//!
//! The space decides the drawing ([`layout`]): from 100 columns the
//! counters sit on the left and the charts stack on the right, three full
//! charts when there are 24 rows for them, else the messages chart and one
//! line each for latency and queue; narrower (80×24), the counters take
//! the screen and the three figures are one line each below them, a bar
//! per hour.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Paragraph, Row, Sparkline, SparklineBar, Table, TableState,
};

use super::{HEAD, SELECTED};
use crate::board::DayFigures;
use crate::domain::text::inert;
use crate::i18n::fill;
use crate::tui::app::{App, duration_text};

/// How the Tablero uses its area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardLayout {
    /// Counters left; messages, latency and queue charts stacked right.
    Charts,
    /// Counters left; the messages chart right, latency and queue as one
    /// line each below it.
    ChartAndLines,
    /// Counters on top, the three figures as one line each below.
    Lines,
}

/// The widest counters table (label and value columns, borders).
const TABLE_WIDTH: u16 = 66;
/// Rows a full chart needs: borders, axis, labels and a few of plot.
const CHART_ROWS: u16 = 8;

/// The layout for a body of `width`×`height`.
pub fn layout(width: u16, height: u16) -> BoardLayout {
    if width < 100 {
        BoardLayout::Lines
    } else if height >= 3 * CHART_ROWS {
        BoardLayout::Charts
    } else {
        BoardLayout::ChartAndLines
    }
}

pub(super) fn draw_board(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    // issue 25 §2: the day in words ("hoy", "03/12"), never ISO.
    let title = format!(" {} · {} ", t.screen_board, t.words.day(app.day, app.now, app.tz));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(title)
        .title_bottom(format!(" {} ", t.board_hint));
    if app.board.is_none() {
        f.render_widget(Paragraph::new(t.loading).style(app.palette.dim()).block(block), area);
        return;
    }
    match layout(area.width, area.height) {
        BoardLayout::Lines => {
            let [table, lines] = Layout::vertical([Constraint::Fill(1), Constraint::Length(3)]).areas(area);
            draw_counters(f, app, table, block);
            draw_lines(f, app, lines, true);
        }
        wide => {
            let [table, right] = Layout::horizontal([Constraint::Length(TABLE_WIDTH), Constraint::Fill(1)]).areas(area);
            draw_counters(f, app, table, block);
            if wide == BoardLayout::Charts {
                let [a, b, c] = Layout::vertical([Constraint::Fill(1); 3]).areas(right);
                draw_messages(f, app, a);
                draw_latency(f, app, b);
                draw_queue(f, app, c);
            } else {
                let [a, b] = Layout::vertical([Constraint::Fill(1), Constraint::Length(2)]).areas(right);
                draw_messages(f, app, a);
                draw_lines(f, app, b, false);
            }
        }
    }
}

fn draw_counters(f: &mut Frame<'_>, app: &App, area: Rect, block: Block<'_>) {
    let t = app.t;
    let header = Row::new([t.col_counter, t.col_value]).style(HEAD);
    let rows = app.board_items().into_iter().map(|i| {
        let style = if i.query.is_some() {
            Style::new()
        } else {
            app.palette.dim()
        };
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
    f.render_stateful_widget(table, area, &mut state);
}

/// Hours in the day drawn (24, or 23/25 on a daylight-saving change).
fn hours(app: &App) -> usize {
    app.board_day
        .as_ref()
        .map(|d| d.hours.len())
        .filter(|n| *n > 0)
        .unwrap_or(24)
}

/// Messages that reached an outcome in each hour, for `states`.
fn outcome_counts(app: &App, states: &[&str]) -> Vec<i64> {
    (0..hours(app) as i64)
        .map(|h| {
            app.board_hours
                .iter()
                .filter(|c| c.hour == h && states.contains(&c.state.as_str()))
                .map(|c| c.n)
                .sum()
        })
        .collect()
}

/// A coloured mark and a name, for a chart's legend line.
fn legend<'a>(items: &[(&'a str, Color)]) -> Line<'a> {
    let mut spans = vec![Span::raw(" ")];
    for (name, color) in items {
        spans.push(Span::styled("● ", Style::new().fg(*color)));
        spans.push(Span::raw(format!("{name} ")));
    }
    Line::from(spans)
}

/// A chart of series by the hour: every chart shares the x axis and a
/// y-label width, so their hours line up when stacked.
fn hourly_chart<'a>(
    app: &'a App,
    title: String,
    bottom: Line<'a>,
    datasets: Vec<Dataset<'a>>,
    max: f64,
    y_label: impl Fn(f64) -> String,
) -> Chart<'a> {
    // The axis runs over the whole day, hour `h` plotted at `h`. Ratatui
    // pins the first label left and the last right and spreads the others
    // unevenly, so only the start, the middle and the end are labelled:
    // each names the hour drawn above it (0h 12h 24h on a 24-hour day).
    let n = hours(app);
    let dim = app.palette.dim();
    let y = |v: f64| Span::styled(format!("{:>7}", y_label(v)), dim);
    let quarter = |k: usize| {
        let h = (k * n) as f64 / 4.0;
        if h.fract() == 0.0 {
            format!("{h:.0}h")
        } else {
            format!("{h:.1}h")
        }
    };
    Chart::new(datasets)
        .block(Block::default().borders(Borders::ALL).title(title).title_bottom(bottom))
        .legend_position(None)
        .x_axis(
            Axis::default()
                .bounds([0.0, n as f64])
                .labels((0..=2).map(|k| Span::styled(quarter(2 * k), dim))),
        )
        .y_axis(Axis::default().bounds([0.0, max]).labels([y(0.0), y(max)]))
}

fn line_data(values: impl Iterator<Item = Option<f64>>) -> Vec<(f64, f64)> {
    values
        .enumerate()
        .filter_map(|(h, v)| v.map(|v| (h as f64, v)))
        .collect()
}

fn dataset<'a>(name: &'a str, color: Color, data: &'a [(f64, f64)]) -> Dataset<'a> {
    Dataset::default()
        .name(name)
        .marker(Marker::Braille)
        .graph_type(GraphType::Line)
        .style(Style::new().fg(color))
        .data(data)
}

/// Messages per hour by outcome: sent (accepted or sent), delivered,
/// read, failed; the dispatcher's queue now in the title.
fn draw_messages(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let p = app.palette;
    let series: [(&[&str], &str, Color); 4] = [
        (&["accepted", "sent"], t.state("sent"), p.sent),
        (&["delivered"], t.state("delivered"), p.delivered),
        (&["read"], t.state("read"), p.read),
        (&["failed"], t.state("failed"), p.failed),
    ];
    let points: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|(states, _, _)| line_data(outcome_counts(app, states).into_iter().map(|n| Some(n as f64))))
        .collect();
    let max = points.iter().flatten().map(|p| p.1).fold(1.0, f64::max);
    let datasets = series
        .iter()
        .zip(&points)
        .map(|((_, name, color), data)| dataset(name, *color, data))
        .collect();
    let queue = app
        .dispatcher
        .queue
        .map(|q| format!(" · {} {q}", t.queue))
        .unwrap_or_default();
    let bottom = legend(&series.map(|(_, name, color)| (name, color)));
    let chart = hourly_chart(app, format!(" {}{queue} ", t.board_chart), bottom, datasets, max, |v| {
        format!("{v:.0}")
    });
    f.render_widget(chart, area);
}

/// The unit a latency axis reads best in, by its largest value.
fn latency_unit(max_ms: i64) -> (f64, &'static str) {
    match max_ms {
        ..120_000 => (1_000.0, "s"),
        120_000..7_200_000 => (60_000.0, "min"),
        _ => (3_600_000.0, "h"),
    }
}

/// Latency from due to acceptance, p50 and p95, by the hour of acceptance;
/// the unit in the title, the day's figures under the chart.
fn draw_latency(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let p = app.palette;
    let day = app.board_day.as_ref();
    let hours = day.map(|d| d.hours.as_slice()).unwrap_or(&[]);
    let max_ms = hours.iter().filter_map(|h| h.latency_p95_ms).max().unwrap_or(0);
    let (per, unit) = latency_unit(max_ms);
    let p50 = line_data(hours.iter().map(|h| h.latency_p50_ms.map(|v| v as f64 / per)));
    let p95 = line_data(hours.iter().map(|h| h.latency_p95_ms.map(|v| v as f64 / per)));
    let bottom = match day.and_then(|d| d.latency_p50_ms.zip(d.latency_p95_ms).map(|x| (x, d.accepted))) {
        Some(((a, b), n)) => {
            let mut line = legend(&[("p50", p.p50)]);
            line.spans.push(Span::raw(format!("{}  ", duration_text(a))));
            line.spans.extend(legend(&[("p95", p.p95)]).spans.into_iter().skip(1));
            line.spans.push(Span::raw(format!("{} · n={n} ", duration_text(b))));
            line
        }
        None => Line::from(format!(" {} ", t.board_no_data)),
    };
    let max = (max_ms as f64 / per).max(1.0);
    let datasets = vec![dataset("p50", p.p50, &p50), dataset("p95", p.p95, &p95)];
    let title = format!(" {} ({unit}) ", t.board_latency_chart);
    let chart = hourly_chart(app, title, bottom, datasets, max, |v| {
        if v == 0.0 { "0".into() } else { format!("{v:.1}") }
    });
    f.render_widget(chart, area);
}

/// "pico 14 a las 09h", or "sin datos".
fn peak_text(app: &App, day: Option<&DayFigures>) -> String {
    match day.and_then(|d| d.queue_peak) {
        Some((hour, n)) => fill(
            app.t.board_peak,
            &[("n", &n.to_string()), ("hour", &format!("{hour:02}h"))],
        ),
        None => app.t.board_no_data.to_string(),
    }
}

/// The most intentions waiting at once in each hour begun.
fn draw_queue(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let day = app.board_day.as_ref();
    let hours = day.map(|d| d.hours.as_slice()).unwrap_or(&[]);
    let data = line_data(hours.iter().map(|h| h.queue_peak.map(|n| n as f64)));
    let max = data.iter().map(|p| p.1).fold(1.0, f64::max);
    let datasets = vec![dataset(t.board_spark_queue, app.palette.queue, &data)];
    let bottom = Line::from(format!(" {} ", peak_text(app, day)));
    let chart = hourly_chart(app, format!(" {} ", t.board_queue_chart), bottom, datasets, max, |v| {
        format!("{v:.0}")
    });
    f.render_widget(chart, area);
}

/// One bar per hour begun; any value above zero shows at least the lowest
/// bar (a quiet hour with one message is not drawn as none), and an hour
/// with nothing is a dot, so the line still reads as the day's hours.
fn bars(values: &[Option<i64>], begun: usize) -> (Vec<Option<u64>>, u64) {
    let max = values.iter().flatten().copied().max().unwrap_or(0).max(1) as u64;
    let floor = max.div_ceil(8);
    let bars = values
        .iter()
        .take(begun)
        .map(|v| v.filter(|v| *v > 0).map(|v| (v as u64).max(floor)))
        .collect();
    (bars, max)
}

/// The figures as one line each: a label, a bar per hour, the day's
/// summary. `messages`: the messages line too (when no chart shows them).
fn draw_lines(f: &mut Frame<'_>, app: &App, area: Rect, messages: bool) {
    let t = app.t;
    let p = app.palette;
    let day = app.board_day.as_ref();
    let hours = day.map(|d| d.hours.as_slice()).unwrap_or(&[]);
    // Hours begun: the queue has a figure for each (a future day none).
    let begun = match day {
        Some(d) => d.hours.iter().filter(|h| h.queue_peak.is_some()).count(),
        None => 0,
    };
    let mut lines: Vec<(&str, Vec<Option<i64>>, Color, String)> = Vec::new();
    if messages {
        let all = outcome_counts(app, &["accepted", "sent", "delivered", "read", "failed"]);
        let total: i64 = all.iter().sum();
        lines.push((
            t.board_spark_messages,
            all.into_iter().map(Some).collect(),
            p.sent,
            total.to_string(),
        ));
    }
    let latency = match day.and_then(|d| d.latency_p50_ms.zip(d.latency_p95_ms)) {
        Some((a, b)) => format!("p50 {} · p95 {}", duration_text(a), duration_text(b)),
        None => t.board_no_data.to_string(),
    };
    lines.push((
        t.board_spark_latency,
        hours.iter().map(|h| h.latency_p95_ms).collect(),
        p.p95,
        latency,
    ));
    lines.push((
        t.board_spark_queue,
        hours.iter().map(|h| h.queue_peak).collect(),
        p.queue,
        peak_text(app, day),
    ));
    let rows = Layout::vertical(vec![Constraint::Length(1); lines.len()]).split(area);
    for ((label, values, color, summary), row) in lines.into_iter().zip(rows.iter()) {
        let [name, spark, text] = Layout::horizontal([
            Constraint::Length(14),
            Constraint::Length(hours.len().max(24) as u16 + 2),
            Constraint::Fill(1),
        ])
        .areas(*row);
        f.render_widget(Paragraph::new(format!(" {label}")).style(HEAD), name);
        let (data, max) = bars(&values, begun);
        let data: Vec<SparklineBar> = data.into_iter().map(SparklineBar::from).collect();
        let sparkline = Sparkline::default()
            .data(data)
            .max(max)
            .style(Style::new().fg(color))
            .absent_value_symbol("·")
            .absent_value_style(p.dim());
        f.render_widget(sparkline, spark);
        f.render_widget(Paragraph::new(summary).style(p.dim()), text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_space_decides_the_drawing() {
        // 80×24 and 120×40 terminals: the body is 4 rows shorter.
        assert_eq!(layout(80, 20), BoardLayout::Lines);
        assert_eq!(layout(120, 36), BoardLayout::Charts);
        assert_eq!(layout(100, 26), BoardLayout::Charts);
        assert_eq!(layout(100, 20), BoardLayout::ChartAndLines);
    }

    #[test]
    fn latency_axes_read_in_the_best_unit() {
        assert_eq!(latency_unit(0).1, "s");
        assert_eq!(latency_unit(119_999).1, "s");
        assert_eq!(latency_unit(120_000).1, "min");
        assert_eq!(latency_unit(7_200_000).1, "h");
    }

    #[test]
    fn a_small_value_still_shows_a_bar() {
        let (b, max) = bars(&[Some(0), Some(1), Some(100), None, Some(5)], 4);
        assert_eq!(max, 100);
        // Zero and no figure are dots; hours not begun are not drawn.
        assert_eq!(b, vec![None, Some(13), Some(100), None]);
    }
}
