//! End to end on loopback: the engine simulator (engine contract) sends real
//! messages and posts its signed webhooks — duplicated, delayed and
//! reordered — to the real webhook server; the intentions must end in the
//! states the simulator's own record justifies, with every signal in
//! history and no state ever moving backwards.

mod webhooks_support;

use std::time::{Duration, Instant};

use chrono::Utc;
use unavez::channel::motor::MotorChannel;
use unavez::channel::{Channel, SendOutcome, SendRequest};
use unavez::config::MotorConfig;
use unavez::domain::state::{IntentionState, Signal};
use unavez::sim::faults::FaultSpec;
use unavez::sim::{SimOptions, SimTiming};
use unavez::store::{Cause, Entry};
use unavez_testkit::{Backend, on_both};
use webhooks_support::*;

fn expected_state(estado: &str) -> IntentionState {
    match estado {
        "en_cola" => IntentionState::Accepted,
        "enviado" => IntentionState::Sent,
        "entregado" => IntentionState::Delivered,
        "leido" => IntentionState::Read,
        "fallido" => IntentionState::Failed,
        "cancelado" => IntentionState::Cancelled,
        other => panic!("unexpected engine state {other}"),
    }
}

async fn simulator_webhooks_duplicated_and_reordered_end_in_justified_states(backend: Backend) {
    let h = Harness::start(backend).await;
    let faults = FaultSpec::parse("webhook_dup=0.5,webhook_delay_ms=0..400,webhook_reorder=true").expect("fault spec");
    let sim = unavez::sim::spawn(SimOptions {
        seed: 7,
        faults,
        webhook: Some(format!("{}/webhooks/motor", h.base)),
        webhook_secret: MOTOR_SECRET.as_bytes().to_vec(),
        timing: SimTiming {
            send_ms: 10,
            deliver_ms: 20,
            read_ms: 30,
            resolve_ms: 100,
        },
        ..SimOptions::default()
    })
    .await
    .unwrap();

    let mut planned = Vec::new();
    for i in 0..8 {
        planned.extend(h.schedule(&format!("cita-{i}"), 3));
    }
    assert_eq!(planned.len(), 24);

    // A minimal sender standing in for the dispatcher: claim, send with the
    // intention's key, record acceptance and the engine's references.
    let cfg = MotorConfig {
        base_url: sim.base_url(),
        ..MotorConfig::default()
    };
    let channel = MotorChannel::with_api_key(&cfg, "clave-de-prueba").unwrap();
    let mut store = h.store();
    for p in &planned {
        let e = Entry {
            signal: "claim",
            cause: Cause::Dispatcher,
            evidence: None,
            note: None,
            commitment_version: None,
        };
        store
            .write(|tx| tx.signal(p.id, Signal::Claim, &e, Utc::now()))
            .unwrap();
        let req = SendRequest {
            key: p.key.clone(),
            recipient: p.recipient.clone(),
            body: p.body.clone(),
            template: p.template.clone(),
            language: p.language.clone(),
            parameters: p.parameters.clone(),
            expires_at: p.expires_at,
            correlation_id: p.correlation_id.clone(),
            in_service_window: false,
        };
        match channel.send(&req).await {
            SendOutcome::Accepted {
                command_id, message_id, ..
            } => {
                store
                    .write(|tx| {
                        let now = Utc::now();
                        let ev = command_id.clone().unwrap_or_default();
                        let e = Entry {
                            signal: "accepted",
                            cause: Cause::Dispatcher,
                            evidence: Some(&ev),
                            note: None,
                            commitment_version: None,
                        };
                        tx.signal(p.id, Signal::Accepted, &e, now)?;
                        tx.set_provider_refs(p.id, command_id.as_deref(), message_id.as_deref(), now)?;
                        unavez::status::apply_pending_for(tx, p.id, now)
                    })
                    .unwrap();
            }
            other => panic!("send of {} failed: {other:?}", p.key),
        }
    }

    // Wait until every intention shows the engine's final word for its
    // command and the webhook traffic has stopped.
    let deadline = Instant::now() + Duration::from_secs(50);
    loop {
        let done = planned.iter().all(|p| {
            let cmd = sim.command_by_key(&cfg.instance_id, &p.key).expect("command exists");
            cmd.estado == "leido" && h.intention(&p.key).state == expected_state(&cmd.estado)
        });
        let stats = sim.stats();
        if done && stats.webhooks_delivered > 0 {
            // Let late duplicates land too, then check once more below.
            tokio::time::sleep(Duration::from_millis(800)).await;
            break;
        }
        assert!(Instant::now() < deadline, "webhooks did not settle: {stats:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Ground truth: one message per key went out, and each intention's
    // state is what the engine reports for that command.
    // Stop the simulator (and its webhook deliveries) before counting, so
    // no late copy lands between the reads below.
    let sent = sim.sent();
    let commands: std::collections::HashMap<String, unavez::sim::Command> = planned
        .iter()
        .map(|p| (p.key.clone(), sim.command_by_key(&cfg.instance_id, &p.key).unwrap()))
        .collect();
    sim.shutdown().await;
    assert_eq!(sent.len(), planned.len());
    for p in &planned {
        assert_eq!(sent.iter().filter(|s| s.key == p.key).count(), 1, "{}", p.key);
        let cmd = &commands[&p.key];
        let row = h.intention(&p.key);
        assert_eq!(row.state, expected_state(&cmd.estado), "{}", p.key);
        assert_eq!(row.provider_command_id.as_deref(), Some(cmd.command_id.as_str()));
        // Applied moves never lower the rank, in history order.
        let ranks: Vec<u8> = h
            .history(p.id)
            .iter()
            .filter(|r| r.applied)
            .filter_map(|r| r.to_state.parse::<IntentionState>().ok().and_then(|s| s.rank()))
            .collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{}: {ranks:?}", p.key);
    }
    // One read for both figures: late duplicate copies may still be
    // arriving from the simulator, and each bumps both in one transaction.
    let (dups, copies) = h
        .store()
        .read(|tx| {
            Ok::<_, unavez::store::StoreError>((tx.counter("duplicate_events_motor")?, tx.extra_copies("motor")?))
        })
        .unwrap();
    assert!(dups > 0, "the fault spec duplicates about half of the webhooks");
    let noted: usize = planned
        .iter()
        .map(|p| {
            h.history(p.id)
                .iter()
                .filter(|r| r.signal == "duplicate_webhook")
                .count()
        })
        .sum();
    assert_eq!(copies, dups, "every blocked duplicate is counted on its stored event");
    assert_eq!(noted, 0, "no history row per copy");
    h.stop().await;
}

on_both!(
    async:
    simulator_webhooks_duplicated_and_reordered_end_in_justified_states,
);
