//! Reading and authenticating request bodies: size limit, HMAC signatures
//! over the raw bytes (checked before any parsing), bearer tokens. Every
//! refusal is counted by source and reason for `/metrics`.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};

use super::{ApiError, AppState};
use crate::channel::motor_event;
use crate::domain::counter::{Rejection, Source};

/// Reads the whole body, refusing more than `[server] body_limit_bytes`
/// with 413 (counted as `too_large`).
pub async fn read_body(state: &AppState, source: Source, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let limit = state.config().server.body_limit_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body over the {limit}-byte limit"),
        )
    };
    if declared.is_some_and(|n| n > limit as u64) {
        state.count_rejection(source, Rejection::TooLarge).await;
        return Err(too_large());
    }
    match axum::body::to_bytes(body, limit).await {
        Ok(b) => Ok(b),
        Err(e) => {
            // `to_bytes` reports the limit as an error whose text says so;
            // anything else is a broken upload.
            if e.to_string().contains("length limit") {
                state.count_rejection(source, Rejection::TooLarge).await;
                Err(too_large())
            } else {
                state.count_rejection(source, Rejection::Unreadable).await;
                Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("cannot read request body: {e}"),
                ))
            }
        }
    }
}

/// Checks a `sha256=<hex>` HMAC header over the raw body, in constant
/// time. 401 (counted as `signature`) when missing or wrong; 503 when the
/// secret is not configured (nothing can be verified, so nothing is taken).
pub async fn check_signature(
    state: &AppState,
    source: Source,
    secret: Option<&str>,
    headers: &HeaderMap,
    header_name: &str,
    body: &[u8],
) -> Result<(), ApiError> {
    let Some(secret) = secret else {
        state.count_rejection(source, Rejection::NotConfigured).await;
        return Err(state.not_configured(
            source.as_str(),
            format!("{source} webhook secret is not configured (see [server] in the config)"),
        ));
    };
    let Some(given) = headers.get(header_name).and_then(|v| v.to_str().ok()) else {
        state.count_rejection(source, Rejection::Signature).await;
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("missing {header_name} header"),
        ));
    };
    // The engine module's verifier is the generic `sha256=<hex>` HMAC check.
    if !motor_event::verify(secret.as_bytes(), body, given) {
        state.count_rejection(source, Rejection::Signature).await;
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("{header_name} does not match the body"),
        ));
    }
    Ok(())
}

/// `Authorization: Bearer <token>`, compared in constant time.
pub async fn check_bearer(
    state: &AppState,
    source: Source,
    expected: Option<&str>,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let Some(expected) = expected else {
        state.count_rejection(source, Rejection::NotConfigured).await;
        return Err(state.not_configured(
            source.as_str(),
            "ingest token is not configured (see server.ingest_token_env)".into(),
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(t) if constant_time_eq(t.as_bytes(), expected.as_bytes()) => Ok(()),
        _ => {
            state.count_rejection(source, Rejection::Token).await;
            Err(ApiError::new(StatusCode::UNAUTHORIZED, "missing or wrong bearer token"))
        }
    }
}

/// Equality whose time does not depend on where the inputs differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // `subtle` compares equal lengths without branching on the bytes; a
    // length difference only reveals the length, which is public anyway
    // (HMAC-SHA256 hex, or the configured secret's length).
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn constant_time_eq_works() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
