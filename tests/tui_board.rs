//! The Tablero's day drawn into a `TestBackend` buffer: the figures come
//! from the worker's one ledger read, each chart (or one-line chart at
//! 80×24) sits where the layout puts it, in the palette's colours.

mod tui_support;

use chrono::Duration;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use unavez::config::Role;
use unavez::tui::app::App;
use unavez::tui::keys::{Action, Screen};
use unavez::tui::theme::{DARK, LIGHT, Palette};

use tui_support::{Fixture, clinic, now};

fn board(fx: &mut Fixture) -> App {
    let mut app = fx.app("supervisora", Role::Supervisor);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    fx.act(&mut app, Action::Goto(Screen::Board));
    app
}

fn buffer(app: &App, w: u16, h: u16) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| unavez::tui::view::draw(f, app)).unwrap();
    term.backend().buffer().clone()
}

fn row_text(b: &Buffer, y: u16) -> String {
    (0..b.area.width).map(|x| b[(x, y)].symbol()).collect()
}

/// The row whose text contains `needle`.
fn row_of(b: &Buffer, needle: &str) -> u16 {
    (0..b.area.height)
        .find(|y| row_text(b, *y).contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not on screen"))
}

/// Colours of the braille cells (plotted points) in rows `ys`, columns `xs`.
fn plotted(b: &Buffer, xs: std::ops::Range<u16>, ys: std::ops::Range<u16>) -> Vec<Color> {
    let mut out = Vec::new();
    for y in ys {
        for x in xs.clone() {
            let c = &b[(x, y)];
            if c.symbol().chars().all(|ch| ('\u{2801}'..='\u{28ff}').contains(&ch)) {
                out.push(c.fg);
            }
        }
    }
    out
}

#[test]
fn the_figures_are_the_ledger_s_day() {
    let mut fx = clinic(60);
    let app = board(&mut fx);
    let day = app.board_day.clone().expect("day figures loaded");
    let start = chrono::NaiveDate::from_ymd_opt(2026, 12, 1)
        .unwrap()
        .and_hms_opt(5, 0, 0)
        .unwrap()
        .and_utc();
    let direct = fx
        .store
        .read(|tx| {
            unavez::board::read_day(
                tx,
                "2026-12-01".parse().unwrap(),
                start,
                start + Duration::days(1),
                now(),
            )
        })
        .unwrap();
    assert_eq!(day, direct);
    assert_eq!(day.hours.len(), 24);
    // 08:00: the hours up to now have a queue figure, the rest none.
    assert!(day.hours[..9].iter().all(|h| h.queue_peak.is_some()));
    assert!(day.hours[9..].iter().all(|h| h.queue_peak.is_none()));
    assert!(day.accepted > 0 && day.latency_p95_ms >= day.latency_p50_ms);
    // The counters' latency row uses the same figures.
    let item = app.board_items().into_iter().last().unwrap();
    assert!(item.value.contains(" · p95 "), "{}", item.value);
}

/// Each chart at 120×40, its points in its palette colour, in the dark
/// and in the light theme.
fn check_charts(app: &App, p: &Palette) {
    let b = buffer(app, 120, 40);
    let messages = row_of(&b, "Mensajes por hora");
    let latency = row_of(&b, "Latencia a aceptación (min)");
    let queue = row_of(&b, "Cola por hora (máximo)");
    assert!(messages < latency && latency < queue, "{messages} {latency} {queue}");
    assert!(row_text(&b, queue + 11).contains("pico 62 a las 07h"));
    let charts = 66..120;
    let outcome = plotted(&b, charts.clone(), messages + 1..latency);
    assert!(!outcome.is_empty());
    assert!(
        outcome
            .iter()
            .all(|c| [p.sent, p.delivered, p.read, p.failed].contains(c)),
        "{outcome:?}"
    );
    let lat = plotted(&b, charts.clone(), latency + 1..queue);
    assert!(
        !lat.is_empty() && lat.iter().all(|c| [p.p50, p.p95].contains(c)),
        "{lat:?}"
    );
    let q = plotted(&b, charts, queue + 1..queue + 11);
    assert!(!q.is_empty() && q.iter().all(|c| *c == p.queue), "{q:?}");
    // The legend under the latency chart names the day's figures.
    let legend = row_text(&b, queue - 1);
    assert!(
        legend.contains("● p50") && legend.contains("● p95") && legend.contains("n="),
        "{legend}"
    );
}

#[test]
fn three_charts_at_120x40_in_either_theme() {
    let mut fx = clinic(60);
    let mut app = board(&mut fx);
    check_charts(&app, &DARK);
    app.palette = &LIGHT;
    check_charts(&app, &LIGHT);
}

#[test]
fn at_80x24_the_figures_are_one_line_each_under_the_counters() {
    let mut fx = clinic(60);
    let mut app = board(&mut fx);
    app.palette = &LIGHT;
    let b = buffer(&app, 80, 24);
    let (m, l, q) = (
        row_of(&b, " Mensajes "),
        row_of(&b, " Latencia p95 "),
        row_of(&b, " Cola "),
    );
    assert_eq!((m, l, q), (19, 20, 21));
    // A bar per hour begun (08:00: nine), from column 14; empty hours
    // are dim dots; nothing after now.
    let bars: String = (14..23).map(|x| b[(x, q)].symbol().to_string()).collect();
    assert_eq!(bars.chars().filter(|c| *c == '·').count(), 7, "{bars}");
    assert_eq!(b[(14, q)].fg, LIGHT.dim);
    assert_eq!(b[(21, q)].fg, LIGHT.queue);
    assert_eq!(b[(23, q)].symbol(), " ");
    assert!(row_text(&b, q).contains("pico 62 a las 07h"));
    assert!(row_text(&b, l).contains("p50 10.4 min · p95 10.8 min"));
    // The counters above are whole: nothing is cut.
    assert!(
        row_text(&b, 17).contains("10.4 min · p95 10.8 min"),
        "{}",
        row_text(&b, 17)
    );
}

/// The day figures are re-read once a minute while the Tablero shows,
/// at once on `ctrl-r` or for another day, never on every tick.
#[test]
fn the_day_figures_are_read_once_a_minute_or_on_demand() {
    use unavez::tui::worker::Request;
    let asks = |reqs: &[Request]| reqs.iter().filter(|r| matches!(r, Request::BoardDay { .. })).count();
    let mut fx = clinic(20);
    let mut app = board(&mut fx);
    assert!(app.board_day.is_some());
    assert_eq!(asks(&app.tick(now() + Duration::seconds(5))), 0);
    assert_eq!(asks(&app.tick(now() + Duration::seconds(59))), 0);
    assert_eq!(asks(&app.tick(now() + Duration::seconds(61))), 1);
    assert_eq!(asks(&app.on_action(Action::Refresh)), 1);
    let reqs = app.on_action(Action::DayPrev);
    assert_eq!(asks(&reqs), 1);
    // Yesterday's figures are not drawn under today's title meanwhile.
    assert!(app.board_day.is_none());
    fx.run(&mut app, reqs);
    assert!(app.board_day.is_some());
}
