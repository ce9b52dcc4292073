//! Every screen rendered with `TestBackend` at a fixed size from a seeded
//! clinic and a fixed clock, compared with committed `insta` snapshots.

mod tui_support;

use unavez::config::{Language, Role};
use unavez::tui::keys::{Action, Screen};

use tui_support::{clinic, render};

const W: u16 = 100;
const H: u16 = 30;

fn loaded(role: Role, operator: &str) -> (tui_support::Fixture, unavez::tui::app::App) {
    let mut fx = clinic(60);
    let mut app = fx.app(operator, role);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    (fx, app)
}

#[test]
fn attention() {
    let (_fx, app) = loaded(Role::FrontDesk, "recepcion");
    insta::assert_snapshot!("attention", render(&app, W, H));
}

#[test]
fn attention_at_80x24() {
    let (_fx, app) = loaded(Role::Supervisor, "supervisora");
    insta::assert_snapshot!("attention_80x24", render(&app, 80, 24));
}

#[test]
fn attention_at_120x40() {
    let (_fx, app) = loaded(Role::FrontDesk, "recepcion");
    insta::assert_snapshot!("attention_120x40", render(&app, 120, 40));
}

#[test]
fn attention_at_140x40_shows_message_and_evidence() {
    let (_fx, app) = loaded(Role::FrontDesk, "recepcion");
    insta::assert_snapshot!("attention_140x40", render(&app, 140, 40));
}

#[test]
fn upcoming_at_80x24() {
    let (mut fx, mut app) = loaded(Role::FrontDesk, "recepcion");
    fx.act(&mut app, Action::Goto(Screen::Upcoming));
    insta::assert_snapshot!("upcoming_80x24", render(&app, 80, 24));
}

#[test]
fn attention_in_english() {
    let mut fx = clinic(60);
    fx.ctx.config.language = Language::En;
    let mut app = fx.app("supervisora", Role::Supervisor);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    insta::assert_snapshot!("attention_en", render(&app, W, H));
}

#[test]
fn upcoming() {
    let (mut fx, mut app) = loaded(Role::FrontDesk, "recepcion");
    fx.act(&mut app, Action::Goto(Screen::Upcoming));
    insta::assert_snapshot!("upcoming", render(&app, W, H));
}

#[test]
fn board_and_its_drill_down() {
    let (mut fx, mut app) = loaded(Role::Supervisor, "supervisora");
    fx.act(&mut app, Action::Goto(Screen::Board));
    insta::assert_snapshot!("board", render(&app, W, H));
    // Second counter: uncertain.
    fx.act(&mut app, Action::Down);
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Counter);
    insta::assert_snapshot!("board_counter", render(&app, W, H));
}

#[test]
fn detail() {
    let (mut fx, mut app) = loaded(Role::Supervisor, "supervisora");
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Detail);
    insta::assert_snapshot!("detail", render(&app, W, H));
}

#[test]
fn reprocess_for_technicians() {
    let (mut fx, mut app) = loaded(Role::Technician, "tecnico");
    fx.act(&mut app, Action::Goto(Screen::Reprocess));
    insta::assert_snapshot!("reprocess", render(&app, W, H));
}

#[test]
fn help_form_and_confirmation_overlays() {
    let (mut fx, mut app) = loaded(Role::Supervisor, "supervisora");
    fx.act(&mut app, Action::Help);
    insta::assert_snapshot!("help_supervisor", render(&app, W, H));
    fx.act(&mut app, Action::Back);
    fx.act(&mut app, Action::Op(unavez::ops::OpKind::Verify));
    fx.type_text(&mut app, "llamé a la paciente");
    insta::assert_snapshot!("form_verify", render(&app, W, H));
    fx.act(&mut app, Action::Submit);
    insta::assert_snapshot!("confirm_verify", render(&app, W, H));
}

#[test]
fn front_desk_help_hides_what_it_may_not_do() {
    let (mut fx, mut app) = loaded(Role::FrontDesk, "recepcion");
    fx.act(&mut app, Action::Help);
    let screen = render(&app, W, H);
    assert!(!screen.contains("autorizar reenvío"), "{screen}");
    insta::assert_snapshot!("help_front_desk", screen);
}

// tablero, themes, progress, errors

#[test]
fn board_at_80x24_draws_the_day_in_lines() {
    let (mut fx, mut app) = loaded(Role::Supervisor, "supervisora");
    fx.act(&mut app, Action::Goto(Screen::Board));
    insta::assert_snapshot!("board_80x24", render(&app, 80, 24));
}

#[test]
fn board_at_120x40_draws_three_charts() {
    let (mut fx, mut app) = loaded(Role::Supervisor, "supervisora");
    fx.act(&mut app, Action::Goto(Screen::Board));
    insta::assert_snapshot!("board_120x40", render(&app, 120, 40));
}

/// The light palette, colours included (the buffer's own listing of
/// every change of style).
#[test]
fn attention_in_the_light_theme() {
    use ratatui::{Terminal, backend::TestBackend};
    let (_fx, mut app) = loaded(Role::Supervisor, "supervisora");
    app.palette = &unavez::tui::theme::LIGHT;
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    term.draw(|f| unavez::tui::view::draw(f, &app)).unwrap();
    insta::assert_debug_snapshot!("attention_light_80x24", term.backend().buffer());
}

// --- issue 25 §2 (words): Detalle for the front desk ---

/// Detalle opens with the verdict and names the patient, the service and
/// the appointment's local time; the channel's own words are one key (`e`)
/// away, never the default view.
#[test]
fn detail_at_80x24_and_120x40_and_its_technical_view() {
    let (mut fx, mut app) = loaded(Role::FrontDesk, "recepcion");
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Detail);
    let small = render(&app, 80, 24);
    insta::assert_snapshot!("detail_80x24", small);
    let big = render(&app, 120, 40);
    insta::assert_snapshot!("detail_120x40", big);
    for raw in [
        "demo fixture",
        "cita-",
        ":aviso-",
        "Compromiso",
        "Día 20",
        "UTC",
        "T0",
        "_",
    ] {
        assert!(!big.contains(raw), "{raw:?} on the default Detalle:\n{big}");
    }
    fx.act(&mut app, Action::ToggleTechnical);
    let tech = render(&app, 120, 40);
    insta::assert_snapshot!("detail_technical_120x40", tech);
    assert!(tech.contains("demo fixture") && tech.contains(":aviso-"), "{tech}");
    fx.act(&mut app, Action::ToggleTechnical);
    assert_eq!(render(&app, 120, 40), big);
}

/// A title longer than the screen leaves parts out whole (the service
/// first), never cuts a word.
#[test]
fn detail_title_leaves_out_what_does_not_fit() {
    let (mut fx, mut app) = loaded(Role::FrontDesk, "recepcion");
    fx.act(&mut app, Action::Open);
    let c = &mut app.detail.as_mut().unwrap().commitment.as_mut().unwrap().commitment;
    c.name = Some("María de los Ángeles Fernández Quispe".into());
    c.service = Some("Medicina física y rehabilitación pediátrica".into());
    let screen = render(&app, 80, 24);
    let title = screen.lines().find(|l| l.contains("┌ Detalle")).unwrap();
    assert!(
        title.contains("María de los Ángeles Fernández Quispe · hoy 10:40"),
        "{title}"
    );
    assert!(!title.contains("Medicina"), "{title}");
    let screen = render(&app, 120, 40);
    let title = screen.lines().find(|l| l.contains("┌ Detalle")).unwrap();
    assert!(
        title.contains("Quispe · Medicina física y rehabilitación pediátrica · hoy 10:40"),
        "{title}"
    );
}

/// Issue 25 §4: a cancellation (like a send) is never undone, and its
/// confirmation says so before `s`.
#[test]
fn a_cancel_confirmation_says_it_cannot_be_undone() {
    let (mut fx, mut app) = loaded(Role::Supervisor, "supervisora");
    let i = app
        .attention
        .rows
        .iter()
        .position(|r| r.state.as_str() == "review")
        .expect("a message in review");
    app.attention.select(i);
    fx.act(&mut app, Action::Op(unavez::ops::OpKind::Cancel));
    fx.type_text(&mut app, "la cita ya no corresponde");
    fx.act(&mut app, Action::Submit);
    let screen = render(&app, W, H);
    assert!(screen.contains("Una cancelación no se puede deshacer."), "{screen}");
    insta::assert_snapshot!("confirm_cancel", screen);
}
