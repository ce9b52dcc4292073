//! Store errors on screen: a real locked ledger and a real failing read
//! reach the flash line as a sentence in the configured language with the
//! technical text shortened, never as the library's English; `enter` on
//! the flash (or `:error`) shows the whole text.

mod tui_support;

use std::time::Duration;

use unavez::config::{Language, Role};
use unavez::ops::OpKind;
use unavez::store::open_connection;
use unavez::tui::app::{App, FlashKind};
use unavez::tui::failure::FailureKind;
use unavez::tui::keys::{Action, Mode, Screen};

use tui_support::{Fixture, clinic, render};

fn loaded(fx: &mut Fixture, role: Role, operator: &str) -> App {
    let mut app = fx.app(operator, role);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    app
}

/// The text inside the error overlay (90 columns, centred on 120).
fn overlay_text(app: &App) -> String {
    let inside: Vec<String> = render(app, 120, 40)
        .lines()
        .map(|l| l.chars().skip(16).take(88).collect())
        .collect();
    inside.join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_locked_ledger_is_said_in_spanish_and_shown_whole_on_enter() {
    let mut fx = clinic(20);
    let mut app = loaded(&mut fx, Role::Supervisor, "supervisora");
    fx.store.set_busy_timeout(Duration::from_millis(50)).unwrap();
    // Another process holds the write lock.
    let other = open_connection(&fx.db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();

    fx.act(&mut app, Action::Op(OpKind::Resolve));
    assert_eq!(app.mode, Mode::Form);
    fx.type_text(&mut app, "nada más que hacer");
    fx.act(&mut app, Action::Submit);
    fx.act(&mut app, Action::Confirm);
    // Sent now, without waiting out the grace (tests/tui_calls.rs).
    let reqs = app.commit_pending();
    fx.run(&mut app, reqs);

    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Error);
    assert!(
        flash
            .text
            .starts_with("Error: La base de datos está ocupada por otro proceso"),
        "{}",
        flash.text
    );
    assert!(flash.text.ends_with("· enter: detalle"), "{}", flash.text);
    // The technical text only as a short aside, in parentheses.
    let aside = flash.text.split_once(" (").unwrap().1.split_once(')').unwrap().0;
    assert!(aside.starts_with("database") && aside.chars().count() <= 40, "{aside}");
    let failure = app.failure.clone().unwrap();
    assert_eq!(failure.kind, FailureKind::Busy);
    // The line on screen says it in Spanish too.
    let screen = render(&app, 120, 40);
    let line = screen.lines().nth(38).unwrap();
    assert!(line.starts_with("Error: La base de datos está ocupada"), "{line}");

    // Enter shows it whole instead of opening a row.
    fx.act(&mut app, Action::Open);
    assert_eq!(app.mode, Mode::Error);
    assert_eq!(app.screen, Screen::Attention);
    let text = overlay_text(&app);
    assert!(text.contains("Detalle del error"), "{text}");
    assert!(
        text.contains("La base de datos está ocupada por otro proceso"),
        "{text}"
    );
    assert!(text.contains(&failure.detail), "{text}");
    // Read, it leaves the line: enter opens the row again.
    fx.act(&mut app, Action::Back);
    assert_eq!(app.mode, Mode::Normal);
    assert!(app.flash.is_none());
    other.execute_batch("ROLLBACK").unwrap();
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Detail);
    // `:error` still shows the last one.
    fx.act(&mut app, Action::OpenCommand);
    fx.type_text(&mut app, "error");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Error);
    assert!(overlay_text(&app).contains(&failure.detail));
}

#[test]
fn a_failing_read_is_said_in_the_configured_language() {
    let mut fx = clinic(20);
    fx.ctx.config.language = Language::En;
    let mut app = loaded(&mut fx, Role::Supervisor, "supervisora");
    // The Tablero's counts table is gone: its read fails for real.
    open_connection(&fx.db)
        .unwrap()
        .execute_batch("DROP TABLE intention_counts")
        .unwrap();
    fx.act(&mut app, Action::Goto(Screen::Board));
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Error);
    assert!(
        flash
            .text
            .starts_with("Error: An internal operation failed (database error: no such table"),
        "{}",
        flash.text
    );
    assert!(flash.text.ends_with("· enter: detail"), "{}", flash.text);
    fx.act(&mut app, Action::Open);
    assert_eq!(app.mode, Mode::Error);
    let text = overlay_text(&app);
    assert!(text.contains("no such table: intention_counts"), "{text}");
}

#[test]
fn without_an_error_the_error_command_says_so() {
    let mut fx = clinic(10);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    fx.act(&mut app, Action::OpenCommand);
    fx.type_text(&mut app, "error");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.flash.unwrap().text, "sin errores recientes");
}
