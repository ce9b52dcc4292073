//! Issue 25 §3 and §5 in the console: "Qué hacer" is what this person can
//! do (from the guards), a key its guard refuses says why before any form,
//! dimmed in the footer and in `?` help, the front desk asks for a resend
//! and sees the answer; and no false alarms in the header.

mod tui_support;

use unavez::config::Role;
use unavez::domain::attention::NextStep;
use unavez::domain::event::{BookingEvent, EventType};
use unavez::domain::state::IntentionState;
use unavez::ops::OpKind;
use unavez::planner::Planner;
use unavez::store::AttentionRow;
use unavez::tui::app::{App, FlashKind, StopCause, guard};
use unavez::tui::keys::{Action, Mode};

use tui_support::{Fixture, clinic, now, render};

fn loaded(fx: &mut Fixture, operator: &str, role: Role) -> App {
    let mut app = fx.app(operator, role);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    app
}

/// Puts the cursor on the first Atención row `pick` accepts.
fn select(app: &mut App, pick: impl Fn(&AttentionRow) -> bool) -> AttentionRow {
    let i = app
        .attention
        .rows
        .iter()
        .position(pick)
        .expect("a row of that kind in Atención");
    app.attention.select(i);
    app.attention.rows[i].clone()
}

fn failed_open(r: &AttentionRow) -> bool {
    r.state.as_str() == "failed" && !r.confirmed && r.commitment_status.as_deref() != Some("cancelled")
}

/// The next step the guards give `row` as it is now on `app`'s list.
fn step_of(app: &App, row: &AttentionRow) -> NextStep {
    let now = app
        .attention
        .rows
        .iter()
        .find(|r| r.intention_id == row.intention_id)
        .unwrap();
    guard::row_hint(app.role(), now, app.resend_ctx())
}

/// The row of `reference` on a wide screen (the next step whole).
fn line_of(app: &App, reference: &str) -> String {
    // Below 140 columns the next step takes what is left of the row.
    render(app, 139, 40)
        .lines()
        .find(|l| l.contains(&format!("{reference} ")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_front_desk_is_never_told_to_resend_and_a_closed_row_refuses_before_any_form() {
    let mut fx = clinic(40);
    let mut app = loaded(&mut fx, "recepcion", Role::FrontDesk);
    let screen = render(&app, 120, 40);
    assert!(!screen.contains("reenviar"), "{screen}");
    let row = select(&mut app, failed_open);
    assert!(line_of(&app, &row.commitment_ref).contains("pedir reenvío"));

    // `c` on a failed (closed) row: the refusal at once, no form, no
    // reason typed, nothing recorded.
    fx.act(&mut app, Action::Op(OpKind::Cancel));
    assert_eq!(app.mode, Mode::Normal);
    assert!(app.form.is_none());
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Refused);
    assert!(flash.text.contains("cerrad"), "{}", flash.text);
    assert!(fx.store.read(|tx| tx.operator_actions(5)).unwrap().is_empty());

    // The footer and `?` help show the key dimmed, with why.
    app.flash = None;
    let footer = render(&app, 200, 30).lines().last().unwrap().to_string();
    assert!(footer.contains("c cancelar envío (ya está cerrada)"), "{footer}");
    fx.act(&mut app, Action::Help);
    let help = render(&app, 120, 40);
    assert!(help.contains("cancelar envío (ya está cerrada)"), "{help}");
}

#[test]
fn a_confirmed_appointment_is_not_chased_and_a_cancelled_ones_notice_says_to_phone() {
    let mut fx = clinic(40);
    let app = loaded(&mut fx, "supervisora", Role::Supervisor);
    let confirmed = app
        .attention
        .rows
        .iter()
        .find(|r| r.confirmed && r.state.as_str() == "review")
        .expect("a confirmed appointment in review")
        .clone();
    assert!(line_of(&app, &confirmed.commitment_ref).contains("ya confirmó"));
    assert!(!line_of(&app, &confirmed.commitment_ref).contains("llamar"));

    // The booking system cancels an appointment whose notice failed.
    let failed = app.attention.rows.iter().find(|r| failed_open(r)).unwrap().clone();
    let config = fx.ctx.config.clone();
    let templates = fx.ctx.templates.clone();
    let planner = Planner::new(&config.policy, &templates, config.tz());
    let ev = BookingEvent {
        event_id: "test:cancel:1".into(),
        kind: EventType::AppointmentCancelled,
        reference: failed.commitment_ref.clone(),
        starts_at: None,
        version: None,
        contact: None,
        service: None,
        location: None,
        occurred_at: Some(now().fixed_offset()),
        operator: None,
        note: None,
        raw: None,
    };
    fx.store
        .write(|tx| unavez::ingest::ingest(tx, &planner, &ev, "test", now()).map(|_| ()))
        .unwrap();
    for (who, role) in [("supervisora", Role::Supervisor), ("recepcion", Role::FrontDesk)] {
        let mut app = loaded(&mut fx, who, role);
        let line = line_of(&app, &failed.commitment_ref);
        assert!(
            line.contains("avisar por teléfono que la cita se canceló"),
            "{role:?}: {line}"
        );
        assert!(!line.contains("reenviar"), "{line}");
        // The resend key says why before any form.
        select(&mut app, |r| r.intention_id == failed.intention_id);
        fx.act(&mut app, Action::Op(OpKind::AuthorizeResend));
        if role == Role::Supervisor {
            assert_eq!(app.mode, Mode::Normal);
            let text = app.flash.clone().unwrap().text;
            assert!(text.contains("cancel"), "{text}");
        }
    }
}

#[test]
fn the_front_desk_asks_for_a_resend_and_sees_the_supervisors_answer() {
    let mut fx = clinic(40);
    let mut desk = loaded(&mut fx, "recepcion", Role::FrontDesk);
    let row = select(&mut desk, failed_open);
    // `a` for the front desk is "pedir reenvío": a reason, a confirmation.
    fx.act(&mut desk, Action::Op(OpKind::RequestResend));
    assert_eq!(desk.mode, Mode::Form);
    fx.type_text(&mut desk, "dice que no le llegó");
    fx.act(&mut desk, Action::Submit);
    assert_eq!(desk.mode, Mode::Confirm);
    fx.act(&mut desk, Action::Confirm);
    assert_eq!(
        desk.flash.as_ref().unwrap().kind,
        FlashKind::Success,
        "{:?}",
        desk.flash
    );
    let line = line_of(&desk, &row.commitment_ref);
    assert!(line.contains("reenvío pedido por recepción"), "{line}");
    assert_eq!(step_of(&desk, &row), NextStep::WaitForSupervisor);
    // Asking again is refused before any form.
    select(&mut desk, |r| r.intention_id == row.intention_id);
    fx.act(&mut desk, Action::Op(OpKind::RequestResend));
    assert_eq!(desk.mode, Mode::Normal);
    assert_eq!(desk.flash.as_ref().unwrap().kind, FlashKind::Refused);

    // The supervisor sees the request and its reason, and declines it.
    let mut boss = loaded(&mut fx, "supervisora", Role::Supervisor);
    let line = line_of(&boss, &row.commitment_ref);
    assert!(line.contains("reenvío pedido por recepción: dice que no le"), "{line}");
    assert_eq!(step_of(&boss, &row), NextStep::AnswerRequest);
    select(&mut boss, |r| r.intention_id == row.intention_id);
    fx.act(&mut boss, Action::Op(OpKind::DeclineResend));
    assert_eq!(boss.mode, Mode::Form);
    fx.type_text(&mut boss, "ya la llamamos");
    fx.act(&mut boss, Action::Submit);
    fx.act(&mut boss, Action::Confirm);
    assert_eq!(
        boss.flash.as_ref().unwrap().kind,
        FlashKind::Success,
        "{:?}",
        boss.flash
    );

    // The front desk sees the answer, and is told to call.
    let desk = loaded(&mut fx, "recepcion", Role::FrontDesk);
    let line = line_of(&desk, &row.commitment_ref);
    assert!(line.contains("reenvío rechazado por supervisora: ya la"), "{line}");
    assert_eq!(step_of(&desk, &row), NextStep::Call);
    let actions = fx.store.read(|tx| tx.operator_actions(10)).unwrap();
    let words: Vec<&str> = actions.iter().map(|a| a.action.as_str()).collect();
    // The second ask was refused before any form: nothing ran, nothing to
    // record.
    assert_eq!(words, ["decline_resend", "request_resend"], "{actions:?}");
    assert!(actions.iter().all(|a| a.result == "done"), "{actions:?}");
}

/// §5: a single-user console says nothing about identity in its header,
/// a stopped dispatcher says why in Spanish, and a lock held by this
/// process is not "otro proceso" while one held by another process is.
#[test]
fn no_false_alarms_in_the_header() {
    let mut fx = clinic(10);
    let mut app = loaded(&mut fx, "supervisora", Role::Supervisor);
    let screen = render(&app, 120, 30);
    assert!(!screen.contains("identidad no verificada"), "{screen}");
    assert!(!screen.contains("otro proceso"), "{screen}");

    app.dispatcher.running = Some(false);
    app.dispatcher.stopped_because = Some(StopCause::MissingKey {
        var: "UNAVEZ_MOTOR_API_KEY".into(),
    });
    let header = render(&app, 140, 30).lines().next().unwrap().to_string();
    assert!(
        header.contains("detenido: falta la clave del canal (variable UNAVEZ_MOTOR_API_KEY) · :doctor"),
        "{header}"
    );

    // This process holds the write lock (its dispatcher, its import).
    let db = fx.db.clone();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let mut own = unavez::store::Store::open(&db).unwrap();
        own.write(|_tx| {
            held_tx.send(()).unwrap();
            done_rx.recv().unwrap();
            Ok::<_, unavez::store::StoreError>(())
        })
        .unwrap();
    });
    held_rx.recv().unwrap();
    assert!(fx.store.write_locked().unwrap(), "the probe sees the lock");
    assert!(!unavez::tui::worker::locked_by_another(&fx.store));
    done_tx.send(()).unwrap();
    holder.join().unwrap();

    // Another process holds it: that is "otro proceso".
    let mut other = std::process::Command::new("sqlite3")
        .arg(&fx.db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let stdin = other.stdin.as_mut().unwrap();
        writeln!(stdin, "BEGIN IMMEDIATE; SELECT 'held';").unwrap();
        stdin.flush().unwrap();
    }
    let mut locked = false;
    for _ in 0..50 {
        if unavez::tui::worker::locked_by_another(&fx.store) {
            locked = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = other.kill();
    let _ = other.wait();
    assert!(locked, "a lock held by another process is reported");
}

#[test]
fn a_failed_message_asks_the_right_person() {
    let mut fx = clinic(40);
    let boss = loaded(&mut fx, "supervisora", Role::Supervisor);
    let row = boss.attention.rows.iter().find(|r| failed_open(r)).unwrap().clone();
    assert!(line_of(&boss, &row.commitment_ref).contains("reenviar"));
    let tech = loaded(&mut fx, "tecnico", Role::Technician);
    let line = line_of(&tech, &row.commitment_ref);
    assert!(!line.contains("reenviar") && !line.contains("llamar"), "{line}");
    let _ = IntentionState::Failed;
}

/// §5: the header's count and the banner's say what each counts (due now
/// to send; late beyond the grace), so "cola 9" beside "8 vencidos" no
/// longer reads as one number that disagrees with itself.
#[test]
fn the_header_and_the_banner_say_what_each_counts() {
    let mut fx = clinic(10);
    let mut app = loaded(&mut fx, "supervisora", Role::Supervisor);
    app.dispatcher.queue = Some(9);
    app.alerts = vec![unavez::domain::alert::Reading {
        kind: unavez::domain::alert::AlertKind::DueUnsent,
        value: 8,
        threshold: Some(5),
        crossed: true,
    }];
    let screen = render(&app, 120, 30);
    let mut lines = screen.lines();
    let (header, banner) = (lines.next().unwrap(), lines.next().unwrap());
    assert!(header.contains("por enviar 9"), "{header}");
    assert!(banner.contains("8 con atraso > 10 min"), "{banner}");
}

/// Detalle too: `c` on a failed message refuses before any form.
#[test]
fn detail_refuses_a_cancel_of_a_closed_message_before_any_form() {
    let mut fx = clinic(40);
    let mut app = loaded(&mut fx, "recepcion", Role::FrontDesk);
    let row = select(&mut app, failed_open);
    fx.act(&mut app, Action::Open);
    assert!(app.detail.is_some());
    assert_eq!(app.detail.as_ref().unwrap().intention.id, row.intention_id.unwrap());
    fx.act(&mut app, Action::Op(OpKind::Cancel));
    assert_eq!(app.mode, Mode::Normal);
    assert!(app.form.is_none());
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Refused);
}
