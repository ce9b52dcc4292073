//! The console's `:doctor` (issue 26 §1): the same checks, messages and
//! fixes as `unavez doctor`, through the update function and the worker on
//! a real ledger, in an overlay any key closes.

mod tui_support;

use unavez::config::Role;
use unavez::tui::keys::{Action, Mode};

use tui_support::{clinic, render};

#[test]
fn doctor_shows_the_report_in_an_overlay() {
    let mut fx = clinic(3);
    let mut app = fx.loaded(Role::Technician, "tecnico");
    fx.command(&mut app, "doctor");
    assert_eq!(app.mode, Mode::Doctor);
    let checks = app.doctor.clone().expect("the worker answered");
    let ids: Vec<&str> = checks.iter().map(|c| c.id.as_str()).collect();
    for id in [
        "config",
        "secrets",
        "ledger",
        "schema",
        "ledger_file",
        "disk",
        "channel",
        "dispatchers",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    let screen = render(&app, 120, 40);
    assert!(screen.contains("unavez doctor"), "{screen}");
    assert!(screen.contains("✓ config"), "{screen}");
    assert!(screen.contains("✓ schema       esquema al día"), "{screen}");
    assert!(
        screen.contains("todo en orden") || screen.contains("hay problemas"),
        "{screen}"
    );
    fx.act(&mut app, Action::Back);
    assert_eq!(app.mode, Mode::Normal);
}
