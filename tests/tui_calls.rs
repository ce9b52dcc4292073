//! The call list, its quick outcomes and undo (issue 25, section 4): the
//! pure key map, the list itself, the grace period on a seeded clinic
//! (an outcome withdrawn with `u` leaves no trace; one left alone is
//! recorded after it, or at once on quit or on another action), and
//! snapshots of "Llamar" at 80×24 and 120×40.

mod tui_support;

use chrono::Duration;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use unavez::config::Role;
use unavez::ops::OpKind;
use unavez::store::{OperatorActionRow, RowKind};
use unavez::tui::app::App;
use unavez::tui::keys::{Access, Action, Mode, Screen, action_for};

use tui_support::{Fixture, clinic, now, render};

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn access(role: Role) -> Access {
    Access { role, read_only: false }
}

#[test]
fn letters_open_the_call_list_the_chooser_and_undo() {
    let desk = access(Role::FrontDesk);
    let at = |c, role, mode| action_for(&key(c), Screen::Attention, access(role), mode);
    assert_eq!(at('l', Role::FrontDesk, Mode::Normal), Some(Action::CallList));
    assert_eq!(
        at('t', Role::FrontDesk, Mode::Normal),
        Some(Action::Op(OpKind::CallOutcome))
    );
    assert_eq!(
        at('t', Role::Technician, Mode::Normal),
        Some(Action::Refused(OpKind::CallOutcome))
    );
    assert_eq!(at('u', Role::Supervisor, Mode::Normal), Some(Action::Undo));
    // In the chooser a digit is an outcome, not a screen.
    assert_eq!(at('1', Role::FrontDesk, Mode::CallChooser), Some(Action::Input('1')));
    assert_eq!(at('4', Role::FrontDesk, Mode::CallChooser), Some(Action::Input('4')));
    assert_eq!(
        action_for(
            &KeyEvent::from(KeyCode::Esc),
            Screen::Attention,
            desk,
            Mode::CallChooser
        ),
        Some(Action::Abort)
    );
    // Outside it, digits still switch screens.
    assert_eq!(
        at('2', Role::FrontDesk, Mode::Normal),
        Some(Action::Goto(Screen::Upcoming))
    );
    let read_only = Access {
        role: Role::FrontDesk,
        read_only: true,
    };
    assert_eq!(
        action_for(&key('t'), Screen::Attention, read_only, Mode::Normal),
        Some(Action::ReadOnly)
    );
}

fn desk() -> (Fixture, App) {
    let mut fx = clinic(60);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    fx.act(&mut app, Action::CallList);
    (fx, app)
}

fn actions(fx: &mut Fixture) -> Vec<OperatorActionRow> {
    fx.store.read(|tx| tx.operator_actions(50)).unwrap()
}

#[test]
fn the_call_list_holds_the_cases_a_call_answers_soonest_first() {
    let (_fx, app) = desk();
    let rows = &app.attention.rows;
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r.kind == RowKind::Intention));
    assert!(
        rows.iter().all(|r| matches!(r.state.as_str(), "review" | "failed")),
        "{:?}",
        rows.iter().map(|r| r.state).collect::<Vec<_>>()
    );
    let starts: Vec<_> = rows.iter().map(|r| r.starts_at).collect();
    let mut sorted = starts.clone();
    sorted.sort();
    assert_eq!(starts, sorted, "soonest appointment first");
    assert!(render(&app, 100, 30).contains("Atención · Llamar"));
}

#[test]
fn an_outcome_waits_its_grace_and_u_withdraws_it() {
    let (mut fx, mut app) = desk();
    let id = app.attention.current().unwrap().intention_id.unwrap();
    fx.act(&mut app, Action::Op(OpKind::CallOutcome));
    assert_eq!(app.mode, Mode::CallChooser);
    let reqs = app.on_action(Action::Input('1'));
    assert!(reqs.is_empty(), "nothing is sent during the grace");
    assert!(render(&app, 120, 40).contains("confirmó · deshacer (u) 10 s"));
    fx.act(&mut app, Action::Undo);
    assert!(app.calls.pending.is_none());
    let later = app.tick(now() + Duration::seconds(30));
    fx.run(&mut app, later);
    assert!(actions(&mut fx).is_empty(), "a withdrawn outcome leaves no trace");

    // Left alone, it is recorded once the grace is over, not before.
    fx.act(&mut app, Action::Op(OpKind::CallOutcome));
    fx.act(&mut app, Action::Input('1'));
    let t0 = app.now;
    let reqs = app.tick(t0 + Duration::seconds(9));
    fx.run(&mut app, reqs);
    assert!(actions(&mut fx).is_empty());
    assert!(render(&app, 120, 40).contains("confirmó · deshacer (u) 1 s"));
    let reqs = app.tick(t0 + Duration::seconds(10));
    fx.run(&mut app, reqs);
    let a = actions(&mut fx);
    assert_eq!(a.len(), 1);
    assert_eq!(
        (
            a[0].operator.as_str(),
            a[0].action.as_str(),
            a[0].reason.as_str(),
            a[0].intention_id
        ),
        ("recepcion", "call_outcome", "confirmed", Some(id))
    );
}

#[test]
fn quitting_or_another_action_sends_what_waits_first() {
    let (mut fx, mut app) = desk();
    fx.act(&mut app, Action::Op(OpKind::CallOutcome));
    fx.act(&mut app, Action::Input('2'));
    // Another action (here "marcar atendido") sends the outcome first.
    fx.act(&mut app, Action::Op(OpKind::Resolve));
    assert_eq!(actions(&mut fx)[0].reason, "no_answer");
    fx.act(&mut app, Action::Abort);

    fx.act(&mut app, Action::Op(OpKind::CallOutcome));
    fx.act(&mut app, Action::Input('3'));
    fx.act(&mut app, Action::Quit);
    assert!(app.quit);
    let a = actions(&mut fx);
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].reason, "reschedule_requested");
}

#[test]
fn u_with_nothing_waiting_says_sends_are_never_undone() {
    let (mut fx, mut app) = desk();
    fx.act(&mut app, Action::Undo);
    let flash = app.flash.as_ref().unwrap().text.clone();
    assert!(flash.contains("no se deshacen"), "{flash}");
}

#[test]
fn llamar_at_80x24() {
    let (_fx, app) = desk();
    insta::assert_snapshot!("llamar_80x24", render(&app, 80, 24));
}

#[test]
fn llamar_at_120x40_with_the_chooser_and_a_countdown() {
    let (mut fx, mut app) = desk();
    insta::assert_snapshot!("llamar_120x40", render(&app, 120, 40));
    fx.act(&mut app, Action::Op(OpKind::CallOutcome));
    insta::assert_snapshot!("llamar_chooser_120x40", render(&app, 120, 40));
    fx.act(&mut app, Action::Input('2'));
    insta::assert_snapshot!("llamar_countdown_120x40", render(&app, 120, 40));
}

#[test]
fn reabrir_in_the_handled_cases_takes_the_mark_back_with_a_reason() {
    let mut fx = clinic(60);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    let first = app.attention.current().unwrap().clone();
    fx.act(&mut app, Action::Op(OpKind::CallOutcome));
    fx.act(&mut app, Action::Input('1'));
    let reqs = app.commit_pending();
    fx.run(&mut app, reqs);
    let marked = |fx: &mut Fixture| {
        fx.store
            .read(|tx| tx.handled_mark(first.kind, first.subject_id))
            .unwrap()
            .is_some()
    };
    assert!(marked(&mut fx));
    // Outside the handled cases, `r` says where it works.
    fx.act(&mut app, Action::Op(OpKind::Reopen));
    assert_eq!(app.mode, Mode::Normal);
    fx.act(&mut app, Action::ToggleHandled);
    // Who, when and why (the reason is read for the handled cases).
    let row = app
        .attention
        .rows
        .iter()
        .find(|r| r.subject_id == first.subject_id)
        .unwrap();
    let h = row.handled.as_ref().unwrap();
    assert_eq!(h.operator, "recepcion");
    assert_eq!(
        app.calls.reasons.get(&h.action_id).map(String::as_str),
        Some("confirmed")
    );
    let at = app
        .attention
        .rows
        .iter()
        .position(|r| r.subject_id == first.subject_id)
        .expect("among the handled");
    app.attention.select(at);
    fx.act(&mut app, Action::Op(OpKind::Reopen));
    assert_eq!(app.mode, Mode::Form, "{:?}", app.flash);
    fx.type_text(&mut app, "la paciente volvió a llamar");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Confirm, "{:?}", app.flash);
    fx.act(&mut app, Action::Confirm);
    assert!(!marked(&mut fx));
    let a = actions(&mut fx);
    assert_eq!(
        (a[0].action.as_str(), a[0].reason.as_str(), a[0].result.as_str()),
        ("reopen", "la paciente volvió a llamar", "done")
    );
    assert_eq!(a[1].action, "call_outcome", "the history keeps both");
}

#[test]
fn the_session_log_scrolls_through_every_action() {
    let (mut fx, mut app) = desk();
    for n in 0..20 {
        app.log.push((now(), format!("acción {n}")));
    }
    fx.act(&mut app, Action::ShowLog);
    assert_eq!(app.mode, Mode::Log);
    let first = render(&app, 100, 30);
    assert!(first.contains("acción 19") && !first.contains("acción 3 "), "{first}");
    assert!(first.contains("1–16 / 20"), "{first}");
    let down = action_for(&key('j'), Screen::Attention, access(Role::FrontDesk), Mode::Log);
    assert_eq!(down, Some(Action::Down));
    fx.act(&mut app, Action::PageDown);
    let last = render(&app, 100, 30);
    assert!(last.contains("acción 0") && !last.contains("acción 19"), "{last}");
    assert_eq!(app.mode, Mode::Log, "scrolling keeps it open");
    fx.act(&mut app, Action::Back);
    assert_eq!(app.mode, Mode::Normal);
}

/// An unanswered call recorded elsewhere (another operator, the command
/// line) keeps the case off the list for 30 minutes and counts as a try.
#[test]
fn the_ledger_s_unanswered_calls_count_on_the_list() {
    let (mut fx, mut app) = desk();
    let first = app.attention.current().unwrap().clone();
    let id = first.intention_id.unwrap();
    let mut other = fx.app("supervisora", Role::Supervisor);
    let reqs = other.load();
    fx.run(&mut other, reqs);
    fx.act(&mut other, Action::CallList);
    let at = other
        .attention
        .rows
        .iter()
        .position(|r| r.intention_id == Some(id))
        .unwrap();
    other.attention.select(at);
    fx.act(&mut other, Action::Op(OpKind::CallOutcome));
    fx.act(&mut other, Action::Input('2'));
    let reqs = other.commit_pending();
    fx.run(&mut other, reqs);

    fx.act(&mut app, Action::Refresh);
    assert!(
        app.attention.rows.iter().all(|r| r.intention_id != Some(id)),
        "off the list for 30 minutes"
    );
    assert_eq!(app.call_tries(id), 1);
    let reqs = app.tick(now() + Duration::minutes(31));
    fx.run(&mut app, reqs);
    let back = app.attention.rows.iter().find(|r| r.intention_id == Some(id));
    assert!(back.is_some(), "back after 30 minutes");
    assert!(render(&app, 120, 40).contains("intentos: 1"));
}

/// A busy day: the call list picks from every open case, not from the
/// first page of them.
#[test]
fn the_call_list_reads_past_the_first_page() {
    let mut fx = clinic(60);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    app.page_size = 5;
    let reqs = app.load();
    fx.run(&mut app, reqs);
    let all = app.attention.total;
    assert!(all > 5);
    fx.act(&mut app, Action::CallList);
    assert!(app.attention.rows.len() > 5, "{}", app.attention.rows.len());
}

#[test]
fn the_handled_cases_are_shown_whole_with_the_call_list_on() {
    let mut fx = clinic(60);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    // A case no call answers (the channel settles it), marked handled.
    let at = app
        .attention
        .rows
        .iter()
        .position(|r| r.state.as_str() == "uncertain")
        .unwrap();
    app.attention.select(at);
    let uncertain = app.attention.current().unwrap().subject_id;
    fx.act(&mut app, Action::Op(OpKind::Resolve));
    fx.type_text(&mut app, "lo resuelve el canal");
    fx.act(&mut app, Action::Submit);
    fx.act(&mut app, Action::Confirm);
    let reqs = app.commit_pending();
    fx.run(&mut app, reqs);
    fx.act(&mut app, Action::CallList);
    fx.act(&mut app, Action::ToggleHandled);
    assert!(app.show_handled && app.calls.list);
    assert!(
        app.attention.rows.iter().any(|r| r.subject_id == uncertain),
        "the handled view is not filtered to calls"
    );
}
