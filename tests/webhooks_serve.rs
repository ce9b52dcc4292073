//! `unavez serve` as a real process: dispatcher and webhook server side by
//! side, the engine simulator sending real messages and posting its
//! duplicated, delayed and reordered webhooks to the server. Also the end
//! effect of an opt-out reply on the next dispatch, per policy.

mod dispatch_support;
mod webhooks_support;

use std::process::Stdio;
use std::time::Duration;

use dispatch_support::{Cfg, Env, INSTANCE, Proc, phone, runtime, scheduled, sent_counts, wait_until};
use unavez::domain::state::{CancelReason, IntentionState};
use unavez_testkit::{Backend, on_both};

/// The default `server.motor_webhook_secret_env`, set for the child only.
const SECRET_ENV: &str = "UNAVEZ_MOTOR_WEBHOOK_SECRET";
const SECRET: &str = "secreto-del-motor";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn engine_state(estado: &str) -> IntentionState {
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

fn serve_with_the_simulator_ends_in_the_states_its_log_justifies(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let port = free_port();
    let sim = rt
        .block_on(unavez::sim::spawn(unavez::sim::SimOptions {
            log: Some(log.path().to_path_buf()),
            faults: unavez::sim::FaultSpec::parse(
                "webhook_dup=0.5,webhook_delay_ms=0..300,webhook_reorder=true,timeout_after=0.2",
            )
            .unwrap(),
            seed: 11,
            webhook: Some(format!("http://127.0.0.1:{port}/webhooks/motor")),
            webhook_secret: SECRET.as_bytes().to_vec(),
            ..Default::default()
        }))
        .unwrap();
    let mut cfg = Cfg::motor(&sim.base_url());
    cfg.server_listen = format!("127.0.0.1:{port}");
    let env = Env::with(backend, &cfg);
    let events: Vec<String> = (0..12).map(|n| scheduled(&format!("cita-w{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let child = env
        .command(&["serve", "--json"])
        .env(SECRET_ENV, SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut serve = Proc(Some(child));

    // Every intention ends where the engine says its command is (the
    // simulator reads every message shortly after delivering it).
    let settled = wait_until(Duration::from_secs(50), || {
        let rows = env.intentions();
        !rows.is_empty()
            && rows.iter().all(|i| {
                sim.command_by_key(INSTANCE, &i.key)
                    .is_some_and(|c| c.estado == "leido" && i.state == engine_state(&c.estado))
            })
    });
    assert!(settled, "not settled: {:?} {:?}", env.state_counts(), sim.stats());
    // Late duplicates land too.
    std::thread::sleep(Duration::from_millis(800));

    let metrics = rt.block_on(async {
        reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert!(metrics.contains("unavez_intentions{state=\"read\"} 12"), "{metrics}");
    serve.terminate();

    let counts = sent_counts(log.path());
    let rows = env.intentions();
    assert_eq!(rows.len(), 12);
    for i in &rows {
        assert_eq!(
            counts.get(&i.key).copied(),
            Some(1),
            "exactly one message for {}",
            i.key
        );
        let c = sim.command_by_key(INSTANCE, &i.key).unwrap();
        assert_eq!(i.state, engine_state(&c.estado), "{}", i.key);
        let ranks: Vec<u8> = env
            .history(i.id)
            .iter()
            .filter(|r| r.applied)
            .filter_map(|r| r.to_state.parse::<IntentionState>().ok().and_then(|s| s.rank()))
            .collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{}: {ranks:?}", i.key);
    }
    let mut store = env.store();
    let dups = store.read(|tx| tx.counter("duplicate_events_motor")).unwrap();
    let copies = store.read(|tx| tx.extra_copies("motor")).unwrap();
    let noted: usize = rows
        .iter()
        .map(|i| {
            env.history(i.id)
                .iter()
                .filter(|r| r.signal == "duplicate_webhook")
                .count()
        })
        .sum();
    assert!(dups > 0, "about half the webhooks are duplicated");
    assert_eq!(copies, dups, "every blocked duplicate is counted on its stored event");
    assert_eq!(noted, 0, "no history row per copy");
    rt.block_on(sim.shutdown());
}

/// Posts an opt-out reply for `phone(0)` through the real server on the
/// test's ledger, then dispatches with the real binary.
/// `expect_sent`: how many messages must show in the simulator's log (it
/// writes a line when the message goes out, shortly after accepting it).
fn opt_out_then_dispatch(
    backend: Backend,
    word: &str,
    blocks_transactional: bool,
    expect_sent: usize,
) -> (Env, std::collections::HashMap<String, usize>) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = dispatch_support::start_sim(&rt, log.path(), "", 3);
    let cfg = Cfg::motor(&sim.base_url());
    let env = Env::with(backend, &cfg);
    env.import("agenda.jsonl", &[scheduled("cita-a", 0), scheduled("cita-b", 1)]);

    let db = env.db.clone();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let h = webhooks_support::Harness::start_on(dir, db, |c| {
            c.inbound.opt_out_blocks_transactional = blocks_transactional
        })
        .await;
        let body = webhooks_support::fixture("inbound_text.json")
            .replace("\"CONFIRMO\"", &format!("\"{word}\""))
            .replace("\"51987654321\"", &format!("\"{}\"", phone(0).trim_start_matches('+')))
            .replace("\"1750857500\"", &format!("\"{}\"", chrono::Utc::now().timestamp()));
        assert_eq!(h.post_cloud(&body).await.status(), 200);
        h.stop().await;
    });
    env.ok(&["dispatch", "--until-idle"]);
    assert!(
        wait_until(Duration::from_secs(30), || sent_counts(log.path()).len() >= expect_sent),
        "expected {expect_sent} message(s) out: {:?}",
        sent_counts(log.path())
    );
    let counts = sent_counts(log.path());
    rt.block_on(sim.shutdown());
    (env, counts)
}

fn baja_keeps_transactional_messages_by_default(backend: Backend) {
    let (env, counts) = opt_out_then_dispatch(backend, "BAJA", false, 2);
    let rows = env.by_key();
    for k in ["cita-a:aviso-reserva:v1", "cita-b:aviso-reserva:v1"] {
        assert_eq!(counts.get(k).copied(), Some(1), "{k} sent: {counts:?}");
        assert!(rows[k].state.has_channel_evidence(), "{k}: {:?}", rows[k].state);
    }
}

fn stop_blocks_the_next_transactional_message_when_policy_says_so(backend: Backend) {
    let (env, counts) = opt_out_then_dispatch(backend, "STOP", true, 1);
    let rows = env.by_key();
    let a = &rows["cita-a:aviso-reserva:v1"];
    assert_eq!(a.state, IntentionState::Cancelled);
    assert_eq!(a.state_reason.as_deref(), Some(CancelReason::OptedOut.as_str()));
    assert!(
        !counts.contains_key("cita-a:aviso-reserva:v1"),
        "no message to the opted-out customer"
    );
    assert_eq!(counts.get("cita-b:aviso-reserva:v1").copied(), Some(1));
}

on_both!(
    serve_with_the_simulator_ends_in_the_states_its_log_justifies,
    baja_keeps_transactional_messages_by_default,
    stop_blocks_the_next_transactional_message_when_policy_says_so,
);
