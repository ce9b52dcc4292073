//! The engine's webhook events and their signature: shared by the
//! simulator (which sends them) and the webhook server (which receives
//! them), so both ends agree by construction.
//!
//! Wire format: `POST` with a JSON body [`MotorEvent`] and the header
//! `X-Unavez-Signature: sha256=<hex>` = HMAC-SHA256 of the raw body with the
//! shared secret (env var named by `server.motor_webhook_secret_env`).
//! Receivers verify the raw bytes *before* parsing, in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const SIGNATURE_HEADER: &str = "X-Unavez-Signature";

// The event and the state words are data the domain reads (status.rs);
// they live there so the domain depends on no channel, and stay reachable
// here under their wire-facing names.
pub use crate::domain::status::{MotorEvent, estado};

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
