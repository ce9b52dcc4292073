//! Stored text never acts on the operator's terminal: a patient named
//! `"\u001b[31mRED\u001b[0m\u0007"`, a service with an OSC title sequence,
//! a place with a carriage return, a provider error with escapes and an
//! operator's reason with CR and BEL are rendered (TestBackend) as visible
//! escapes, and no cell of the console holds a control character.

mod tui_support;

use chrono::Utc;
use unavez::config::Role;
use unavez::domain::state::Signal;
use unavez::ops::OpKind;
use unavez::store::{Cause, Entry};
use unavez::tui::app::App;
use unavez::tui::keys::{Action, Mode, Screen};

use tui_support::{Fixture, clinic, render};

const EVIL: &str = "\u{1b}[31mRED\u{1b}[0m\u{7}";
const EVIL_SHOWN: &str = "\\e[31mRED\\e[0m\\a";
const KEY: &str = "cita-evil:aviso-reserva:v1";

fn controls(screen: &str) -> Vec<char> {
    screen.chars().filter(|c| c.is_control() && *c != '\n').collect()
}

fn assert_inert(screen: &str) {
    assert!(controls(screen).is_empty(), "control characters on screen: {screen:?}");
    assert!(!screen.contains('\u{fffd}'), "text reached the screen raw:\n{screen}");
}

/// Books `cita-evil` with the real binary, as a user imports an agenda.
fn book_evil(fx: &Fixture) {
    let starts = Utc::now() + chrono::Duration::days(2);
    let ev = serde_json::json!({
        "event_id": "cita-evil-1",
        "type": "appointment.scheduled",
        "ref": "cita-evil",
        "version": 1,
        "starts_at": starts.to_rfc3339(),
        "contact": {"phone": "+51990000999", "name": EVIL, "language": "es"},
        "service": "Odonto\u{1b}]0;pwned\u{7}logía",
        "location": "Sede\rB",
    });
    let file = fx.dir.path().join("evil.jsonl");
    std::fs::write(&file, format!("{ev}\n")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_unavez"))
        .arg("--db")
        .arg(&fx.db)
        .args(["import", file.to_str().unwrap()])
        .env_remove("UNAVEZ_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn detail(fx: &mut Fixture, app: &mut App, key: &str) -> String {
    fx.act(app, Action::OpenCommand);
    fx.type_text(app, &format!("detalle {key}"));
    fx.act(app, Action::Submit);
    assert_eq!(app.screen, Screen::Detail, "{:?}", app.flash);
    render(app, 120, 40)
}

#[test]
fn names_services_places_errors_and_reasons_are_shown_as_visible_escapes() {
    let mut fx = clinic(10);
    book_evil(&fx);
    let id = fx.store.read(|tx| tx.find_intention(KEY)).unwrap().id;
    let body = fx.store.read(|tx| tx.intention(id)).unwrap().body;
    assert!(body.contains(EVIL), "the stored text keeps the exact bytes: {body:?}");
    // The provider refused it with an error that carries escapes too.
    for s in [Signal::Claim, Signal::Failed] {
        fx.store
            .write(|tx| {
                tx.signal(
                    id,
                    s,
                    &Entry {
                        signal: s.name(),
                        cause: Cause::Dispatcher,
                        evidence: Some(&format!("engine said {EVIL}")),
                        note: Some(&format!("detail {EVIL}")),
                        commitment_version: Some(1),
                    },
                    Utc::now(),
                )
            })
            .unwrap();
    }

    let mut app = fx.app("supervisora", Role::Supervisor);
    // The clinic's clock is fixed; this row was booked now.
    app.now = Utc::now();
    fx.act(&mut app, Action::OpenFilter);
    fx.type_text(&mut app, "cita-evil");
    fx.act(&mut app, Action::Submit);
    // Wide enough for the last-evidence column.
    let screen = render(&app, 160, 30);
    assert_inert(&screen);
    assert!(screen.contains("cita-evil"), "{screen}");
    // The channel's own words are not on a front-desk list (issue 25 §2).
    assert!(!screen.contains("engine said"), "{screen}");

    let screen = detail(&mut fx, &mut app, KEY);
    assert_inert(&screen);
    assert!(screen.contains(EVIL_SHOWN), "{screen}");
    assert!(screen.contains("Odonto\\e]0;pwned\\alogía"), "{screen}");
    assert!(screen.contains("Sede\\rB"), "{screen}");
    // Detalle's technical view (`e`) shows them, inert.
    fx.act(&mut app, Action::ToggleTechnical);
    let screen = render(&app, 120, 40);
    assert_inert(&screen);
    assert!(screen.contains("engine said \\e[31mRE"), "{screen}");
    assert!(screen.contains("detail \\e[31mRE"), "{screen}");
    fx.act(&mut app, Action::ToggleTechnical);

    // A resend whose reason carries a carriage return and a bell: the
    // form, the confirmation and the new intention's detail stay inert.
    fx.act(&mut app, Action::Op(OpKind::AuthorizeResend));
    fx.type_text(&mut app, "llamó\rotra vez\u{7}");
    let screen = render(&app, 120, 40);
    assert_inert(&screen);
    assert!(screen.contains("llamó\\rotra vez\\a"), "{screen}");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Confirm);
    let screen = render(&app, 120, 40);
    assert_inert(&screen);
    assert!(screen.contains("llamó\\rotra vez\\a"), "{screen}");
    fx.act(&mut app, Action::Confirm);
    let resend = format!("{KEY}:reenvio:1");
    let stored = fx.store.read(|tx| tx.find_intention(&resend)).unwrap();
    assert!(stored.reason.as_deref().unwrap().contains("llamó\rotra vez\u{7}"));
    let screen = detail(&mut fx, &mut app, &resend);
    assert_inert(&screen);
    assert!(screen.contains("llamó\\rotra vez\\a"), "{screen}");
    assert!(screen.contains(EVIL_SHOWN), "{screen}");

    // A flash quoting stored text (an error, a refusal) is inert as well.
    app.flash = Some(unavez::tui::app::Flash {
        kind: unavez::tui::app::FlashKind::Error,
        text: format!("Error: {EVIL}"),
        at: app.now,
    });
    let screen = render(&app, 120, 40);
    assert_inert(&screen);
    assert!(screen.contains(&format!("Error: {EVIL_SHOWN}")), "{screen}");
}
