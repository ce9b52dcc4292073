//! State/update tests of every operator action through the console's update
//! function and the worker, including refusals and the two-step confirm.

mod tui_support;

use unavez::config::Role;
use unavez::domain::state::IntentionState;
use unavez::ops::{self, Actor, OpKind, OpsError};
use unavez::store::IntentFilter;
use unavez::tui::app::{App, FlashKind};
use unavez::tui::keys::{Action, Mode, Screen};

use tui_support::{Fixture, clinic, now};

fn first_in(fx: &mut Fixture, state: IntentionState) -> i64 {
    fx.store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                states: vec![state],
                limit: 1,
                ..Default::default()
            })
        })
        .unwrap()[0]
        .id
}

fn state_of(fx: &mut Fixture, id: i64) -> IntentionState {
    fx.store.read(|tx| tx.intention(id)).unwrap().state
}

fn open_detail(fx: &mut Fixture, app: &mut App, id: i64) {
    fx.act(app, Action::OpenCommand);
    fx.type_text(app, &format!("detalle {id}"));
    fx.act(app, Action::Submit);
    assert_eq!(app.screen, Screen::Detail);
    assert_eq!(app.detail.as_ref().unwrap().intention.id, id);
}

/// Opens the form, types the reason and submits it; leaves the console in
/// the confirmation step.
fn fill_form(fx: &mut Fixture, app: &mut App, op: OpKind, reason: &str) {
    fx.act(app, Action::Op(op));
    assert_eq!(app.mode, Mode::Form);
    fx.type_text(app, reason);
    fx.act(app, Action::Submit);
    assert_eq!(app.mode, Mode::Confirm, "flash: {:?}", app.flash);
}

fn actions(fx: &mut Fixture) -> Vec<unavez::store::OperatorActionRow> {
    fx.store.read(|tx| tx.operator_actions(100)).unwrap()
}

#[test]
fn cancel_needs_a_reason_then_a_confirmation_and_leaves_both_traces() {
    let mut fx = clinic(40);
    let id = first_in(&mut fx, IntentionState::Review);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    open_detail(&mut fx, &mut app, id);

    fx.act(&mut app, Action::Op(OpKind::Cancel));
    assert_eq!(app.mode, Mode::Form);
    // An empty (or blank) reason is not accepted.
    fx.type_text(&mut app, "   ");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Form);
    assert!(app.form.as_ref().unwrap().error.is_some());
    // Aborting changes nothing.
    fx.act(&mut app, Action::Abort);
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(state_of(&mut fx, id), IntentionState::Review);

    fill_form(&mut fx, &mut app, OpKind::Cancel, "paciente pidió no recibir mensajes");
    let scope = app.confirm.as_ref().unwrap().scope.clone();
    assert!(
        scope.contains(&format!("#{id}")) && scope.contains("paciente pidió"),
        "{scope}"
    );
    // Step two can be declined too.
    fx.act(&mut app, Action::Abort);
    assert_eq!(state_of(&mut fx, id), IntentionState::Review);
    assert!(actions(&mut fx).is_empty());

    fill_form(&mut fx, &mut app, OpKind::Cancel, "paciente pidió no recibir mensajes");
    fx.act(&mut app, Action::Confirm);
    assert_eq!(state_of(&mut fx, id), IntentionState::Cancelled);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    let a = &actions(&mut fx)[0];
    assert_eq!(
        (a.operator.as_str(), a.role.as_str(), a.action.as_str()),
        ("recepcion", "front_desk", "cancel")
    );
    assert_eq!(
        (a.reason.as_str(), a.result.as_str(), a.intention_id),
        ("paciente pidió no recibir mensajes", "done", Some(id))
    );
    let history = fx.store.read(|tx| tx.history(id)).unwrap();
    let last = history.last().unwrap();
    assert_eq!((last.to_state.as_str(), last.cause.as_str()), ("cancelled", "operator"));
    assert!(last.note.as_deref().unwrap().contains("recepcion"));
    // The detail on screen was refreshed.
    assert_eq!(app.detail.as_ref().unwrap().intention.state, IntentionState::Cancelled);
}

#[test]
fn cancelling_a_delivered_message_is_refused_and_explained() {
    let mut fx = clinic(40);
    let id = first_in(&mut fx, IntentionState::Delivered);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    open_detail(&mut fx, &mut app, id);
    // The console refuses before any form (issue 25 §3): nothing typed,
    // nothing recorded.
    fx.act(&mut app, Action::Op(OpKind::Cancel));
    assert_eq!(app.mode, Mode::Normal);
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Refused);
    assert!(flash.text.contains("entregado"), "{}", flash.text);
    assert!(actions(&mut fx).is_empty());
    // The library refuses it too, and records the refusal.
    let desk = Actor {
        name: "recepcion",
        role: Role::FrontDesk,
    };
    fx.store
        .write(|tx| ops::cancel(tx, &desk, id, None, "ya no aplica", now()))
        .unwrap();
    assert_eq!(state_of(&mut fx, id), IntentionState::Delivered);
    let a = &actions(&mut fx)[0];
    assert_eq!(a.result, "refused");
    assert!(a.detail.as_deref().unwrap().contains("already delivered"));
    // The refusal is in the intention's history as well.
    let history = fx.store.read(|tx| tx.history(id)).unwrap();
    assert!(history.last().unwrap().note.as_deref().unwrap().contains("refused"));
}

#[test]
fn cancelling_an_uncertain_message_asks_to_verify_first() {
    let mut fx = clinic(40);
    let id = first_in(&mut fx, IntentionState::Uncertain);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    open_detail(&mut fx, &mut app, id);
    // Refused before any form, with what to do instead.
    fx.act(&mut app, Action::Op(OpKind::Cancel));
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(state_of(&mut fx, id), IntentionState::Uncertain);
    assert!(app.flash.as_ref().unwrap().text.contains("verifique"));
}

#[test]
fn verify_by_phone_call_received_and_not_received() {
    let mut fx = clinic(40);
    let id = first_in(&mut fx, IntentionState::Uncertain);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    open_detail(&mut fx, &mut app, id);
    // Outcome 0: received.
    fill_form(&mut fx, &mut app, OpKind::Verify, "llamé: sí lo recibió");
    fx.act(&mut app, Action::Confirm);
    assert_eq!(state_of(&mut fx, id), IntentionState::Delivered);
    let h = fx.store.read(|tx| tx.history(id)).unwrap();
    let last = h.last().unwrap();
    assert_eq!(
        (last.signal.as_str(), last.cause.as_str(), last.evidence.as_deref()),
        ("delivered", "operator", Some("manual:received"))
    );

    // "Not received" after a delivery is kept in history and changes nothing.
    fx.act(&mut app, Action::Op(OpKind::Verify));
    fx.act(&mut app, Action::NextField);
    fx.type_text(&mut app, "dice que no le llegó");
    fx.act(&mut app, Action::Submit);
    fx.act(&mut app, Action::Confirm);
    assert_eq!(state_of(&mut fx, id), IntentionState::Delivered);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Info);
    assert_eq!(actions(&mut fx)[0].result, "recorded");

    // Not received on a message in review: a definitive failure.
    let review = first_in(&mut fx, IntentionState::Review);
    open_detail(&mut fx, &mut app, review);
    fx.act(&mut app, Action::Op(OpKind::Verify));
    fx.act(&mut app, Action::NextField);
    fx.type_text(&mut app, "número equivocado");
    fx.act(&mut app, Action::Submit);
    fx.act(&mut app, Action::Confirm);
    assert_eq!(state_of(&mut fx, review), IntentionState::Failed);
}

#[test]
fn a_supervisor_authorizes_a_resend_as_a_new_related_intention() {
    let mut fx = clinic(40);
    let id = first_in(&mut fx, IntentionState::Failed);
    let original = fx.store.read(|tx| tx.intention(id)).unwrap();
    let mut app = fx.app("supervisora", Role::Supervisor);
    open_detail(&mut fx, &mut app, id);
    fill_form(
        &mut fx,
        &mut app,
        OpKind::AuthorizeResend,
        "paciente dio número nuevo por teléfono",
    );
    fx.act(&mut app, Action::Confirm);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    let key = format!("{}:reenvio:1", original.key);
    let new = fx.store.read(|tx| tx.find_intention(&key)).unwrap();
    assert_eq!(new.related_id, Some(id));
    assert_eq!(new.state, IntentionState::Planned);
    assert_eq!(
        (new.body.as_str(), new.recipient.as_str()),
        (original.body.as_str(), original.recipient.as_str())
    );
    assert_eq!(
        (new.created_by.as_str(), new.authorized_by.as_deref()),
        ("supervisora", Some("supervisora"))
    );
    assert!(new.reason.as_deref().unwrap().contains("número nuevo"));
    assert_eq!(actions(&mut fx)[0].action, "authorize_resend");

    // A second authorization while the first is pending: its confirmation
    // shows the refusal and takes no `s` (issue 25 §3).
    fill_form(&mut fx, &mut app, OpKind::AuthorizeResend, "otra vez");
    fx.act(&mut app, Action::Confirm);
    let refusal = app
        .confirm
        .as_ref()
        .and_then(|c| c.resend.as_ref()?.evidence.as_ref()?.refusal.clone());
    assert_eq!(refusal.map(|r| r.rule()), Some("resend_pending"));
    fx.act(&mut app, Action::Abort);
    assert!(app.confirm.is_none());
    assert!(
        fx.store
            .read(|tx| tx.find_intention(&format!("{}:reenvio:2", original.key)))
            .is_err()
    );

    // A planned message cannot be "resent": it never left.
    let planned = first_in(&mut fx, IntentionState::Planned);
    let r = fx
        .store
        .write(|tx| {
            ops::authorize_resend(
                tx,
                &Actor {
                    name: "supervisora",
                    role: Role::Supervisor,
                },
                planned,
                "x",
                ops::ResendGuard {
                    acknowledge_delivered: false,
                    max_per_day: 2,
                },
                chrono_tz::America::Lima,
                now(),
            )
        })
        .unwrap();
    assert!(matches!(
        r.outcome,
        ops::OpOutcome::Refused(ops::Refusal::NotSentYet { .. })
    ));
}

#[test]
fn front_desk_is_refused_the_resend_by_the_console_and_by_the_library() {
    let mut fx = clinic(40);
    let id = first_in(&mut fx, IntentionState::Failed);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    open_detail(&mut fx, &mut app, id);
    fx.act(&mut app, Action::Refused(OpKind::AuthorizeResend));
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Refused);
    let e = fx
        .store
        .write(|tx| {
            ops::authorize_resend(
                tx,
                &Actor {
                    name: "recepcion",
                    role: Role::FrontDesk,
                },
                id,
                "x",
                ops::ResendGuard {
                    acknowledge_delivered: false,
                    max_per_day: 2,
                },
                chrono_tz::America::Lima,
                now(),
            )
        })
        .unwrap_err();
    assert!(matches!(e, OpsError::NotAllowed { .. }));
    assert_eq!(fx.store.read(|tx| tx.resend_count(id)).unwrap(), 0);
}

#[test]
fn manual_contact_closes_the_pending_reminders_of_the_appointment() {
    let mut fx = clinic(40);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    fx.act(&mut app, Action::Goto(Screen::Upcoming));
    // The first appointment with planned reminders.
    let idx = app
        .upcoming
        .rows
        .iter()
        .position(|u| {
            u.status.as_str() == "scheduled"
                && u.notifications
                    .iter()
                    .any(|n| n.state == "planned" && n.purpose.starts_with("recordatorio"))
        })
        .unwrap();
    for _ in 0..idx {
        fx.act(&mut app, Action::Down);
    }
    let reference = app.upcoming.current().unwrap().commitment_ref.clone();
    fill_form(&mut fx, &mut app, OpKind::ManualContact, "confirmó por teléfono");
    fx.act(&mut app, Action::Confirm);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    let rows = fx
        .store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                commitment_ref: Some(reference.clone()),
                ..Default::default()
            })
        })
        .unwrap();
    let reminders: Vec<_> = rows.iter().filter(|r| r.purpose.starts_with("recordatorio")).collect();
    assert!(!reminders.is_empty());
    for r in reminders {
        assert_eq!(r.state, IntentionState::Cancelled, "{}", r.key);
        assert_eq!(r.state_reason.as_deref(), Some("manual_contact"));
    }
    let c = fx.store.read(|tx| tx.commitment(&reference)).unwrap().unwrap();
    assert!(c.commitment.manual_contact_at.is_some());
    assert_eq!(actions(&mut fx)[0].action, "manual_contact");
}

#[test]
fn read_only_and_role_refusals_never_reach_the_database() {
    let mut fx = clinic(20);
    let mut app = fx.app("tecnico", Role::Technician);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    let reqs = app.on_action(Action::Refused(OpKind::Cancel));
    assert!(reqs.is_empty());
    let reqs = app.on_action(Action::ReadOnly);
    assert!(reqs.is_empty());
    assert!(actions(&mut fx).is_empty());
}

#[test]
fn a_reschedule_request_is_an_attention_row_for_a_call_not_for_message_actions() {
    let mut fx = clinic(40);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    let idx = app
        .attention
        .rows
        .iter()
        .position(|r| r.kind == unavez::store::RowKind::RescheduleRequest)
        .expect("the reschedule request is listed");
    assert_eq!(app.attention.rows[idx].commitment_ref, "cita-1012");
    for _ in 0..idx {
        fx.act(&mut app, Action::Down);
    }
    // No intention under the cursor: cancel asks for a row with one.
    fx.act(&mut app, Action::Op(OpKind::Cancel));
    assert_eq!(app.mode, Mode::Normal);
    // Manual contact applies to the appointment.
    fill_form(&mut fx, &mut app, OpKind::ManualContact, "la llamé y reprogramamos");
    fx.act(&mut app, Action::Confirm);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
}

#[test]
fn filter_page_and_back() {
    let mut fx = clinic(60);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    app.page_size = 5;
    let reqs = app.load();
    fx.run(&mut app, reqs);
    let total = app.attention.total;
    assert!(total > 5);
    fx.act(&mut app, Action::PageDown);
    assert_eq!(app.attention.offset, 5);
    fx.act(&mut app, Action::PageUp);
    assert_eq!(app.attention.offset, 0);
    fx.act(&mut app, Action::PageUp);
    assert_eq!(app.attention.offset, 0);

    fx.act(&mut app, Action::OpenFilter);
    assert_eq!(app.mode, Mode::Filter);
    fx.type_text(&mut app, "cita-1004");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.filter, "cita-1004");
    assert!(app.attention.total >= 1 && app.attention.rows.iter().all(|r| r.commitment_ref == "cita-1004"));
    // esc clears the filter first, then goes back.
    fx.act(&mut app, Action::Back);
    assert!(app.filter.is_empty());
    assert_eq!(app.attention.total, total);

    fx.act(&mut app, Action::OpenCommand);
    fx.type_text(&mut app, "volar");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Refused);
    fx.act(&mut app, Action::OpenCommand);
    fx.type_text(&mut app, "q");
    fx.act(&mut app, Action::Submit);
    assert!(app.quit);
}

#[test]
fn a_dispatcher_that_could_not_start_keeps_its_reason_in_the_header() {
    let mut fx = clinic(10);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    app.dispatcher.running = Some(false);
    app.dispatcher.last_error = Some("channel: UNAVEZ_MOTOR_API_KEY is not set".into());
    let reqs = app.load();
    fx.run(&mut app, reqs);
    assert_eq!(
        app.dispatcher.last_error.as_deref(),
        Some("channel: UNAVEZ_MOTOR_API_KEY is not set")
    );
    assert!(app.dispatcher.queue.is_some());
    let screen = tui_support::render(&app, 100, 30);
    assert!(screen.contains("despachador: detenido"), "{screen}");
}

/// A console with the dispatcher embedded: the worker holds its switch.
fn with_dispatcher(fx: &mut Fixture, app: &mut App) -> unavez::dispatch::Control {
    let control = unavez::dispatch::Control::new();
    fx.ctx.control = Some(control.clone());
    app.dispatcher.running = Some(true);
    let reqs = app.load();
    fx.run(app, reqs);
    control
}

#[test]
fn a_supervisor_pauses_and_resumes_dispatch_with_a_reason_and_a_confirmation() {
    let mut fx = clinic(20);
    let mut app = fx.app("supervisora", Role::Supervisor);
    let control = with_dispatcher(&mut fx, &mut app);
    assert!(!app.dispatcher.paused);
    assert!(tui_support::render(&app, 120, 30).contains("en marcha"));

    // The reason is mandatory.
    fx.act(&mut app, Action::Op(OpKind::PauseDispatch));
    assert_eq!(app.mode, Mode::Form);
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Form);
    assert!(app.form.as_ref().unwrap().error.is_some());
    // Declining the confirmation changes nothing.
    fx.type_text(&mut app, "el motor responde mal");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Confirm);
    assert!(
        app.confirm.as_ref().unwrap().scope.contains("Pausar"),
        "{:?}",
        app.confirm
    );
    fx.act(&mut app, Action::Abort);
    assert!(!control.is_paused());
    assert!(actions(&mut fx).is_empty());

    fill_form(&mut fx, &mut app, OpKind::PauseDispatch, "el motor responde mal");
    fx.act(&mut app, Action::Confirm);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    assert!(control.is_paused());
    assert!(app.dispatcher.paused);
    assert!(tui_support::render(&app, 120, 30).contains("en pausa"));
    let log = actions(&mut fx);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].action, "pause_dispatch");
    assert_eq!(log[0].operator, "supervisora");
    assert_eq!(log[0].reason, "el motor responde mal");
    assert_eq!(log[0].result, "done");

    // The same key now resumes.
    fx.act(&mut app, Action::Op(OpKind::PauseDispatch));
    assert_eq!(app.form.as_ref().unwrap().op, OpKind::ResumeDispatch);
    fx.type_text(&mut app, "el motor ya responde");
    fx.act(&mut app, Action::Submit);
    assert!(
        app.confirm.as_ref().unwrap().scope.contains("Reanudar"),
        "{:?}",
        app.confirm
    );
    fx.act(&mut app, Action::Confirm);
    assert!(!control.is_paused());
    assert!(!app.dispatcher.paused);
    assert!(tui_support::render(&app, 120, 30).contains("en marcha"));
    let log = actions(&mut fx);
    assert_eq!(log[0].action, "resume_dispatch");
    assert_eq!(log[0].reason, "el motor ya responde");
}

#[test]
fn the_header_follows_the_services_status() {
    let mut fx = clinic(20);
    let mut app = fx.app("tecnico", Role::Technician);
    let control = with_dispatcher(&mut fx, &mut app);
    // Paused elsewhere (another console on the same services): the next
    // status read shows it.
    control.pause();
    let reqs = app.tick(now());
    fx.run(&mut app, reqs);
    assert!(app.dispatcher.paused);
    assert_eq!(app.dispatcher.running, Some(true));
    // A technician resumes it.
    fill_form(&mut fx, &mut app, OpKind::PauseDispatch, "reanudar tras revisar");
    assert!(app.confirm.as_ref().unwrap().scope.contains("Reanudar"));
    fx.act(&mut app, Action::Confirm);
    assert!(!control.is_paused());
}

#[test]
fn front_desk_may_not_pause_dispatch_in_the_console_nor_in_the_library() {
    let mut fx = clinic(20);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    let control = with_dispatcher(&mut fx, &mut app);
    // The key is refused with an explanation; no form opens.
    let reqs = app.on_action(Action::Refused(OpKind::PauseDispatch));
    assert!(reqs.is_empty());
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Refused);
    // Even built directly, the action never reaches the form.
    fx.act(&mut app, Action::Op(OpKind::PauseDispatch));
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Refused);
    // And the worker refuses a request forged past the console.
    let resp = unavez::tui::worker::handle(
        &mut fx.store,
        &fx.ctx,
        unavez::tui::worker::Request::Op {
            op: unavez::tui::worker::PendingOp::PauseDispatch,
            operator: "recepcion".into(),
            role: Role::FrontDesk,
            reason: "quiero pausar".into(),
            seen: None,
            now: now(),
        },
    );
    assert!(
        matches!(resp, unavez::tui::worker::Response::Op(Err(unavez::tui::worker::OpError::Other(ref e)))
            if e.kind == unavez::tui::failure::FailureKind::NotAllowed && e.detail.contains("may not")),
        "{resp:?}"
    );
    assert!(!control.is_paused());
    assert!(actions(&mut fx).is_empty());
    let err = fx
        .store
        .write(|tx| {
            ops::switch_dispatch(
                tx,
                &Actor {
                    name: "recepcion",
                    role: Role::FrontDesk,
                },
                true,
                "quiero pausar",
                now(),
            )
        })
        .unwrap_err();
    assert!(matches!(err, OpsError::NotAllowed { .. }), "{err:?}");
}

#[test]
fn pausing_without_an_embedded_dispatcher_or_read_only_is_refused() {
    let mut fx = clinic(20);
    let mut app = fx.app("supervisora", Role::Supervisor);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    // `--no-dispatch`: nothing to pause.
    fx.act(&mut app, Action::Op(OpKind::PauseDispatch));
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Refused);
    assert!(
        app.flash.as_ref().unwrap().text.contains("despachador"),
        "{:?}",
        app.flash
    );
    // Read-only: refused too.
    let control = with_dispatcher(&mut fx, &mut app);
    app.access.read_only = true;
    fx.act(&mut app, Action::Op(OpKind::PauseDispatch));
    assert_eq!(app.mode, Mode::Normal);
    assert!(!control.is_paused());
    assert!(actions(&mut fx).is_empty());
}
