//! The console's resend confirmation: the evidence of the original and
//! every earlier resend (accepted, delivered, read, times, who authorized),
//! the typed word a delivered or read message requires, the rules that
//! refuse, and the reproduction (a resend whose earlier resend was
//! read). Driven through the update function and the worker on a real
//! ledger file, rendered with `TestBackend`.

mod tui_support;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use unavez::config::Role;
use unavez::domain::state::{IntentionState, Signal};
use unavez::ops::OpKind;
use unavez::store::{Cause, Entry, IntentFilter};
use unavez::tui::app::{App, FlashKind};
use unavez::tui::keys::{Access, Action, Mode, Screen, action_for};
use unavez::tui::worker::Request;

use tui_support::{Fixture, clinic, now, render};

fn first_in(fx: &mut Fixture, state: IntentionState) -> (i64, String) {
    let r = fx
        .store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                states: vec![state],
                limit: 1,
                ..Default::default()
            })
        })
        .unwrap()
        .remove(0);
    (r.id, r.key)
}

fn open_detail(fx: &mut Fixture, app: &mut App, id: i64) {
    fx.act(app, Action::OpenCommand);
    fx.type_text(app, &format!("detalle {id}"));
    fx.act(app, Action::Submit);
    assert_eq!(app.screen, Screen::Detail);
}

/// `a`, the reason, enter: the confirmation opens and loads the evidence.
fn ask_resend(fx: &mut Fixture, app: &mut App, reason: &str) {
    fx.act(app, Action::Op(OpKind::AuthorizeResend));
    assert_eq!(app.mode, Mode::Form);
    fx.type_text(app, reason);
    fx.act(app, Action::Submit);
    let c = app.confirm.as_ref().expect("confirmation open");
    assert!(
        c.resend.as_ref().is_some_and(|r| r.evidence.is_some()),
        "evidence loaded"
    );
}

fn signals(fx: &mut Fixture, id: i64, signals: &[Signal]) {
    for s in signals {
        fx.store
            .write(|tx| {
                tx.signal(
                    id,
                    *s,
                    &Entry {
                        signal: s.name(),
                        cause: Cause::Webhook,
                        evidence: Some("test"),
                        note: None,
                        commitment_version: None,
                    },
                    now(),
                )
            })
            .unwrap();
    }
}

fn exists(fx: &mut Fixture, key: &str) -> bool {
    fx.store.read(|tx| tx.find_intention(key)).is_ok()
}

#[test]
fn a_read_message_shows_its_evidence_and_needs_the_typed_word() {
    let mut fx = clinic(40);
    let (id, key) = first_in(&mut fx, IntentionState::Read);
    let mut app = fx.app("supervisora", Role::Supervisor);
    open_detail(&mut fx, &mut app, id);
    ask_resend(&mut fx, &mut app, "la paciente borró el mensaje");
    assert_eq!(app.mode, Mode::ConfirmWord);
    let screen = render(&app, 100, 30);
    for expected in [
        "Lo que ya existe de este mensaje:",
        &format!("original #{id} {key} · leída"),
        // Local and human, as every front-desk date (issue 25 §2).
        "aceptado hoy 07:40",
        "entregado hoy 07:40",
        "leído hoy 07:40",
        // A send is never undone, and the confirmation says so (§4).
        "Un envío no se puede deshacer",
        "lo planificó el sistema",
        "Reenvíos autorizados hoy: 0 de 2",
        "ATENCIÓN: ya recibió este aviso.",
        "Escriba REENVIAR y enter",
    ] {
        assert!(screen.contains(expected), "missing {expected:?} in\n{screen}");
    }
    insta::assert_snapshot!("resend_confirm_read", screen);

    // `s` is only a letter here: the word is what confirms.
    let s = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE);
    let access = Access {
        role: Role::Supervisor,
        read_only: false,
    };
    assert_eq!(
        action_for(&s, Screen::Detail, access, Mode::ConfirmWord),
        Some(Action::Input('s'))
    );
    fx.act(&mut app, Action::Confirm);
    assert_eq!(app.mode, Mode::ConfirmWord);
    fx.type_text(&mut app, "si");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::ConfirmWord, "a wrong word keeps the dialog open");
    let error = app.confirm.as_ref().unwrap().resend.as_ref().unwrap().error.clone();
    assert_eq!(error.as_deref(), Some("Escriba exactamente REENVIAR para confirmar."));
    assert!(!exists(&mut fx, &format!("{key}:reenvio:1")));
    assert!(fx.store.read(|tx| tx.operator_actions(10)).unwrap().is_empty());

    fx.act(&mut app, Action::Backspace);
    fx.act(&mut app, Action::Backspace);
    fx.type_text(&mut app, "REENVIAR");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Normal);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    let new_key = format!("{key}:reenvio:1");
    let d = fx.store.read(|tx| tx.intention_detail(&new_key)).unwrap();
    assert!(d.acknowledged_delivery);
    assert_eq!(d.acknowledgement.as_ref().unwrap().operator, "supervisora");
    let action = &fx.store.read(|tx| tx.operator_actions(10)).unwrap()[0];
    assert_eq!(
        (action.action.as_str(), action.result.as_str()),
        ("authorize_resend", "done")
    );
    assert!(action.detail.as_deref().unwrap().contains("delivery acknowledged"));
}

#[test]
fn a_failed_message_without_delivery_evidence_confirms_with_s() {
    let mut fx = clinic(40);
    let (id, key) = first_in(&mut fx, IntentionState::Failed);
    let mut app = fx.app("supervisora", Role::Supervisor);
    open_detail(&mut fx, &mut app, id);

    // Until the worker answers, the dialog says it is loading and `s` does
    // nothing: a resend is never decided without its evidence on screen.
    fx.act(&mut app, Action::Op(OpKind::AuthorizeResend));
    fx.type_text(&mut app, "número corregido");
    let reqs = app.on_action(Action::Submit);
    assert!(matches!(reqs.as_slice(), [Request::ResendEvidence { .. }]), "{reqs:?}");
    let screen = render(&app, 100, 30);
    assert!(screen.contains("cargando la evidencia…"), "{screen}");
    assert!(!screen.contains("s confirmar"), "{screen}");
    assert!(app.on_action(Action::Confirm).is_empty());
    assert_eq!(app.mode, Mode::Confirm);
    fx.run(&mut app, reqs);

    assert_eq!(app.mode, Mode::Confirm);
    let screen = render(&app, 100, 30);
    assert!(screen.contains("sin evidencia de entrega"), "{screen}");
    assert!(screen.contains("s confirmar"), "{screen}");
    assert!(!screen.contains("REENVIAR"), "{screen}");
    fx.act(&mut app, Action::Confirm);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    let d = fx
        .store
        .read(|tx| tx.intention_detail(&format!("{key}:reenvio:1")))
        .unwrap();
    assert!(!d.acknowledged_delivery);

    // The next dialog shows the pending resend and what the guard will say.
    ask_resend(&mut fx, &mut app, "otra vez");
    let screen = render(&app, 100, 30);
    assert!(screen.contains(&format!("reenvío #{}", d.intention.id)), "{screen}");
    assert!(screen.contains("autorizó supervisora"), "{screen}");
    assert!(screen.contains("Se rechazará: regla de reenvío pendiente"), "{screen}");
    // A confirmation that will be refused never offers `s`, and `s` does
    // nothing there (issue 25 §3).
    assert!(!screen.contains("s confirmar"), "{screen}");
    assert!(screen.contains("No se puede confirmar: reenvío en curso"), "{screen}");
    assert!(app.on_action(Action::Confirm).is_empty());
    assert_eq!(app.mode, Mode::Confirm);
    fx.act(&mut app, Action::Abort);
    assert_eq!(app.mode, Mode::Normal);
}

/// The reproduction: the original failed, a first resend was
/// authorized and then read by the patient; a second resend used to be
/// created with no warning.
#[test]
fn a_resend_whose_earlier_resend_was_read_is_refused_without_the_acknowledgement() {
    let mut fx = clinic(40);
    let (id, key) = first_in(&mut fx, IntentionState::Failed);
    let mut app = fx.app("supervisora", Role::Supervisor);
    open_detail(&mut fx, &mut app, id);
    ask_resend(&mut fx, &mut app, "número corregido");
    fx.act(&mut app, Action::Confirm);
    let first = format!("{key}:reenvio:1");
    let first_id = fx.store.read(|tx| tx.find_intention(&first)).unwrap().id;
    signals(
        &mut fx,
        first_id,
        &[Signal::Claim, Signal::Accepted, Signal::Delivered, Signal::Read],
    );

    // Asked on the original: the dialog shows the read resend and wants the word.
    ask_resend(&mut fx, &mut app, "no le llegó");
    assert_eq!(app.mode, Mode::ConfirmWord);
    let screen = render(&app, 100, 30);
    assert!(
        screen.contains(&format!("reenvío #{first_id} {first} · leída")),
        "{screen}"
    );
    // Declining changes nothing.
    fx.act(&mut app, Action::Abort);
    assert!(!exists(&mut fx, &format!("{key}:reenvio:2")));

    // The library refuses it too when the acknowledgement is missing (the
    // console's word only sets it), naming the rule.
    let r = fx
        .store
        .write(|tx| {
            unavez::ops::authorize_resend(
                tx,
                &unavez::ops::Actor {
                    name: "supervisora",
                    role: Role::Supervisor,
                },
                id,
                "no le llegó",
                unavez::ops::ResendGuard {
                    acknowledge_delivered: false,
                    max_per_day: 2,
                },
                chrono_tz::America::Lima,
                now(),
            )
        })
        .unwrap();
    let unavez::ops::OpOutcome::Refused(why) = &r.outcome else {
        panic!("{r:?}")
    };
    assert_eq!(why.rule(), "acknowledge_delivery");
    assert!(!exists(&mut fx, &format!("{key}:reenvio:2")));

    // With the word: created, related to the original, and recorded.
    ask_resend(&mut fx, &mut app, "no le llegó");
    fx.type_text(&mut app, "reenviar");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    let second = fx
        .store
        .read(|tx| tx.intention_detail(&format!("{key}:reenvio:2")))
        .unwrap();
    assert_eq!(second.intention.related_id, Some(id));
    assert!(second.acknowledged_delivery);
    let ack = second.acknowledgement.unwrap();
    assert_eq!(ack.evidence.as_array().unwrap().len(), 1);
    assert_eq!(ack.evidence[0]["key"], first.as_str());
    assert_eq!(ack.evidence[0]["state"], "read");

    // That was the second resend today: the cap (2) refuses a third.
    signals(&mut fx, second.intention.id, &[Signal::Claim, Signal::Failed]);
    ask_resend(&mut fx, &mut app, "tercera vez");
    assert_eq!(app.mode, Mode::Confirm, "no word is asked for what will be refused");
    let screen = render(&app, 100, 30);
    assert!(screen.contains("Reenvíos autorizados hoy: 2 de 2"), "{screen}");
    assert!(screen.contains("Se rechazará: regla de tope diario"), "{screen}");
}

#[test]
fn english_console_asks_for_resend() {
    let mut fx = clinic(40);
    fx.ctx.config.language = unavez::config::Language::En;
    let (id, _) = first_in(&mut fx, IntentionState::Delivered);
    let mut app = fx.app("supervisora", Role::Supervisor);
    open_detail(&mut fx, &mut app, id);
    ask_resend(&mut fx, &mut app, "patient asked");
    assert_eq!(app.mode, Mode::ConfirmWord);
    let screen = render(&app, 100, 30);
    assert!(screen.contains("Type RESEND and enter to resend anyway"), "{screen}");
    assert!(screen.contains("delivered today 07:40"), "{screen}");
    assert!(screen.contains("A send cannot be undone"), "{screen}");
}
