//! The simulated engine's memory: commands, keys, instance generations.
//!
//! Pure bookkeeping with no I/O and no clock of its own (callers pass
//! `now`), so the engine contract rules are unit-tested here directly; the HTTP
//! layer ([`super::http`]) and the timers ([`super::core`]) drive it.

use std::collections::HashMap;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::channel::motor_event::estado;
use crate::domain::fingerprint::{fingerprint_of_canonical, push_canonical_str, write_canonical};

/// Longest accepted `Idempotency-Key`, after trimming (engine contract).
pub const MAX_KEY_CHARS: usize = 200;

/// One engine command, as stored and as returned over HTTP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    pub command_id: String,
    /// Opaque app identity derived from the bearer key (never the key).
    pub app: String,
    pub instance_id: String,
    pub idempotency_key: String,
    pub fingerprint: String,
    pub estado: String,
    pub provider_message_id: Option<String>,
    pub detail: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The instance generation the command was accepted under.
    pub generation: i64,
    pub recipient: String,
    /// What the customer sees: the text, or the template and parameters.
    pub text: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub correlation_id: Option<String>,
}

impl Command {
    /// The HTTP shape of a command (engine contract field names).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "command_id": self.command_id,
            "idempotency_key": self.idempotency_key,
            "estado": self.estado,
            "instance_id": self.instance_id,
            "generation": self.generation,
            "created_at": self.created_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            "updated_at": self.updated_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        });
        if let Some(m) = &self.provider_message_id {
            v["provider_message_id"] = json!(m);
        }
        if let Some(d) = &self.detail {
            v["detail"] = json!(d);
        }
        if let Some(c) = &self.correlation_id {
            v["correlation_id"] = json!(c);
        }
        v
    }

    pub fn is_final(&self) -> bool {
        matches!(
            self.estado.as_str(),
            estado::LEIDO | estado::FALLIDO | estado::CANCELADO
        )
    }
}

/// A validated `POST /v1/instances/{id}/messages` body.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRequest {
    pub recipient: String,
    pub text: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub correlation_id: Option<String>,
    pub expected_generation: Option<i64>,
    /// Fingerprint of type + instance + canonical body.
    pub fingerprint: String,
}

/// A body the engine refuses with 422, naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct BodyError {
    pub field: String,
    pub reason: String,
}

fn body_err(field: &str, reason: &str) -> BodyError {
    BodyError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Checks the key per the engine contract: 1–200 characters after trimming.
pub fn validate_key(raw: Option<&str>) -> Result<String, BodyError> {
    let k = raw.map(str::trim).unwrap_or("");
    if k.is_empty() {
        return Err(body_err(
            "Idempotency-Key",
            "obligatoria en POST …/messages (1 a 200 caracteres)",
        ));
    }
    let n = k.chars().count();
    if n > MAX_KEY_CHARS {
        return Err(body_err(
            "Idempotency-Key",
            &format!("tiene {n} caracteres; el máximo es {MAX_KEY_CHARS}"),
        ));
    }
    Ok(k.to_string())
}

/// Validates a message body and computes its content fingerprint.
///
/// The fingerprint covers the command type, the instance and the whole
/// body (so destination, text, template, `expires_at`, `correlation_id`
/// and `generacion_esperada` all count), in canonical form: JSON
/// whitespace, field order and time-zone spelling do not. The instance's
/// *current* generation is deliberately left out: the engine contract says a retry
/// after re-linking returns the original command, not a 409.
pub fn parse_message(instance_id: &str, body: &Value) -> Result<MessageRequest, BodyError> {
    let obj = body
        .as_object()
        .ok_or_else(|| body_err("body", "se esperaba un objeto JSON"))?;
    let recipient = obj
        .get("destino")
        .and_then(|d| d.get("telefono"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| body_err("destino.telefono", "obligatorio"))?;
    let digits = recipient.strip_prefix('+').unwrap_or(recipient);
    if digits.len() < 6 || digits.len() > 16 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(body_err(
            "destino.telefono",
            "se esperaba un número E.164 como +51987654321",
        ));
    }
    let texto = match obj.get("texto") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(body_err("texto", "se esperaba texto")),
    };
    let plantilla = match obj.get("plantilla") {
        None | Some(Value::Null) => None,
        Some(p) => {
            let nombre = p
                .get("nombre")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| body_err("plantilla.nombre", "obligatorio"))?;
            let params: Vec<String> = match p.get("parametros") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|x| match x {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect(),
                Some(_) => return Err(body_err("plantilla.parametros", "se esperaba una lista")),
            };
            Some(format!("[{}] {}", nombre, params.join(" | ")))
        }
    };
    let text = match (texto, plantilla) {
        (Some(t), _) if !t.trim().is_empty() => t,
        (_, Some(p)) => p,
        _ => return Err(body_err("texto", "se necesita texto o plantilla")),
    };
    let expires_at = match obj.get("expires_at") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            DateTime::parse_from_rfc3339(s.trim())
                .map_err(|e| body_err("expires_at", &format!("fecha RFC 3339 inválida: {e}")))?
                .with_timezone(&Utc),
        ),
        Some(_) => return Err(body_err("expires_at", "se esperaba una fecha RFC 3339")),
    };
    let correlation_id = match obj.get("correlation_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(body_err("correlation_id", "se esperaba texto")),
    };
    let expected_generation = match obj.get("generacion_esperada") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_i64()
                .ok_or_else(|| body_err("generacion_esperada", "se esperaba un entero"))?,
        ),
    };
    let fp = message_fingerprint(instance_id, body);
    Ok(MessageRequest {
        recipient: recipient.to_string(),
        text,
        expires_at,
        correlation_id,
        expected_generation,
        fingerprint: fp,
    })
}

/// The fingerprint of `{"tipo": "mensaje", "instance_id": …, "body": …}`,
/// its canonical text written in key order without copying the body into
/// a new value (one per request the engine takes).
fn message_fingerprint(instance_id: &str, body: &Value) -> String {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"body\":");
    write_canonical(body, &mut out);
    out.extend_from_slice(b",\"instance_id\":");
    push_canonical_str(instance_id, &mut out);
    out.extend_from_slice(b",\"tipo\":");
    push_canonical_str("mensaje", &mut out);
    out.push(b'}');
    fingerprint_of_canonical(&out)
}

/// What a submission came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Submit {
    /// A new command; the key is now taken.
    Created(Command),
    /// The key was already used with the same content: the original command
    /// with its current state.
    Existing(Command),
    /// The key was used with other content (409).
    KeyConflict { existing: Command },
    /// `generacion_esperada` does not match (409); nothing stored.
    GenerationMismatch { expected: i64, current: i64 },
}

/// Scope of a key: app + instance (engine contract).
pub type Scope = (String, String, String);

/// All commands and keys the engine has ever seen. Keys never expire.
#[derive(Debug, Default)]
pub struct Engine {
    pub commands: HashMap<String, Command>,
    by_key: HashMap<Scope, String>,
    generations: HashMap<String, i64>,
    /// Request count per key scope, for seeded fault decisions.
    attempts: HashMap<Scope, u64>,
}

impl Engine {
    pub fn generation(&self, instance_id: &str) -> i64 {
        self.generations.get(instance_id).copied().unwrap_or(1)
    }

    /// Counts one more request for a key scope; returns its attempt number (1-based).
    pub fn next_attempt(&mut self, scope: &Scope) -> u64 {
        let n = self.attempts.entry(scope.clone()).or_insert(0);
        *n += 1;
        *n
    }

    pub fn by_key(&self, scope: &Scope) -> Option<&Command> {
        self.by_key.get(scope).and_then(|id| self.commands.get(id))
    }

    /// Resolves the key first (engine contract: "La clave se resuelve primero"),
    /// then checks conditions, then stores a new `en_cola` command.
    pub fn submit(&mut self, scope: &Scope, req: &MessageRequest, command_id: String, now: DateTime<Utc>) -> Submit {
        if let Some(existing) = self.by_key(scope) {
            return if existing.fingerprint == req.fingerprint {
                Submit::Existing(existing.clone())
            } else {
                Submit::KeyConflict {
                    existing: existing.clone(),
                }
            };
        }
        let (app, instance_id, key) = scope.clone();
        let current = self.generation(&instance_id);
        if let Some(expected) = req.expected_generation
            && expected != current
        {
            return Submit::GenerationMismatch { expected, current };
        }
        let cmd = Command {
            command_id: command_id.clone(),
            app,
            instance_id,
            idempotency_key: key,
            fingerprint: req.fingerprint.clone(),
            estado: estado::EN_COLA.into(),
            provider_message_id: None,
            detail: None,
            created_at: now,
            updated_at: now,
            generation: current,
            recipient: req.recipient.clone(),
            text: req.text.clone(),
            expires_at: req.expires_at,
            correlation_id: req.correlation_id.clone(),
        };
        self.insert(cmd.clone());
        Submit::Created(cmd)
    }

    /// Stores (or replaces) a command; used by submit and journal replay.
    pub fn insert(&mut self, cmd: Command) {
        self.by_key.insert(
            (cmd.app.clone(), cmd.instance_id.clone(), cmd.idempotency_key.clone()),
            cmd.command_id.clone(),
        );
        self.commands.insert(cmd.command_id.clone(), cmd);
    }

    pub fn set_generation(&mut self, instance_id: &str, generation: i64) {
        self.generations.insert(instance_id.to_string(), generation);
    }

    /// Re-links an instance: the generation goes up and every queued
    /// command of an older generation fails with `generacion_cambiada`
    /// (it must never go out through the new link). Returns the new
    /// generation and the commands that changed.
    pub fn relink(&mut self, instance_id: &str, now: DateTime<Utc>) -> (i64, Vec<Command>) {
        let g = self.generation(instance_id) + 1;
        self.set_generation(instance_id, g);
        let mut changed = Vec::new();
        for c in self.commands.values_mut() {
            if c.instance_id == instance_id && c.estado == estado::EN_COLA && c.generation < g {
                c.estado = estado::FALLIDO.into();
                c.detail = Some("generacion_cambiada".into());
                c.updated_at = now;
                changed.push(c.clone());
            }
        }
        changed.sort_by(|a, b| a.command_id.cmp(&b.command_id));
        (g, changed)
    }

    /// Withdraws a queued command; anything else is returned unchanged
    /// (engine contract: repeating a cancel returns the same cancelled command).
    /// `None` if unknown to this app.
    pub fn cancel(&mut self, app: &str, command_id: &str, now: DateTime<Utc>) -> Option<(Command, bool)> {
        let c = self.commands.get_mut(command_id).filter(|c| c.app == app)?;
        if c.estado == estado::EN_COLA {
            c.estado = estado::CANCELADO.into();
            c.updated_at = now;
            return Some((c.clone(), true));
        }
        Some((c.clone(), false))
    }

    /// Moves a command from `from` to `to` if it is still in `from`.
    pub fn transition(
        &mut self,
        command_id: &str,
        from: &str,
        to: &str,
        now: DateTime<Utc>,
        edit: impl FnOnce(&mut Command),
    ) -> Option<Command> {
        let c = self.commands.get_mut(command_id)?;
        if c.estado != from {
            return None;
        }
        c.estado = to.into();
        c.updated_at = now;
        edit(c);
        Some(c.clone())
    }

    pub fn generations(&self) -> impl Iterator<Item = (&String, &i64)> {
        self.generations.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(inst: &str, key: &str) -> Scope {
        ("app1".into(), inst.into(), key.into())
    }

    fn req(inst: &str, body: Value) -> MessageRequest {
        parse_message(inst, &body).unwrap()
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-10-24T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn keys_are_trimmed_and_bounded() {
        assert_eq!(validate_key(Some("  k-1 ")).unwrap(), "k-1");
        assert!(validate_key(None).is_err());
        assert!(validate_key(Some("   ")).is_err());
        assert!(validate_key(Some(&"a".repeat(200))).is_ok());
        assert!(validate_key(Some(&format!("  {}  ", "a".repeat(200)))).is_ok());
        assert!(validate_key(Some(&"a".repeat(201))).is_err());
        // Characters, not bytes.
        assert!(validate_key(Some(&"ñ".repeat(200))).is_ok());
    }

    #[test]
    fn bodies_are_validated_with_field_names() {
        let e = parse_message("i", &json!({"texto": "x"})).unwrap_err();
        assert_eq!(e.field, "destino.telefono");
        let e = parse_message("i", &json!({"destino": {"telefono": "+51987654321"}})).unwrap_err();
        assert_eq!(e.field, "texto");
        let e = parse_message("i", &json!({"destino": {"telefono": "abc"}, "texto": "x"})).unwrap_err();
        assert_eq!(e.field, "destino.telefono");
        let e = parse_message(
            "i",
            &json!({"destino": {"telefono": "+51987654321"}, "texto": "x", "expires_at": "mañana"}),
        )
        .unwrap_err();
        assert_eq!(e.field, "expires_at");
        let ok = parse_message(
            "i",
            &json!({"destino": {"telefono": "+51987654321"}, "plantilla": {"nombre": "cita", "idioma": "es", "parametros": ["Ana", "9:30"]}}),
        )
        .unwrap();
        assert_eq!(ok.text, "[cita] Ana | 9:30");
    }

    #[test]
    fn the_message_fingerprint_is_the_fingerprint_of_its_value() {
        let body = json!({"destino": {"telefono": "+51987654321"}, "texto": "  Hola   Ana ",
            "expires_at": "2026-10-24T15:00:00-03:00", "correlation_id": "uv-1"});
        assert_eq!(
            message_fingerprint("clinica \"1\"", &body),
            crate::domain::fingerprint::fingerprint(
                &json!({"tipo": "mensaje", "instance_id": "clinica \"1\"", "body": body})
            )
        );
    }

    #[test]
    fn fingerprint_ignores_spelling_but_not_content() {
        let a: Value = serde_json::from_str(
            r#"{"destino":{"telefono":"+51987654321"},"texto":"Hola","expires_at":"2026-10-24T18:00:00Z"}"#,
        )
        .unwrap();
        let b: Value = serde_json::from_str(
            "{ \"expires_at\" : \"2026-10-24T15:00:00-03:00\",\n \"texto\":\"Hola\", \"destino\" : {\"telefono\":\"+51987654321\"} }",
        )
        .unwrap();
        assert_eq!(req("i", a.clone()).fingerprint, req("i", b).fingerprint);
        assert_ne!(
            req("i", a.clone()).fingerprint,
            req("j", a.clone()).fingerprint,
            "instance"
        );
        for change in [
            json!({"texto": "Hola!"}),
            json!({"destino": {"telefono": "+51987654322"}}),
            json!({"expires_at": "2026-10-24T18:00:01Z"}),
            json!({"correlation_id": "c"}),
            json!({"generacion_esperada": 1}),
        ] {
            let mut c = a.clone();
            for (k, v) in change.as_object().unwrap() {
                c[k] = v.clone();
            }
            assert_ne!(req("i", a.clone()).fingerprint, req("i", c).fingerprint, "{change}");
        }
    }

    #[test]
    fn the_seed_003_table() {
        let mut e = Engine::default();
        let body = json!({"destino": {"telefono": "+51987654321"}, "texto": "Hola"});
        let r = req("i1", body.clone());
        let Submit::Created(c) = e.submit(&scope("i1", "k"), &r, "c1".into(), now()) else {
            panic!()
        };
        assert_eq!(c.estado, "en_cola");
        // Same key, same content → the same command, current state.
        e.transition("c1", "en_cola", "enviado", now(), |c| {
            c.provider_message_id = Some("w1".into())
        })
        .unwrap();
        let Submit::Existing(again) = e.submit(&scope("i1", "k"), &r, "c2".into(), now()) else {
            panic!()
        };
        assert_eq!(again.command_id, "c1");
        assert_eq!(again.estado, "enviado");
        assert_eq!(again.provider_message_id.as_deref(), Some("w1"));
        // Same key, other content → conflict.
        let other = req("i1", json!({"destino": {"telefono": "+51987654321"}, "texto": "Chau"}));
        assert!(matches!(
            e.submit(&scope("i1", "k"), &other, "c3".into(), now()),
            Submit::KeyConflict { .. }
        ));
        // Same key in another instance → another command.
        let r2 = req("i2", body.clone());
        assert!(matches!(
            e.submit(&scope("i2", "k"), &r2, "c4".into(), now()),
            Submit::Created(_)
        ));
        // Another app, same instance and key → another command.
        let s3: Scope = ("app2".into(), "i1".into(), "k".into());
        assert!(matches!(e.submit(&s3, &r, "c5".into(), now()), Submit::Created(_)));
    }

    #[test]
    fn relink_fails_queued_commands_and_retries_still_return_them() {
        let mut e = Engine::default();
        let r = req("i1", json!({"destino": {"telefono": "+51987654321"}, "texto": "Hola"}));
        e.submit(&scope("i1", "k"), &r, "c1".into(), now());
        let (g, changed) = e.relink("i1", now());
        assert_eq!(g, 2);
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].detail.as_deref(), Some("generacion_cambiada"));
        let Submit::Existing(c) = e.submit(&scope("i1", "k"), &r, "c9".into(), now()) else {
            panic!()
        };
        assert_eq!((c.command_id.as_str(), c.estado.as_str()), ("c1", "fallido"));
        // generacion_esperada mismatch on a new key: 409, nothing stored.
        let g1 = req(
            "i1",
            json!({"destino": {"telefono": "+51987654321"}, "texto": "Hola", "generacion_esperada": 1}),
        );
        assert_eq!(
            e.submit(&scope("i1", "k2"), &g1, "c10".into(), now()),
            Submit::GenerationMismatch {
                expected: 1,
                current: 2
            }
        );
        assert!(e.by_key(&scope("i1", "k2")).is_none());
    }

    #[test]
    fn cancel_only_withdraws_queued_commands() {
        let mut e = Engine::default();
        let r = req("i1", json!({"destino": {"telefono": "+51987654321"}, "texto": "Hola"}));
        e.submit(&scope("i1", "k"), &r, "c1".into(), now());
        assert!(e.cancel("app2", "c1", now()).is_none(), "other app");
        let (c, changed) = e.cancel("app1", "c1", now()).unwrap();
        assert!(changed);
        assert_eq!(c.estado, "cancelado");
        let (c, changed) = e.cancel("app1", "c1", now()).unwrap();
        assert!(!changed);
        assert_eq!(c.estado, "cancelado");
        assert!(e.transition("c1", "en_cola", "enviado", now(), |_| {}).is_none());
    }
}
