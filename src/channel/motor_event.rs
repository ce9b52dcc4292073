//! The engine's webhook events and their signature: shared by the
//! simulator (which sends them) and the webhook server (which receives
//! them), so both ends agree by construction.
//!
//! Wire format: `POST` with a JSON body [`MotorEvent`] and the header
//! `X-Unavez-Signature: sha256=<hex>` = HMAC-SHA256 of the raw body with the
//! shared secret (env var named by `server.motor_webhook_secret_env`).
//! Receivers verify the raw bytes *before* parsing, in constant time.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

pub const SIGNATURE_HEADER: &str = "X-Unavez-Signature";

/// Engine command states (engine contract spelling).
pub mod estado {
    pub const EN_COLA: &str = "en_cola";
    pub const ENVIADO: &str = "enviado";
    pub const ENTREGADO: &str = "entregado";
    pub const LEIDO: &str = "leido";
    pub const FALLIDO: &str = "fallido";
    pub const CANCELADO: &str = "cancelado";
    pub const AMBIGUO: &str = "ambiguo";
}

/// One engine event: a command changed state, or an ambiguous command was
/// resolved (`resolves_ambiguous = true`, `estado` is the resolution).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MotorEvent {
    /// Unique per event; receivers deduplicate on it.
    pub event_id: String,
    /// `comando.estado` for every state change.
    #[serde(rename = "type")]
    pub kind: String,
    pub instance_id: String,
    pub command_id: String,
    pub idempotency_key: String,
    pub estado: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_message_id: Option<String>,
    /// Failure reason (`comando_vencido`, `generacion_cambiada`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default)]
    pub resolves_ambiguous: bool,
    /// RFC 3339.
    pub occurred_at: String,
}

/// `sha256=<hex>` for a body.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail here.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("hmac accepts any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Constant-time check of a `sha256=<hex>` header value.
pub fn verify(secret: &[u8], body: &[u8], header: &str) -> bool {
    let Some(hex_sig) = header.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else { return false };
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_tampering_fails() {
        let body = br#"{"event_id":"e1"}"#;
        let sig = sign(b"secreto", body);
        assert!(verify(b"secreto", body, &sig));
        assert!(!verify(b"otro", body, &sig));
        assert!(!verify(b"secreto", br#"{"event_id":"e2"}"#, &sig));
        assert!(!verify(b"secreto", body, "sha256=zz"));
        assert!(!verify(b"secreto", body, "md5=00"));
    }
}
