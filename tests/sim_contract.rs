//! The engine contract table against the simulator over real HTTP.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use unavez::sim::{self, SentLine, SimHandle, SimOptions};

const INST: &str = "clinica-principal";

async fn start(log: Option<std::path::PathBuf>) -> SimHandle {
    sim::spawn(SimOptions {
        log,
        ..SimOptions::default()
    })
    .await
    .unwrap()
}

async fn post(sim: &SimHandle, inst: &str, key: Option<&str>, body: &str) -> (u16, Value) {
    let mut r = reqwest::Client::new()
        .post(format!("{}/v1/instances/{inst}/messages", sim.base_url()))
        .bearer_auth("app-key")
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(k) = key {
        r = r.header("Idempotency-Key", k);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn get(sim: &SimHandle, path: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .get(format!("{}{path}", sim.base_url()))
        .bearer_auth("app-key")
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

/// Polls until `f` holds (generous limit for a loaded machine).
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

async fn until_estado(sim: &SimHandle, id: &str, estado: &str) -> Value {
    let start = Instant::now();
    loop {
        let (s, c) = get(sim, &format!("/v1/commands/{id}")).await;
        assert_eq!(s, 200);
        if c["estado"] == estado {
            return c;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "command {id} never reached {estado}: {c}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const BODY: &str = r#"{"destino":{"telefono":"+51987654321"},"texto":"Tu pedido 1042 está confirmado."}"#;

#[tokio::test]
async fn same_key_same_content_returns_the_same_command_and_sends_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sent.jsonl");
    let sim = start(Some(log.clone())).await;
    let (s1, c1) = post(&sim, INST, Some("pedido-1042-confirmacion"), BODY).await;
    assert_eq!(s1, 202, "{c1}");
    assert_eq!(c1["estado"], "en_cola");
    assert_eq!(c1["idempotency_key"], "pedido-1042-confirmacion");
    assert_eq!(c1["instance_id"], INST);
    assert!(c1["created_at"].is_string());
    let id = c1["command_id"].as_str().unwrap().to_string();
    let sent = until_estado(&sim, &id, "leido").await;
    // The retry brings back the same command with its current state.
    let (s2, c2) = post(&sim, INST, Some("pedido-1042-confirmacion"), BODY).await;
    assert_eq!(s2, 202);
    assert_eq!(c2["command_id"], c1["command_id"]);
    assert_eq!(c2["estado"], "leido");
    assert_eq!(c2["provider_message_id"], sent["provider_message_id"]);
    // Exactly one line in the ground truth.
    let lines: Vec<SentLine> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].key, "pedido-1042-confirmacion");
    assert_eq!(lines[0].recipient, "+51987654321");
    assert_eq!(lines[0].text, "Tu pedido 1042 está confirmado.");
    assert_eq!(lines[0].command_id, id);
    assert_eq!(sim.stats().sent, 1);
    assert_eq!(sim.stats().repeated, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn key_rules_422_409_trim_and_scope() {
    let sim = start(None).await;
    // No key, empty key, 201 characters: 422, nothing stored.
    assert_eq!(post(&sim, INST, None, BODY).await.0, 422);
    assert_eq!(post(&sim, INST, Some("   "), BODY).await.0, 422);
    let (s, e) = post(&sim, INST, Some(&"k".repeat(201)), BODY).await;
    assert_eq!(s, 422);
    assert!(e["detail"].as_str().unwrap().contains("201"), "{e}");
    assert_eq!(post(&sim, INST, Some(&"k".repeat(200)), BODY).await.0, 202);
    // Trimmed: " k1 " and "k1" are the same key.
    let (_, a) = post(&sim, INST, Some("  k1  "), BODY).await;
    let (_, b) = post(&sim, INST, Some("k1"), BODY).await;
    assert_eq!(a["command_id"], b["command_id"]);
    assert_eq!(b["idempotency_key"], "k1");
    // Other content with the same key: 409, with detail.
    let other = r#"{"destino":{"telefono":"+51987654321"},"texto":"Otro texto"}"#;
    let (s, e) = post(&sim, INST, Some("k1"), other).await;
    assert_eq!(s, 409);
    assert!(e["detail"].as_str().unwrap().contains("otro contenido"), "{e}");
    // Same key in another instance is another command.
    let (s, c) = post(&sim, "otra-instancia", Some("k1"), BODY).await;
    assert_eq!(s, 202);
    assert_ne!(c["command_id"], a["command_id"]);
    // Missing bearer: 401.
    let r = reqwest::Client::new()
        .post(format!("{}/v1/instances/{INST}/messages", sim.base_url()))
        .header("Idempotency-Key", "k9")
        .body(BODY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // Bad bodies name the field.
    let (s, e) = post(&sim, INST, Some("k2"), r#"{"texto":"x"}"#).await;
    assert_eq!(s, 422);
    assert!(e["detail"].as_str().unwrap().contains("destino.telefono"), "{e}");
    let (s, _) = post(&sim, INST, Some("k3"), "{not json").await;
    assert_eq!(s, 422);
    sim.shutdown().await;
}

#[tokio::test]
async fn spelling_of_the_body_does_not_change_the_fingerprint() {
    let sim = start(None).await;
    let a = r#"{"destino":{"telefono":"+51987654321"},"texto":"Hola","expires_at":"2099-10-24T18:00:00Z","correlation_id":"c-1"}"#;
    let b = "{\n  \"correlation_id\" : \"c-1\",\n  \"expires_at\": \"2099-10-24T15:00:00-03:00\",\n  \"texto\": \"Hola\",\n  \"destino\": { \"telefono\": \"+51987654321\" }\n}";
    let (s1, c1) = post(&sim, INST, Some("fp"), a).await;
    let (s2, c2) = post(&sim, INST, Some("fp"), b).await;
    assert_eq!((s1, s2), (202, 202), "{c2}");
    assert_eq!(c1["command_id"], c2["command_id"]);
    // expires_at and correlation_id are content: changing them is a 409.
    let c = a.replace("18:00:00Z", "18:00:01Z");
    assert_eq!(post(&sim, INST, Some("fp"), &c).await.0, 409);
    let d = a.replace("c-1", "c-2");
    assert_eq!(post(&sim, INST, Some("fp"), &d).await.0, 409);
    sim.shutdown().await;
}

#[tokio::test]
async fn expired_commands_fail_with_comando_vencido_and_send_nothing() {
    let sim = start(None).await;
    let body = r#"{"destino":{"telefono":"+51987654321"},"texto":"Código 1234","expires_at":"2020-01-01T00:00:00Z"}"#;
    let (s, c) = post(&sim, INST, Some("otp-1"), body).await;
    assert_eq!(s, 202);
    let c = until_estado(&sim, c["command_id"].as_str().unwrap(), "fallido").await;
    assert_eq!(c["detail"], "comando_vencido");
    assert_eq!(sim.stats().sent, 0);
    // A repeat returns the failed command, not a new one.
    let (s, again) = post(&sim, INST, Some("otp-1"), body).await;
    assert_eq!(s, 202);
    assert_eq!(again["estado"], "fallido");
    sim.shutdown().await;
}

#[tokio::test]
async fn relink_fails_queued_commands_with_generacion_cambiada() {
    // Slow sending so the command is still queued when the instance re-links.
    let sim = sim::spawn(SimOptions {
        timing: sim::SimTiming {
            send_ms: 60_000,
            ..Default::default()
        },
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let (_, c) = post(&sim, INST, Some("k-relink"), BODY).await;
    assert_eq!(c["estado"], "en_cola");
    assert_eq!(c["generation"], 1);
    let r: Value = reqwest::Client::new()
        .post(format!("{}/sim/instances/{INST}/relink", sim.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["generation"], 2);
    assert_eq!(r["failed"][0], c["command_id"]);
    // The retry with the same key and content returns the original command, failed.
    let (s, again) = post(&sim, INST, Some("k-relink"), BODY).await;
    assert_eq!(s, 202);
    assert_eq!(again["command_id"], c["command_id"]);
    assert_eq!(again["estado"], "fallido");
    assert_eq!(again["detail"], "generacion_cambiada");
    // generacion_esperada that does not match: 409 and nothing stored.
    let g1 = r#"{"destino":{"telefono":"+51987654321"},"texto":"Hola","generacion_esperada":1}"#;
    let (s, e) = post(&sim, INST, Some("k-gen"), g1).await;
    assert_eq!(s, 409);
    assert_eq!(e["error"], "generacion_cambiada");
    assert!(sim.command_by_key(INST, "k-gen").is_none());
    let g2 = g1.replace(":1}", ":2}");
    assert_eq!(post(&sim, INST, Some("k-gen"), &g2).await.0, 202);
    assert_eq!(sim.stats().sent, 0);
    sim.shutdown().await;
}

#[tokio::test]
async fn cancel_withdraws_a_queued_command_and_repeats_return_it() {
    let sim = sim::spawn(SimOptions {
        timing: sim::SimTiming {
            send_ms: 60_000,
            ..Default::default()
        },
        ..SimOptions::default()
    })
    .await
    .unwrap();
    let (_, c) = post(&sim, INST, Some("k-cancel"), BODY).await;
    let id = c["command_id"].as_str().unwrap();
    let cancel = || async {
        let r = reqwest::Client::new()
            .post(format!("{}/v1/commands/{id}/cancel", sim.base_url()))
            .bearer_auth("app-key")
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    let (s, c1) = cancel().await;
    assert_eq!((s, c1["estado"].as_str()), (200, Some("cancelado")));
    let (s, c2) = cancel().await;
    assert_eq!((s, c2["estado"].as_str()), (200, Some("cancelado")));
    assert_eq!(get(&sim, "/v1/commands/nope").await.0, 404);
    // Another app cannot see it.
    let r = reqwest::Client::new()
        .get(format!("{}/v1/commands/{id}", sim.base_url()))
        .bearer_auth("other-app")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn too_late_to_cancel_returns_the_command_unchanged() {
    let sim = start(None).await;
    let (_, c) = post(&sim, INST, Some("k-late"), BODY).await;
    let id = c["command_id"].as_str().unwrap().to_string();
    until_estado(&sim, &id, "leido").await;
    let r = reqwest::Client::new()
        .post(format!("{}/v1/commands/{id}/cancel", sim.base_url()))
        .bearer_auth("app-key")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["estado"], "leido");
    until("one send", || sim.stats().sent == 1).await;
    sim.shutdown().await;
}

#[tokio::test]
async fn templates_are_accepted_and_logged() {
    let sim = start(None).await;
    let body = json!({"destino": {"telefono": "+51987654321"}, "plantilla": {"nombre": "cita_recordatorio", "idioma": "es_PE", "parametros": ["Ana", "09:30"]}});
    let (s, _) = post(&sim, INST, Some("tpl"), &body.to_string()).await;
    assert_eq!(s, 202);
    until("template sent", || sim.stats().sent == 1).await;
    assert_eq!(sim.sent()[0].text, "[cita_recordatorio] Ana | 09:30");
    sim.shutdown().await;
}

#[tokio::test]
async fn state_file_keeps_keys_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("sim-state.jsonl");
    let log = dir.path().join("sent.jsonl");
    let opts = SimOptions {
        state: Some(state.clone()),
        log: Some(log.clone()),
        ..SimOptions::default()
    };
    let sim = sim::spawn(opts.clone()).await.unwrap();
    let (_, c1) = post(&sim, INST, Some("persist"), BODY).await;
    until("sent", || sim.stats().sent == 1).await;
    sim.shutdown().await;
    let sim = sim::spawn(opts).await.unwrap();
    let (s, c2) = post(&sim, INST, Some("persist"), BODY).await;
    assert_eq!(s, 202);
    assert_eq!(c2["command_id"], c1["command_id"]);
    assert_ne!(c2["estado"], "en_cola");
    assert_eq!(
        post(
            &sim,
            INST,
            Some("persist"),
            r#"{"destino":{"telefono":"+51987654321"},"texto":"x"}"#
        )
        .await
        .0,
        409
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        std::fs::read_to_string(&log).unwrap().lines().count(),
        1,
        "no second send after restart"
    );
    sim.shutdown().await;
}
