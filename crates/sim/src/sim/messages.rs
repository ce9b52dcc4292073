//! `POST /v1/instances/{id}/messages` without the transport: the engine contract
//! rules plus the seeded faults, producing a [`Reply`]. The HTTP route and
//! the in-process channel ([`super::inproc`]) both go through here, so they
//! cannot drift apart.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::core::{Core, lock};
use super::engine::{MessageRequest, Scope, Submit, parse_message, validate_key};

/// What the engine does with one message request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Answer with this status and JSON body (and `Retry-After`, in seconds).
    Json {
        status: u16,
        body: Value,
        retry_after: Option<u64>,
    },
    /// Close the connection without answering; nothing was processed.
    Reset,
    /// Processed (stored; it will go out), but the answer is lost after
    /// holding the connection `hold_ms`.
    Lost { hold_ms: u64 },
}

fn json_error(status: u16, code: &str, detail: impl Into<String>) -> Reply {
    Reply::Json {
        status,
        body: json!({"error": code, "detail": detail.into()}),
        retry_after: None,
    }
}

/// The opaque app identity of a bearer key (a hash: the key itself is
/// never stored).
pub fn app_id(bearer: &str) -> String {
    format!("app_{}", &hex::encode(Sha256::digest(bearer.as_bytes()))[..12])
}

/// Handles one message request for an authenticated `app`. `raw_key` is
/// the `Idempotency-Key` header as sent (empty when missing).
pub async fn handle_message(core: &Arc<Core>, app: &str, instance_id: &str, raw_key: &str, body: &[u8]) -> Reply {
    core.bump(|s| s.requests += 1);
    let key = match validate_key(Some(raw_key)) {
        Ok(k) => k,
        Err(e) => {
            core.bump(|s| s.rejected += 1);
            return json_error(422, "clave_invalida", e.to_string());
        }
    };
    let scope: Scope = (app.to_string(), instance_id.to_string(), key);
    if let Some(refused) = instance_refusal(core, &scope) {
        return refused;
    }
    // Fault decisions depend on the key's attempt number, not on timing.
    let attempt = lock(&core.engine).next_attempt(&scope).to_string();
    let faults = core.faults();
    let roll = |fault: &'static str| {
        [
            fault,
            scope.0.as_str(),
            scope.1.as_str(),
            scope.2.as_str(),
            attempt.as_str(),
        ]
    };

    let latency = core.dice.pick(&faults.latency_ms, &roll("latency"));
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    if core.dice.chance(faults.reset, &roll("reset")) {
        core.bump(|s| s.faults.reset += 1);
        return Reply::Reset;
    }
    if core.dice.chance(faults.error5xx, &roll("error5xx")) {
        core.bump(|s| s.faults.error5xx += 1);
        return json_error(503, "motor_no_disponible", "simulated 5xx before processing");
    }
    let req = match parse_body(core, &scope.1, body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    if core.dice.chance(faults.rate429, &roll("rate429")) {
        core.bump(|s| s.faults.rate429 += 1);
        return rate_limited(core, &scope);
    }
    let reply = match submit(core, &scope, &req) {
        Ok(reply) => reply,
        Err(conflict) => return conflict,
    };
    if core.dice.chance(faults.timeout_after, &roll("timeout_after")) {
        core.bump(|s| s.faults.timeout_after += 1);
        return Reply::Lost {
            hold_ms: faults.hold_ms,
        };
    }
    reply
}

/// An instance the engine does not have (404 `instancia_desconocida`), or
/// one with no phone linked (503 `instancia_desconectada`). The key is
/// resolved first: a key already taken comes back with its command even
/// while its instance is disconnected.
fn instance_refusal(core: &Core, scope: &Scope) -> Option<Reply> {
    if !core.knows_instance(&scope.1) {
        core.bump(|s| s.rejected += 1);
        return Some(json_error(
            404,
            "instancia_desconocida",
            format!("no hay instancia {} en este motor", scope.1),
        ));
    }
    if core.is_disconnected(&scope.1) && lock(&core.engine).by_key(scope).is_none() {
        core.bump(|s| s.rejected += 1);
        return Some(json_error(
            503,
            "instancia_desconectada",
            format!("la instancia {} no tiene un teléfono vinculado", scope.1),
        ));
    }
    None
}

/// The request body as the engine reads it; a 422 when it cannot.
fn parse_body(core: &Core, instance_id: &str, body: &[u8]) -> Result<MessageRequest, Reply> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        core.bump(|s| s.rejected += 1);
        json_error(422, "cuerpo_invalido", format!("JSON inválido: {e}"))
    })?;
    parse_message(instance_id, &value).map_err(|e| {
        core.bump(|s| s.rejected += 1);
        json_error(422, "cuerpo_invalido", e.to_string())
    })
}

/// A simulated 429. The key is resolved first: a known key comes back with
/// its command.
fn rate_limited(core: &Core, scope: &Scope) -> Reply {
    let stored = lock(&core.engine).by_key(scope).map(|c| c.to_json());
    let body = stored.unwrap_or_else(
        || json!({"error": "ritmo_excedido", "detail": "demasiados pedidos; repite con la misma clave"}),
    );
    Reply::Json {
        status: 429,
        body,
        retry_after: Some(1),
    }
}

/// Takes the message or finds the command its key already has: `Ok` with
/// the 202 (whose answer a fault may still lose), `Err` with a 409.
fn submit(core: &Arc<Core>, scope: &Scope, req: &MessageRequest) -> Result<Reply, Reply> {
    let command_id = core.command_id(&scope.0, &scope.1, &scope.2);
    let outcome = {
        let mut engine = lock(&core.engine);
        let outcome = engine.submit(scope, req, command_id, Utc::now());
        if let Submit::Created(c) = &outcome {
            core.changed(c, false);
        }
        outcome
    };
    let accepted = |body| Reply::Json {
        status: 202,
        body,
        retry_after: None,
    };
    match outcome {
        Submit::Created(c) => {
            core.bump(|s| s.created += 1);
            core.resume_command(&c);
            Ok(accepted(c.to_json()))
        }
        Submit::Existing(c) => {
            core.bump(|s| s.repeated += 1);
            Ok(accepted(c.to_json()))
        }
        Submit::KeyConflict { existing } => {
            core.bump(|s| s.conflicts += 1);
            Err(json_error(
                409,
                "clave_en_uso",
                format!(
                    "la Idempotency-Key ya se usó en esta instancia con otro contenido (comando {})",
                    existing.command_id
                ),
            ))
        }
        Submit::GenerationMismatch { expected, current } => {
            core.bump(|s| s.conflicts += 1);
            Err(json_error(
                409,
                "generacion_cambiada",
                format!("generacion_esperada {expected}, la instancia está en la generación {current}"),
            ))
        }
    }
}
