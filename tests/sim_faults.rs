//! Every simulator fault, seen through the engine client (`MotorChannel`),
//! over real HTTP on loopback; plus webhook signing and determinism.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::HeaderMap;
use unavez::channel::motor::MotorChannel;
use unavez::channel::motor_event::{self, MotorEvent, SIGNATURE_HEADER};
use unavez::channel::{CancelOutcome, Channel, ChannelState, LookupOutcome, SendOutcome, SendRequest};
use unavez::config::MotorConfig;
use unavez::sim::{self, FaultSpec, PauseMode, SimHandle, SimOptions, SimTiming};

const INST: &str = "clinica-principal";

async fn sim_with(faults: &str) -> SimHandle {
    sim::spawn(SimOptions {
        faults: FaultSpec::parse(faults).unwrap(),
        ..SimOptions::default()
    })
    .await
    .unwrap()
}

fn motor(sim: &SimHandle, timeout_ms: u64) -> MotorChannel {
    let cfg = MotorConfig {
        base_url: sim.base_url(),
        instance_id: INST.into(),
        timeout_ms,
        connect_timeout_ms: 2_000,
        ..MotorConfig::default()
    };
    MotorChannel::with_api_key(&cfg, "test-key").unwrap()
}

fn req(key: &str) -> SendRequest {
    SendRequest {
        key: key.into(),
        recipient: "+51987654321".into(),
        body: "Hola Ana, tu cita es mañana a las 09:30.".into(),
        template: "cita_recordatorio".into(),
        language: "es_PE".into(),
        parameters: vec!["Ana".into(), "09:30".into()],
        expires_at: None,
        correlation_id: format!("corr-{key}"),
        in_service_window: true,
    }
}

async fn until<F: FnMut() -> bool>(what: &str, mut f: F) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn accepted_then_repeat_returns_the_same_command() {
    let sim = sim_with("").await;
    let ch = motor(&sim, 5_000);
    assert_eq!(ch.kind(), "motor");
    assert!(ch.capabilities().idempotent_keys && ch.capabilities().command_lookup && ch.capabilities().cancel);
    let SendOutcome::Accepted {
        command_id,
        state,
        http_status,
        ..
    } = ch.send(&req("a1")).await
    else {
        panic!()
    };
    assert_eq!((state, http_status), (ChannelState::Queued, Some(202)));
    until("sent", || sim.stats().sent == 1).await;
    let SendOutcome::Accepted {
        command_id: again,
        state,
        message_id,
        ..
    } = ch.send(&req("a1")).await
    else {
        panic!()
    };
    assert_eq!(again, command_id);
    assert_ne!(state, ChannelState::Queued);
    assert!(message_id.unwrap().starts_with("wamid."));
    // Lookup by id and by repeating.
    let LookupOutcome::Found { command_id: by_id, .. } = ch.lookup(&req("a1"), command_id.as_deref()).await else {
        panic!()
    };
    assert_eq!(by_id, command_id);
    let LookupOutcome::Found { command_id: by_key, .. } = ch.lookup(&req("a1"), None).await else {
        panic!()
    };
    assert_eq!(by_key, command_id);
    assert_eq!(
        ch.lookup(&req("a1"), Some("cmd_unknown")).await,
        LookupOutcome::NotFound
    );
    assert_eq!(sim.stats().sent, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn conflict_and_failed_classes() {
    let sim = sim_with("").await;
    let ch = motor(&sim, 5_000);
    assert!(matches!(ch.send(&req("c1")).await, SendOutcome::Accepted { .. }));
    let mut other = req("c1");
    other.body = "Otro texto".into();
    let SendOutcome::Conflict { detail, http_status } = ch.send(&other).await else {
        panic!()
    };
    assert_eq!(http_status, Some(409));
    assert!(detail.contains("otro contenido"), "{detail}");
    // 201-character key → 422 → failed, not retried.
    let SendOutcome::Failed { http_status, .. } = ch.send(&req(&"k".repeat(201))).await else {
        panic!()
    };
    assert_eq!(http_status, Some(422));
    // generacion_esperada mismatch → conflict.
    let cfg = MotorConfig {
        base_url: sim.base_url(),
        instance_id: INST.into(),
        expected_generation: Some(7),
        ..MotorConfig::default()
    };
    let g = MotorChannel::with_api_key(&cfg, "test-key").unwrap();
    let SendOutcome::Conflict { detail, .. } = g.send(&req("g1")).await else {
        panic!()
    };
    assert!(detail.contains("generacion_cambiada"), "{detail}");
    sim.shutdown().await;
}

#[tokio::test]
async fn error5xx_is_retry_and_stores_nothing() {
    let sim = sim_with("error5xx=1.0").await;
    let ch = motor(&sim, 5_000);
    let SendOutcome::Retry { http_status, .. } = ch.send(&req("e1")).await else {
        panic!()
    };
    assert_eq!(http_status, Some(503));
    assert!(sim.command_by_key(INST, "e1").is_none());
    sim.set_faults(FaultSpec::none());
    assert!(matches!(ch.send(&req("e1")).await, SendOutcome::Accepted { .. }));
    until("sent", || sim.stats().sent == 1).await;
    sim.shutdown().await;
}

#[tokio::test]
async fn refused_connection_is_retry() {
    let sim = sim_with("").await;
    let ch = motor(&sim, 5_000);
    sim.pause(PauseMode::Refuse, None);
    // The listener closes asynchronously; poll until refusal shows.
    let start = Instant::now();
    loop {
        match ch.send(&req("r1")).await {
            SendOutcome::Retry { http_status: None, .. } => break,
            other => assert!(start.elapsed() < Duration::from_secs(20), "never refused: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sim.resume();
    let start = Instant::now();
    loop {
        match ch.send(&req("r2")).await {
            SendOutcome::Accepted { .. } => break,
            other => assert!(start.elapsed() < Duration::from_secs(20), "never came back: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Unavailable mode answers 503 → retry.
    sim.pause(PauseMode::Unavailable, None);
    assert!(matches!(
        ch.send(&req("r3")).await,
        SendOutcome::Retry {
            http_status: Some(503),
            ..
        }
    ));
    sim.resume();
    sim.shutdown().await;
}

#[tokio::test]
async fn timeout_after_processing_is_uncertain_and_the_message_still_goes_out_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sent.jsonl");
    let sim = sim::spawn(SimOptions {
        faults: FaultSpec::parse("timeout_after=1.0,hold_ms=3000").unwrap(),
        log: Some(log.clone()),
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let ch = motor(&sim, 300);
    let SendOutcome::Uncertain { .. } = ch.send(&req("t1")).await else {
        panic!()
    };
    // Processed: stored and sent.
    until("sent", || sim.stats().sent == 1).await;
    assert!(sim.command_by_key(INST, "t1").is_some());
    // Reconcile by repeating with the same key (fault off): same command, no second send.
    sim.set_faults(FaultSpec::none());
    let LookupOutcome::Found { state, message_id, .. } = ch.lookup(&req("t1"), None).await else {
        panic!()
    };
    assert_ne!(state, ChannelState::Queued);
    assert!(message_id.is_some());
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1);
    assert_eq!(sim.stats().faults.timeout_after, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn dropped_held_response_is_uncertain() {
    // The server drops the connection itself (hold shorter than the client timeout).
    let sim = sim_with("timeout_after=1.0,hold_ms=10").await;
    let ch = motor(&sim, 10_000);
    let SendOutcome::Uncertain { detail } = ch.send(&req("t2")).await else {
        panic!()
    };
    assert!(detail.contains("connection lost"), "{detail}");
    until("sent", || sim.stats().sent == 1).await;
    sim.shutdown().await;
}

#[tokio::test]
async fn reset_before_processing_is_uncertain_and_stores_nothing() {
    let sim = sim_with("reset=1.0").await;
    let ch = motor(&sim, 5_000);
    // The client cannot tell a reset before processing from one after.
    let SendOutcome::Uncertain { .. } = ch.send(&req("x1")).await else {
        panic!()
    };
    assert!(sim.command_by_key(INST, "x1").is_none());
    assert_eq!(sim.stats().faults.reset, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn rate429_carries_the_stored_command_for_a_known_key() {
    let sim = sim_with("").await;
    let ch = motor(&sim, 5_000);
    let SendOutcome::Accepted { command_id, .. } = ch.send(&req("q1")).await else {
        panic!()
    };
    sim.set_faults(FaultSpec::parse("rate429=1.0").unwrap());
    let SendOutcome::Accepted {
        command_id: again,
        http_status,
        ..
    } = ch.send(&req("q1")).await
    else {
        panic!()
    };
    assert_eq!((again, http_status), (command_id, Some(429)));
    // A new key under a 429: retry, nothing stored.
    let SendOutcome::Retry {
        http_status,
        retry_after_secs,
        ..
    } = ch.send(&req("q2")).await
    else {
        panic!()
    };
    assert_eq!((http_status, retry_after_secs), (Some(429), Some(1)));
    assert!(sim.command_by_key(INST, "q2").is_none());
    sim.shutdown().await;
}

#[tokio::test]
async fn ambiguous_commands_resolve_and_the_log_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sent.jsonl");
    let sim = sim::spawn(SimOptions {
        faults: FaultSpec::parse("ambiguous=1.0").unwrap(),
        log: Some(log.clone()),
        timing: SimTiming {
            resolve_ms: 50,
            ..SimTiming::default()
        },
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let ch = motor(&sim, 5_000);
    let keys: Vec<String> = (0..20).map(|i| format!("amb-{i}")).collect();
    for k in &keys {
        assert!(matches!(ch.send(&req(k)).await, SendOutcome::Accepted { .. }));
    }
    until("all resolved", || {
        sim.commands()
            .iter()
            .all(|c| c.estado != "en_cola" && c.estado != "ambiguo")
    })
    .await;
    let sent: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<sim::SentLine>(l).unwrap().key)
        .collect();
    let mut went_out = 0;
    for c in sim.commands() {
        let in_log = sent.iter().filter(|k| **k == c.idempotency_key).count();
        if c.estado == "fallido" {
            assert_eq!(in_log, 0, "{c:?}");
            assert_eq!(c.detail.as_deref(), Some("no_salio"));
        } else {
            assert_eq!(in_log, 1, "{c:?}");
            went_out += 1;
        }
    }
    assert!(went_out > 0 && went_out < 20, "seeded split, got {went_out}");
    assert_eq!(sim.stats().faults.ambiguous, 20);
    sim.shutdown().await;
}

#[tokio::test]
async fn cancel_through_the_client() {
    let sim = sim::spawn(SimOptions {
        timing: SimTiming {
            send_ms: 60_000,
            ..SimTiming::default()
        },
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let ch = motor(&sim, 5_000);
    let SendOutcome::Accepted {
        command_id: Some(id), ..
    } = ch.send(&req("n1")).await
    else {
        panic!()
    };
    assert_eq!(ch.cancel(&id).await, CancelOutcome::Cancelled);
    assert_eq!(
        ch.cancel(&id).await,
        CancelOutcome::Cancelled,
        "repeat returns the same cancelled command"
    );
    // A repeat of the send now reports the cancelled command.
    assert!(matches!(
        ch.send(&req("n1")).await,
        SendOutcome::Accepted {
            state: ChannelState::Cancelled,
            ..
        }
    ));
    assert!(matches!(ch.cancel("cmd_nope").await, CancelOutcome::Unavailable { .. }));
    sim.shutdown().await;
    let sim = sim_with("").await;
    let ch = motor(&sim, 5_000);
    let SendOutcome::Accepted {
        command_id: Some(id), ..
    } = ch.send(&req("n2")).await
    else {
        panic!()
    };
    until("sent", || sim.stats().sent == 1).await;
    assert!(matches!(ch.cancel(&id).await, CancelOutcome::TooLate { .. }));
    sim.shutdown().await;
}

/// Runs a fixed sequence of sends against a fresh simulator with the seed
/// and returns what each got.
async fn fault_trace(seed: u64) -> Vec<String> {
    let sim = sim::spawn(SimOptions {
        seed,
        faults: FaultSpec::parse("error5xx=0.3,rate429=0.2").unwrap(),
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let ch = motor(&sim, 5_000);
    let mut out = Vec::new();
    for i in 0..30 {
        for _attempt in 0..2 {
            out.push(match ch.send(&req(&format!("det-{i}"))).await {
                SendOutcome::Accepted { http_status, .. } => format!("ok{http_status:?}"),
                SendOutcome::Retry { http_status, .. } => format!("retry{http_status:?}"),
                other => format!("{other:?}"),
            });
        }
    }
    sim.shutdown().await;
    out
}

#[tokio::test]
async fn same_seed_same_faults() {
    let a = fault_trace(42).await;
    assert_eq!(a, fault_trace(42).await);
    assert_ne!(a, fault_trace(43).await);
    assert!(a.iter().any(|s| s.starts_with("retry")) && a.iter().any(|s| s.starts_with("ok")));
}

#[tokio::test]
async fn webhooks_are_signed_and_cover_every_state() {
    let received: Arc<Mutex<Vec<(MotorEvent, bool)>>> = Arc::default();
    let rec = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let rec = rec.clone();
            async move {
                let sig = headers
                    .get(SIGNATURE_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                let ok = motor_event::verify(b"s3cret", &body, sig);
                let ev: MotorEvent = serde_json::from_slice(&body).unwrap();
                rec.lock().unwrap().push((ev, ok));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let sim = sim::spawn(SimOptions {
        webhook: Some(hook),
        webhook_secret: b"s3cret".to_vec(),
        faults: FaultSpec::parse("webhook_dup=1.0,webhook_delay_ms=0..30,webhook_reorder=true").unwrap(),
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let ch = motor(&sim, 5_000);
    let SendOutcome::Accepted {
        command_id: Some(id), ..
    } = ch.send(&req("w1")).await
    else {
        panic!()
    };
    // 4 states (en_cola, enviado, entregado, leido), each delivered twice.
    until("8 deliveries", || received.lock().unwrap().len() == 8).await;
    let got = received.lock().unwrap().clone();
    assert!(got.iter().all(|(_, ok)| *ok), "every signature verifies");
    let mut estados: Vec<&str> = got.iter().map(|(e, _)| e.estado.as_str()).collect();
    estados.sort();
    estados.dedup();
    assert_eq!(estados, ["en_cola", "entregado", "enviado", "leido"]);
    for (e, _) in &got {
        assert_eq!(e.command_id, id);
        assert_eq!(e.idempotency_key, "w1");
        assert_eq!(e.kind, "comando.estado");
        // Duplicates share the event id.
        assert_eq!(got.iter().filter(|(o, _)| o.event_id == e.event_id).count(), 2);
    }
    assert!(!motor_event::verify(
        b"wrong",
        b"{}",
        &motor_event::sign(b"s3cret", b"{}")
    ));
    sim.shutdown().await;
    server.abort();
}

#[tokio::test]
async fn in_process_channel_shares_the_engine_with_http() {
    let sim = sim_with("").await;
    let http = motor(&sim, 5_000);
    let inproc = sim.channel("test-key", INST, None);
    assert_eq!(inproc.kind(), "motor");
    let SendOutcome::Accepted { command_id, .. } = inproc.send(&req("ip1")).await else {
        panic!()
    };
    // The HTTP client with the same key sees the same command.
    let SendOutcome::Accepted {
        command_id: via_http, ..
    } = http.send(&req("ip1")).await
    else {
        panic!()
    };
    assert_eq!(command_id, via_http);
    let mut other = req("ip1");
    other.body = "otro".into();
    assert!(matches!(inproc.send(&other).await, SendOutcome::Conflict { .. }));
    let LookupOutcome::Found { command_id: found, .. } = inproc.lookup(&req("ip1"), None).await else {
        panic!()
    };
    assert_eq!(found, command_id);
    assert_eq!(
        inproc.lookup(&req("ip1"), Some("cmd_nope")).await,
        LookupOutcome::NotFound
    );
    until("sent", || sim.stats().sent == 1).await;
    assert!(matches!(
        inproc.cancel(command_id.as_deref().unwrap()).await,
        CancelOutcome::TooLate { .. }
    ));
    // Faults apply the same way: a lost answer is uncertain but the message goes out.
    sim.set_faults(FaultSpec::parse("timeout_after=1.0").unwrap());
    assert!(matches!(inproc.send(&req("ip2")).await, SendOutcome::Uncertain { .. }));
    until("second sent", || sim.stats().sent == 2).await;
    sim.set_faults(FaultSpec::parse("error5xx=1.0").unwrap());
    assert!(matches!(
        inproc.send(&req("ip3")).await,
        SendOutcome::Retry {
            http_status: Some(503),
            ..
        }
    ));
    sim.set_faults(FaultSpec::none());
    sim.pause(PauseMode::Unavailable, None);
    assert!(matches!(inproc.send(&req("ip3")).await, SendOutcome::Retry { .. }));
    sim.resume();
    assert_eq!(sim.stats().sent, 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn webhooks_keep_per_command_order_without_reorder_and_retry_non_2xx() {
    let received: Arc<Mutex<Vec<MotorEvent>>> = Arc::default();
    let calls: Arc<Mutex<u32>> = Arc::default();
    let (rec, n) = (received.clone(), calls.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: Bytes| {
            let (rec, n) = (rec.clone(), n.clone());
            async move {
                let mut n = n.lock().unwrap();
                *n += 1;
                // The very first delivery fails: the simulator must retry it.
                if *n == 1 {
                    return axum::http::StatusCode::INTERNAL_SERVER_ERROR;
                }
                rec.lock().unwrap().push(serde_json::from_slice(&body).unwrap());
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let sim = sim::spawn(SimOptions {
        webhook: Some(hook),
        faults: FaultSpec::parse("webhook_delay_ms=0..20").unwrap(),
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let ch = motor(&sim, 5_000);
    for i in 0..10 {
        assert!(matches!(
            ch.send(&req(&format!("ord-{i}"))).await,
            SendOutcome::Accepted { .. }
        ));
    }
    until("40 events", || received.lock().unwrap().len() == 40).await;
    // The simulator counts a delivery once its answer is read, which can
    // come after the receiver stored the event.
    until("40 counted", || sim.stats().webhooks_delivered == 40).await;
    let got = received.lock().unwrap().clone();
    for i in 0..10 {
        let key = format!("ord-{i}");
        let seq: Vec<&str> = got
            .iter()
            .filter(|e| e.idempotency_key == key)
            .map(|e| e.estado.as_str())
            .collect();
        assert_eq!(seq, ["en_cola", "enviado", "entregado", "leido"], "{key}");
    }
    assert_eq!(sim.stats().webhooks_delivered, 40);
    sim.shutdown().await;
    server.abort();
}
