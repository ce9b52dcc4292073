//! The Graph API reads of the Cloud API account (issue 26): the phone
//! number's profile and the WhatsApp Business Account's message templates,
//! for `unavez doctor` and `unavez templates`. Nothing here sends.
//!
//! Pagination follows `paging.cursors.after` while Graph gives a
//! `paging.next`, on our own base URL: the `next` URL itself is never
//! requested, so the token only ever goes to the configured host.

use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use super::ChannelError;
use super::cloud::{KIND, TOKEN, channel_fault};
use super::config::CloudConfig;
use super::http::{Http, path_segment, tls_failure};
use unavez_core::template_check::{MetaStatus, MetaTemplate, Params};

/// Pages followed at most (of [`PAGE`] templates): Meta allows a few
/// hundred templates per account; a `next` that never ends is a fault.
const MAX_PAGES: usize = 100;
/// Templates asked per page.
const PAGE: usize = 100;

/// What went wrong asking Graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// 401/403 or Graph error 190: the token is expired, revoked or not
    /// the account's.
    #[error("token rejected (HTTP {http_status}{}): {message}", code.map(|c| format!(", Graph error {c}")).unwrap_or_default())]
    TokenRejected {
        http_status: u16,
        code: Option<i64>,
        message: String,
    },
    /// Any other Graph error (a wrong id: 100; a permission missing: 200…).
    #[error("HTTP {http_status}{}: {message}", code.map(|c| format!(", Graph error {c}")).unwrap_or_default())]
    Refused {
        http_status: u16,
        code: Option<i64>,
        message: String,
    },
    /// No answer: connection refused, timeout, TLS.
    #[error("{0}")]
    Unreachable(String),
    /// An answer that is not Graph's shape.
    #[error("unexpected answer: {0}")]
    BadAnswer(String),
}

/// `GET /{phone_number_id}`'s fields that say whether the number can send.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PhoneInfo {
    #[serde(default)]
    pub display_phone_number: String,
    #[serde(default)]
    pub verified_name: String,
    /// `GREEN`, `YELLOW`, `RED`, `UNKNOWN` (or absent).
    #[serde(default)]
    pub quality_rating: Option<String>,
    /// `TIER_250` … `TIER_UNLIMITED` (absent on some accounts).
    #[serde(default)]
    pub messaging_limit_tier: Option<String>,
}

/// Client of the Graph reads for one configured account.
#[derive(Debug, Clone)]
pub struct GraphClient {
    http: Http,
    /// `{base}/{version}`.
    root: String,
    phone: String,
}

impl GraphClient {
    pub fn with_token(cfg: &CloudConfig, token: impl Into<String>) -> Result<GraphClient, ChannelError> {
        let connect_ms = cfg.timeout_ms.min(5_000);
        let http = Http::new(
            KIND,
            &cfg.base_url,
            (cfg.timeout_ms, connect_ms),
            token.into(),
            (&cfg.token_env, TOKEN),
        )?;
        let phone = path_segment(KIND, "phone_number_id", &cfg.phone_number_id, "")?;
        let root = format!("{}/{}", http.base_url, cfg.api_version.trim().trim_matches('/'));
        Ok(GraphClient { http, root, phone })
    }

    /// The phone number's display number, name, quality rating and
    /// messaging limit tier.
    pub async fn phone_info(&self) -> Result<PhoneInfo, GraphError> {
        let url = format!(
            "{}/{}?fields=display_phone_number,verified_name,quality_rating,messaging_limit_tier",
            self.root, self.phone
        );
        let v = self.get(&url).await?;
        serde_json::from_value(v).map_err(|e| GraphError::BadAnswer(e.to_string()))
    }

    /// Every template of the account `waba_id` (a path segment: not blank,
    /// no `/`), page after page.
    pub async fn templates(&self, waba_id: &str) -> Result<Vec<MetaTemplate>, GraphError> {
        let waba = waba_id.trim();
        if waba.is_empty() || waba.contains('/') {
            return Err(GraphError::BadAnswer(format!(
                "channel.cloud.waba_id {waba_id:?} is empty or contains '/'"
            )));
        }
        let base = format!("{}/{waba}/message_templates?limit={PAGE}", self.root);
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let url = match &after {
                Some(a) => format!("{base}&after={a}"),
                None => base.clone(),
            };
            let page = self.get(&url).await?;
            let data = page
                .get("data")
                .and_then(Value::as_array)
                .ok_or_else(|| GraphError::BadAnswer("no `data` array".into()))?;
            for t in data {
                out.push(meta_template(t)?);
            }
            let next = page.pointer("/paging/next").and_then(Value::as_str).is_some();
            let cursor = page.pointer("/paging/cursors/after").and_then(Value::as_str);
            match (next, cursor) {
                (true, Some(c)) if !data.is_empty() => after = Some(c.to_string()),
                (true, _) => return Err(GraphError::BadAnswer("`paging.next` without a cursor".into())),
                (false, _) => return Ok(out),
            }
        }
        Err(GraphError::BadAnswer(format!(
            "more than {MAX_PAGES} pages of templates"
        )))
    }

    async fn get(&self, url: &str) -> Result<Value, GraphError> {
        let resp = self.http.get(url.to_string()).send().await.map_err(|e| {
            GraphError::Unreachable(match tls_failure(&e) {
                Some(t) => format!("TLS handshake failed: {t}"),
                None => e.to_string(),
            })
        })?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| GraphError::Unreachable(e.to_string()))?;
        classify(status, &body)
    }
}

/// A complete Graph answer: the JSON of a 2xx, or the error it says.
pub fn classify(status: StatusCode, body: &[u8]) -> Result<Value, GraphError> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if status.is_success() {
        return json.ok_or_else(|| GraphError::BadAnswer(format!("HTTP {} without JSON", status.as_u16())));
    }
    let err = json.as_ref().and_then(|v| v.get("error"));
    let code = err.and_then(|e| e.get("code")).and_then(Value::as_i64);
    let message = err
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect());
    let http_status = status.as_u16();
    if channel_fault(status, code).is_some() {
        return Err(GraphError::TokenRejected {
            http_status,
            code,
            message,
        });
    }
    Err(GraphError::Refused {
        http_status,
        code,
        message,
    })
}

/// One element of `data` in Meta's shape; the parameters come from the
/// BODY component's text.
pub fn meta_template(t: &Value) -> Result<MetaTemplate, GraphError> {
    let text = |k: &str| t.get(k).and_then(Value::as_str).map(str::to_string);
    let name = text("name").ok_or_else(|| GraphError::BadAnswer("a template without `name`".into()))?;
    let body = t
        .get("components")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter().find(|c| {
                c.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.eq_ignore_ascii_case("BODY"))
            })
        })
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(MetaTemplate {
        id: text("id").unwrap_or_default(),
        language: text("language").unwrap_or_default(),
        status: MetaStatus::parse(&text("status").unwrap_or_default()),
        category: text("category").unwrap_or_default(),
        params: body
            .as_deref()
            .map(Params::of)
            .unwrap_or(Params::Positional(Vec::new())),
        body,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn graph_errors_say_whether_the_token_was_refused() {
        let e = classify(
            StatusCode::UNAUTHORIZED,
            br#"{"error":{"message":"Error validating access token","type":"OAuthException","code":190}}"#,
        )
        .unwrap_err();
        assert!(matches!(e, GraphError::TokenRejected { code: Some(190), .. }), "{e:?}");
        assert!(
            e.to_string().starts_with("token rejected (HTTP 401, Graph error 190)"),
            "{e}"
        );
        let e = classify(StatusCode::BAD_REQUEST, br#"{"error":{"message":"bad id","code":100}}"#).unwrap_err();
        assert!(matches!(e, GraphError::Refused { code: Some(100), .. }));
        assert!(matches!(
            classify(StatusCode::OK, b"<html>"),
            Err(GraphError::BadAnswer(_))
        ));
    }

    #[test]
    fn a_template_reads_its_body_parameters() {
        let t = meta_template(&json!({
            "name": "cita", "language": "es_PE", "status": "PAUSED", "category": "UTILITY", "id": "9",
            "parameter_format": "NAMED",
            "components": [
                {"type": "HEADER", "format": "TEXT", "text": "Aviso {{1}}"},
                {"type": "BODY", "text": "Hola {{nombre}}",
                 "example": {"body_text_named_params": [{"param_name": "nombre", "example": "Ana"}]}}
            ]
        }))
        .unwrap();
        assert_eq!(t.status, MetaStatus::Paused);
        assert_eq!(t.params, Params::Named(vec!["nombre".into()]));
        assert_eq!(t.body.as_deref(), Some("Hola {{nombre}}"));
        assert!(meta_template(&json!({"language": "es"})).is_err());
    }
}
