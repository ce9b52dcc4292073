//! The Tablero's pictures are true (issue 25, section 6): the delivered
//! counter is a funnel step (a message read was delivered), a counter's
//! rows are named by the counter, and the charts' hour labels sit over the
//! hours they name.

mod tui_support;

use unavez::config::Role;
use unavez::tui::keys::{Action, Screen};

use tui_support::{clinic, render};

fn board() -> (tui_support::Fixture, unavez::tui::app::App) {
    let mut fx = clinic(60);
    let mut app = fx.app("supervisora", Role::Supervisor);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    fx.act(&mut app, Action::Goto(Screen::Board));
    (fx, app)
}

fn value(app: &unavez::tui::app::App, label: &str) -> i64 {
    let item = app.board_items().into_iter().find(|i| i.label == label).unwrap();
    item.value.parse().unwrap()
}

#[test]
fn delivered_counts_what_was_read_too() {
    let (_fx, app) = board();
    let (delivered, read) = (value(&app, "Entregadas"), value(&app, "Leídas"));
    assert!(read > 0);
    assert!(delivered >= read, "Entregadas {delivered} < Leídas {read}");
    let b = app.board.as_ref().unwrap();
    let n = |s: &str| b.by_state.iter().filter(|(x, _)| x == s).map(|(_, n)| n).sum::<i64>();
    assert_eq!(delivered, n("delivered") + n("read"), "read counts as delivered");
}

#[test]
fn a_counter_s_breadcrumb_names_the_counter() {
    let (mut fx, mut app) = board();
    // The second counter: Inciertas.
    fx.act(&mut app, Action::Down);
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Counter);
    assert_eq!(app.breadcrumbs(), "Tablero › Inciertas");
}

#[test]
fn hour_labels_sit_over_their_hours() {
    let (_fx, app) = board();
    let screen = render(&app, 120, 40);
    let axis = screen.lines().find(|l| l.contains("12h")).unwrap();
    let plot_start = screen
        .lines()
        .find(|l| l.contains("└───"))
        .and_then(|l| l.chars().position(|c| c == '└'))
        .unwrap();
    let chars: Vec<char> = axis.chars().collect();
    let col = |label: &str| {
        let s: String = chars.iter().collect();
        s.find(label).map(|b| s[..b].chars().count()).unwrap()
    };
    let end = chars.len() - 2; // inside the right border
    let mid = col("12h") + 1; // the label's centre
    let want = plot_start + 1 + (end - plot_start) / 2;
    assert!(
        mid.abs_diff(want) <= 1,
        "12h at {mid}, the day's middle at {want}: {axis}"
    );
    assert!(!axis.contains("6h") && !axis.contains("23h"), "{axis}");
}
