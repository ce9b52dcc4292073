//! Verification through the channel: the console asks the engine simulator
//! (real HTTP on loopback) where an uncertain intention's command is, and
//! records the answer as evidence, or explains why it cannot.

mod tui_support;

use std::sync::Arc;

use unavez::channel::motor::MotorChannel;
use unavez::channel::{Channel, SendRequest};
use unavez::config::{MotorConfig, Role};
use unavez::dispatch::Settings;
use unavez::dispatch::request::send_request;
use unavez::domain::state::IntentionState;
use unavez::ops::OpKind;
use unavez::sim::{self, SimOptions};
use unavez::store::IntentFilter;
use unavez::tui::app::FlashKind;
use unavez::tui::keys::{Action, Mode};
use unavez::tui::worker::ReprocessCtx;

use tui_support::{Fixture, clinic};

fn uncertain(fx: &mut Fixture) -> Vec<i64> {
    fx.store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                states: vec![IntentionState::Uncertain],
                limit: 10,
                ..Default::default()
            })
        })
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect()
}

fn verify_with_channel(fx: &mut Fixture, app: &mut unavez::tui::app::App, id: i64) {
    fx.act(app, Action::OpenCommand);
    fx.type_text(app, &format!("detalle {id}"));
    fx.act(app, Action::Submit);
    fx.act(app, Action::Op(OpKind::Verify));
    assert_eq!(app.mode, Mode::Form);
    // received → not received → channel
    fx.act(app, Action::NextField);
    fx.act(app, Action::NextField);
    fx.type_text(app, "consulta al motor");
    fx.act(app, Action::Submit);
    assert!(app.confirm.as_ref().unwrap().scope.contains("conciliar con el canal"));
    fx.act(app, Action::Confirm);
}

/// A seeded clinic whose console reaches the engine at `base_url`.
fn clinic_with_engine(
    rt: &tokio::runtime::Runtime,
    base_url: String,
    connect_timeout_ms: u64,
) -> (Fixture, Arc<dyn Channel>) {
    let motor = MotorConfig {
        base_url,
        connect_timeout_ms,
        ..MotorConfig::default()
    };
    let channel: Arc<dyn Channel> = Arc::new(MotorChannel::with_api_key(&motor, "test").unwrap());
    let mut fx = clinic(40);
    fx.ctx.reprocess = Some(ReprocessCtx {
        ledger: unavez::ledger::Ledger::open(&fx.db).unwrap(),
        settings: Arc::new(Settings::from_config(&fx.ctx.config)),
        channel: Some(channel.clone()),
        runtime: rt.handle().clone(),
        progress: None,
    });
    (fx, channel)
}

#[test]
fn the_engine_s_answer_settles_uncertain_sends_without_a_second_message() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = rt.block_on(sim::spawn(SimOptions::default())).unwrap();
    let (mut fx, channel) = clinic_with_engine(&rt, engine.base_url(), 1000);
    let ids = uncertain(&mut fx);
    let (sent_id, never_sent_id) = (ids[0], ids[1]);
    // The engine did receive the first one (the response was what got lost).
    let row = fx.store.read(|tx| tx.intention(sent_id)).unwrap();
    let out = rt.block_on(channel.send(&send_request(&row, None, tui_support::now())));
    let unavez::channel::SendOutcome::Accepted {
        command_id: Some(cmd), ..
    } = out
    else {
        panic!("{out:?}")
    };
    // Its command id is known (e.g. from an earlier answer or webhook).
    fx.store
        .write(|tx| tx.set_provider_refs(sent_id, Some(&cmd), None, tui_support::now()))
        .unwrap();

    let mut app = fx.app("recepcion", Role::FrontDesk);
    app.channel_verify = true;
    verify_with_channel(&mut fx, &mut app, sent_id);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    let after = fx.store.read(|tx| tx.intention(sent_id)).unwrap();
    assert!(after.state.has_channel_evidence(), "{:?}", after.state);
    let h = fx.store.read(|tx| tx.history(sent_id)).unwrap();
    let last = h.iter().rev().find(|h| h.cause == "operator").unwrap();
    assert!(
        last.evidence.as_deref().unwrap().starts_with("channel_lookup:"),
        "{last:?}"
    );

    // The second never reached the engine and no command id is known for
    // it. Asking an idempotent engine by key would repeat the request — the
    // first delivery if the first never arrived, with no validity check and
    // no attempt recorded. A verification never sends: it is refused and
    // explained, and the engine gets nothing.
    verify_with_channel(&mut fx, &mut app, never_sent_id);
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Refused, "{flash:?}");
    assert!(flash.text.contains("volver a enviar"), "{}", flash.text);
    assert_eq!(
        fx.store.read(|tx| tx.intention(never_sent_id)).unwrap().state,
        IntentionState::Uncertain
    );
    assert_eq!(engine.stats().created, 1, "the verification sent nothing");
    let actions = fx.store.read(|tx| tx.operator_actions(10)).unwrap();
    assert_eq!(actions.len(), 2);
    assert!(
        actions
            .iter()
            .all(|a| a.action == "verify" && a.reason == "consulta al motor")
    );
    assert_eq!(actions[0].result, "refused", "{actions:?}");
    rt.block_on(engine.shutdown());
}

#[test]
fn an_unreachable_channel_is_explained_and_changes_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (mut fx, _channel) = clinic_with_engine(&rt, "http://127.0.0.1:9".into(), 500);
    let id = uncertain(&mut fx)[0];
    fx.store
        .write(|tx| tx.set_provider_refs(id, Some("cmd_1"), None, tui_support::now()))
        .unwrap();
    let mut app = fx.app("recepcion", Role::FrontDesk);
    app.channel_verify = true;
    verify_with_channel(&mut fx, &mut app, id);
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Refused, "{flash:?}");
    assert!(flash.text.contains("no se pudo consultar al canal"), "{}", flash.text);
    assert_eq!(
        fx.store.read(|tx| tx.intention(id)).unwrap().state,
        IntentionState::Uncertain
    );
    let a = &fx.store.read(|tx| tx.operator_actions(10)).unwrap()[0];
    assert_eq!((a.action.as_str(), a.result.as_str()), ("verify", "refused"));
}

fn cancel_from_detail(fx: &mut Fixture, app: &mut unavez::tui::app::App, id: i64) {
    fx.act(app, Action::OpenCommand);
    fx.type_text(app, &format!("detalle {id}"));
    fx.act(app, Action::Submit);
    fx.act(app, Action::Op(OpKind::Cancel));
    assert_eq!(app.mode, Mode::Form);
    fx.type_text(app, "la cita se reprogramó por teléfono");
    fx.act(app, Action::Submit);
    fx.act(app, Action::Confirm);
}

#[test]
fn cancelling_an_accepted_but_queued_command_withdraws_it_from_the_engine() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Commands stay queued for a minute: the operator is in time.
    let opts = SimOptions {
        timing: sim::SimTiming {
            send_ms: 60_000,
            ..Default::default()
        },
        ..Default::default()
    };
    let engine = rt.block_on(sim::spawn(opts)).unwrap();
    let (mut fx, channel) = clinic_with_engine(&rt, engine.base_url(), 1000);
    let id = uncertain(&mut fx)[0];
    // The engine took the request (its answer was what got lost): a
    // verification by command id makes it accepted.
    let row = fx.store.read(|tx| tx.intention(id)).unwrap();
    let out = rt.block_on(channel.send(&send_request(&row, None, tui_support::now())));
    let unavez::channel::SendOutcome::Accepted {
        command_id: Some(cmd), ..
    } = out
    else {
        panic!("{out:?}")
    };
    fx.store
        .write(|tx| tx.set_provider_refs(id, Some(&cmd), None, tui_support::now()))
        .unwrap();
    let mut app = fx.app("supervisora", Role::Supervisor);
    app.channel_verify = true;
    verify_with_channel(&mut fx, &mut app, id);
    let row = fx.store.read(|tx| tx.intention(id)).unwrap();
    assert_eq!(row.state, IntentionState::Accepted, "{:?}", app.flash);
    assert_eq!(row.provider_command_id.as_deref(), Some(cmd.as_str()));

    cancel_from_detail(&mut fx, &mut app, id);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    let row = fx.store.read(|tx| tx.intention(id)).unwrap();
    assert_eq!(row.state, IntentionState::Cancelled);
    assert_eq!(row.state_reason.as_deref(), Some("withdrawn"));
    assert_eq!(engine.stats().sent, 0, "the withdrawn command never went out");
    let a = &fx.store.read(|tx| tx.operator_actions(10)).unwrap()[0];
    assert_eq!((a.action.as_str(), a.operator.as_str()), ("cancel", "supervisora"));
    rt.block_on(engine.shutdown());
}

#[test]
fn cancelling_a_command_that_already_went_out_is_explained_and_changes_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = rt.block_on(sim::spawn(SimOptions::default())).unwrap();
    let (mut fx, channel) = clinic_with_engine(&rt, engine.base_url(), 1000);
    let id = uncertain(&mut fx)[0];
    let row = fx.store.read(|tx| tx.intention(id)).unwrap();
    // The engine expires commands on the wall clock, the fixture's
    // appointments are on a fixed day: without an expiry this one goes out
    // whenever the suite runs.
    let req = SendRequest {
        expires_at: None,
        ..send_request(&row, None, tui_support::now())
    };
    let out = rt.block_on(channel.send(&req));
    let unavez::channel::SendOutcome::Accepted {
        command_id: Some(cmd), ..
    } = out
    else {
        panic!("{out:?}")
    };
    // Let the engine send it, then record only the acceptance in the ledger.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while engine.stats().sent == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(engine.stats().sent, 1);
    fx.store
        .write(|tx| {
            tx.signal(
                id,
                unavez::domain::state::Signal::Accepted,
                &unavez::store::Entry {
                    signal: "accepted",
                    cause: unavez::store::Cause::Reconciler,
                    evidence: Some(&cmd),
                    note: None,
                    commitment_version: None,
                },
                tui_support::now(),
            )?;
            tx.set_provider_refs(id, Some(&cmd), None, tui_support::now())
        })
        .unwrap();
    let mut app = fx.app("supervisora", Role::Supervisor);
    cancel_from_detail(&mut fx, &mut app, id);
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Refused, "{:?}", app.flash);
    assert_eq!(
        fx.store.read(|tx| tx.intention(id)).unwrap().state,
        IntentionState::Accepted
    );
    rt.block_on(engine.shutdown());
}
