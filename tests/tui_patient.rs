//! Issue 25 §1 in the console, driven through `App` and the real worker
//! on a seeded clinic: the patient card (from a filtered row and from
//! `:paciente`, with its chooser) and the actions it offers; snapshots of
//! the card, the chooser and the help at 80×24 and 120×40. The fixes to
//! the lists' navigation are in `tui_front_desk_nav.rs`.

mod tui_support;

use unavez::config::Role;
use unavez::ops::OpKind;
use unavez::tui::app::App;
use unavez::tui::keys::{Action, Mode, Screen};

use tui_support::{Fixture, clinic, render};

/// The last four digits of the phone of the Atención row `i`, and its
/// patient's name.
fn caller(app: &App, i: usize) -> (String, String, String) {
    let r = &app.attention.rows[i];
    let phone = r.phone.clone().expect("the demo clinic has phones");
    let tail = phone[phone.len() - 4..].to_string();
    (phone, tail, r.name.clone().expect("and names"))
}

#[test]
fn enter_on_a_filtered_row_opens_the_patient_card_and_enter_there_a_detalle() {
    let mut fx = clinic(60);
    let mut app = fx.loaded(Role::FrontDesk, "recepcion");
    let (phone, tail, name) = caller(&app, 0);
    fx.search(&mut app, &tail);
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Patient);
    let card = app.patient.card.as_ref().expect("the card is read");
    assert_eq!(card.phone, phone);
    assert_eq!(card.name.as_deref(), Some(name.as_str()));
    assert!(!card.commitments.is_empty());
    assert_eq!(app.breadcrumbs(), format!("Atención › Paciente {name}"));
    let screen = render(&app, 120, 40);
    assert!(!screen.contains(&phone), "the phone is masked: {screen}");
    // One key opens the selected message's Detalle; esc comes back.
    let iid = app.patient.card.as_ref().unwrap().commitments[0].notifications[0].intention_id;
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Detail);
    assert_eq!(app.detail.as_ref().map(|d| d.intention.id), Some(iid));
    fx.act(&mut app, Action::Back);
    assert_eq!(app.screen, Screen::Patient);
    // Without a search, enter on a row still opens its Detalle.
    fx.act(&mut app, Action::Back);
    fx.act(&mut app, Action::Back);
    assert!(app.filter.is_empty());
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Detail);
}

#[test]
fn paciente_from_any_screen_opens_the_card_or_a_chooser_first() {
    let mut fx = clinic(60);
    let mut app = fx.loaded(Role::FrontDesk, "recepcion");
    let (phone, tail, _) = caller(&app, 0);
    fx.act(&mut app, Action::Goto(Screen::Board));
    fx.command(&mut app, &format!("paciente {tail}"));
    assert_eq!(app.screen, Screen::Patient);
    assert_eq!(app.patient.phone.as_deref(), Some(phone.as_str()));
    assert_eq!(app.breadcrumbs().split(" › ").next(), Some("Tablero"));
    // A surname several patients share: the chooser first.
    let surname = several_patients_surname(&app, &mut fx);
    fx.command(&mut app, &format!("paciente {surname}"));
    assert_eq!(app.mode, Mode::Chooser, "{surname}");
    let choices = app.patient.choices.clone();
    assert!(choices.len() >= 2);
    fx.act(&mut app, Action::Down);
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.patient.phone.as_deref(), Some(choices[1].phone.as_str()));
    // A digit picks too; esc closes without opening.
    fx.command(&mut app, &format!("paciente {surname}"));
    fx.act(&mut app, Action::Input('1'));
    assert_eq!(app.patient.phone.as_deref(), Some(choices[0].phone.as_str()));
    fx.command(&mut app, &format!("paciente {surname}"));
    fx.act(&mut app, Action::Abort);
    assert_eq!(
        (app.mode, app.patient.phone.as_deref()),
        (Mode::Normal, Some(choices[0].phone.as_str()))
    );
    // Nobody: said on the line.
    fx.command(&mut app, "paciente zzqx");
    assert_eq!(app.mode, Mode::Normal);
    assert!(app.flash.as_ref().unwrap().text.contains("zzqx"));
}

/// A surname two patients of the demo clinic share.
fn several_patients_surname(app: &App, fx: &mut Fixture) -> String {
    let names: Vec<String> = fx
        .store
        .read(|tx| tx.patients("a", 200))
        .unwrap()
        .into_iter()
        .filter_map(|p| p.name)
        .collect();
    let _ = app;
    names
        .iter()
        .filter_map(|n| n.split_whitespace().nth(1).map(str::to_string))
        .find(|s| names.iter().filter(|n| n.ends_with(&format!(" {s}"))).count() >= 2)
        .expect("two patients share a surname")
}

#[test]
fn the_card_offers_only_the_actions_of_the_role() {
    let mut fx = clinic(60);
    for (role, who) in [(Role::FrontDesk, "recepcion"), (Role::Supervisor, "supervisora")] {
        let mut app = fx.loaded(role, who);
        let (_, tail, _) = caller(&app, 0);
        fx.command(&mut app, &format!("paciente {tail}"));
        assert_eq!(app.screen, Screen::Patient);
        let screen = render(&app, 120, 40);
        let may_resend = screen.contains("a autorizar reenvío");
        assert_eq!(may_resend, role == Role::Supervisor, "{screen}");
        // The key follows the same rule: refused for the desk, a form for
        // the supervisor, on the selected message.
        fx.act(&mut app, Action::Op(OpKind::Resolve));
        assert_eq!(app.mode, Mode::Form);
        let target = app.form.as_ref().unwrap().target.clone();
        let first = app.patient.card.as_ref().unwrap().commitments[0].notifications[0].intention_id;
        assert_eq!(target.intention_id, Some(first));
        fx.act(&mut app, Action::Abort);
    }
}

// --- snapshots: the patient card, the chooser and the help ---

fn card_app(fx: &mut Fixture, role: Role, who: &str) -> App {
    let mut app = fx.loaded(role, who);
    let (_, tail, _) = caller(&app, 0);
    fx.search(&mut app, &tail);
    fx.act(&mut app, Action::Open);
    app
}

#[test]
fn patient_card_snapshots() {
    let mut fx = clinic(60);
    let mut app = card_app(&mut fx, Role::FrontDesk, "recepcion");
    insta::assert_snapshot!("patient_card_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("patient_card_120x40", render(&app, 120, 40));
    fx.act(&mut app, Action::Down);
    insta::assert_snapshot!("patient_card_second_message_120x40", render(&app, 120, 40));
}

#[test]
fn chooser_snapshots() {
    let mut fx = clinic(60);
    let mut app = fx.loaded(Role::FrontDesk, "recepcion");
    let surname = several_patients_surname(&app, &mut fx);
    fx.command(&mut app, &format!("paciente {surname}"));
    assert_eq!(app.mode, Mode::Chooser);
    insta::assert_snapshot!("chooser_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("chooser_120x40", render(&app, 120, 40));
}

#[test]
fn help_snapshots() {
    let mut fx = clinic(60);
    let mut app = fx.loaded(Role::Supervisor, "supervisora");
    fx.act(&mut app, Action::Help);
    insta::assert_snapshot!("help_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("help_120x40", render(&app, 120, 40));
    fx.act(&mut app, Action::Bottom);
    insta::assert_snapshot!("help_80x24_scrolled", render(&app, 80, 24));
}

#[test]
fn an_action_from_the_card_is_refused_when_the_message_changed_since_it_was_shown() {
    let mut fx = clinic(60);
    let mut app = card_app(&mut fx, Role::FrontDesk, "recepcion");
    let target = app.target().expect("a message is selected");
    let id = target.intention_id.unwrap();
    fx.act(&mut app, Action::Op(OpKind::Resolve));
    fx.type_text(&mut app, "ya llamó");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Confirm);
    // Meanwhile the channel reports on it.
    let at = unavez::store::ms(tui_support::now()) + 1_000;
    unavez::store::open_connection(&fx.db)
        .unwrap()
        .execute_batch(&format!(
            "UPDATE intentions SET state = 'failed', state_changed_at = {at} WHERE id = {id}"
        ))
        .unwrap();
    fx.act(&mut app, Action::Confirm);
    // Sent now, without waiting out the grace (tests/tui_calls.rs).
    let reqs = app.commit_pending();
    fx.run(&mut app, reqs);
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.text, "cambió mientras escribía: revise y confirme de nuevo");
    assert!(fx.store.read(|tx| tx.operator_actions(10)).unwrap().is_empty());
    assert_eq!(app.screen, Screen::Patient, "still on the card");
}

#[test]
fn enter_on_a_filtered_upcoming_row_opens_its_patient_too() {
    let mut fx = clinic(60);
    let mut app = fx.loaded(Role::FrontDesk, "recepcion");
    let (phone, tail, name) = caller(&app, 0);
    fx.search(&mut app, &tail);
    fx.act(&mut app, Action::Goto(Screen::Upcoming));
    assert!(!app.upcoming.rows.is_empty());
    fx.act(&mut app, Action::Open);
    assert_eq!(app.screen, Screen::Patient);
    assert_eq!(app.patient.phone.as_deref(), Some(phone.as_str()));
    assert_eq!(app.breadcrumbs(), format!("Próximas citas › Paciente {name}"));
    // Every appointment of the card is this patient's, in the window.
    let card = app.patient.card.as_ref().unwrap();
    assert!(
        card.commitments
            .iter()
            .all(|c| c.phone.as_deref() == Some(phone.as_str()))
    );
    let (from, to) = (
        tui_support::now() - chrono::Duration::hours(24),
        tui_support::now() + chrono::Duration::days(7),
    );
    assert!(
        card.commitments
            .iter()
            .all(|c| c.starts_at.is_some_and(|s| s >= from && s < to))
    );
}
