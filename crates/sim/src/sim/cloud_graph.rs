//! The Graph API reads of the fake Cloud API (what `unavez doctor` and
//! `unavez templates` ask Meta): the phone number's profile
//! (`GET /{version}/{phone_number_id}`) and the WhatsApp Business
//! Account's templates (`GET /{version}/{waba_id}/message_templates`),
//! paginated with Graph's cursors (`paging.cursors.before/after`,
//! `paging.next`), in the shapes Meta documents.
//!
//! The templates are JSON objects as Meta returns them (`name`,
//! `language`, `status`, `category`, `id`, `parameter_format`,
//! `components`): [`default_templates`] mirrors the embedded templates file
//! (all APPROVED) and adds one REJECTED, one PAUSED and one with named
//! parameters; `unavez sim --cloud --cloud-templates FILE` serves a JSON
//! array of such objects instead.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::cloud_fake::{FakeState, authorized, graph_error};
use super::core::lock;
use unavez_core::templates::Templates;

/// Graph's default page size for edges; `?limit=` asks for another.
pub const DEFAULT_PAGE: usize = 25;

/// The phone number's profile the fake answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct PhoneProfile {
    pub display_phone_number: String,
    pub verified_name: String,
    /// `GREEN`, `YELLOW`, `RED` or `UNKNOWN`.
    pub quality_rating: String,
    /// `TIER_250`, `TIER_1K`, `TIER_10K`, `TIER_100K`, `TIER_UNLIMITED`.
    pub messaging_limit_tier: String,
}

impl Default for PhoneProfile {
    fn default() -> Self {
        PhoneProfile {
            display_phone_number: "+51 1 555 0100".into(),
            verified_name: "Clínica (fake)".into(),
            quality_rating: "GREEN".into(),
            messaging_limit_tier: "TIER_1K".into(),
        }
    }
}

/// One template as Meta returns it: a BODY component with `text` and an
/// example of its parameters (`body_text` positional, or
/// `body_text_named_params` with `parameter_format: NAMED`).
pub fn meta_template(id: u64, name: &str, language: &str, category: &str, status: &str, body: &str) -> Value {
    let named = named_params(body);
    let mut component = json!({"type": "BODY", "text": body});
    let mut t = json!({
        "name": name,
        "language": language,
        "status": status,
        "category": category,
        "id": id.to_string(),
    });
    if named.is_empty() {
        let count = positional_count(body);
        if count > 0 {
            let examples: Vec<String> = (1..=count).map(|i| format!("ejemplo {i}")).collect();
            component["example"] = json!({"body_text": [examples]});
        }
        t["parameter_format"] = json!("POSITIONAL");
    } else {
        let examples: Vec<Value> = named
            .iter()
            .map(|n| json!({"param_name": n, "example": format!("ejemplo {n}")}))
            .collect();
        component["example"] = json!({"body_text_named_params": examples});
        t["parameter_format"] = json!("NAMED");
    }
    t["components"] = json!([component]);
    t
}

/// The highest `{{n}}` in a body (Meta numbers them 1..n).
fn positional_count(body: &str) -> usize {
    placeholders(body)
        .filter_map(|p| p.parse::<usize>().ok())
        .max()
        .unwrap_or(0)
}

/// The `{{name}}` placeholders, in order of first appearance.
fn named_params(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in placeholders(body) {
        if p.parse::<usize>().is_err() && !out.iter().any(|o| o == p) {
            out.push(p.to_string());
        }
    }
    out
}

fn placeholders(body: &str) -> impl Iterator<Item = &str> {
    body.split("{{")
        .skip(1)
        .filter_map(|s| s.split_once("}}").map(|(p, _)| p.trim()))
}

/// The fake's templates by default: the embedded templates file as Meta
/// approved it (UTILITY, APPROVED, the same bodies), then one REJECTED
/// (a marketing text), one PAUSED (low quality) and one APPROVED with
/// named parameters.
pub fn default_templates() -> Vec<Value> {
    let embedded = Templates::embedded();
    let mut out: Vec<Value> = embedded
        .all()
        .iter()
        .enumerate()
        .map(|(i, t)| meta_template(1000 + i as u64, &t.name, &t.language, "UTILITY", "APPROVED", &t.body))
        .collect();
    let mut rejected = meta_template(
        2001,
        "promo_descuento",
        "es_PE",
        "MARKETING",
        "REJECTED",
        "Hola {{1}}, este mes tienes 20% de descuento en {{2}}.",
    );
    rejected["rejected_reason"] = json!("PROMOTIONAL");
    out.push(rejected);
    out.push(meta_template(
        2002,
        "encuesta_satisfaccion",
        "es_PE",
        "UTILITY",
        "PAUSED",
        "Hola {{1}}, ¿cómo fue tu atención de {{2}}? Responde del 1 al 5.",
    ));
    out.push(meta_template(
        2003,
        "cita_confirmada",
        "es_PE",
        "UTILITY",
        "APPROVED",
        "Hola {{nombre}}, confirmamos tu cita de {{servicio}} el {{fecha}}.",
    ));
    out
}

/// `GET /{version}/{phone_number_id}`: the number's profile, which needs
/// the token and sends nothing. Without `fields`, Graph's default set;
/// with it, the fields asked for (and `id`).
pub(super) async fn phone_number(
    State(st): State<Arc<FakeState>>,
    Path((_version, phone)): Path<(String, String)>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&st, &headers) {
        return graph_error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token");
    }
    let p = lock(&st.profile).clone();
    let all = json!({
        "id": phone,
        "display_phone_number": p.display_phone_number,
        "verified_name": p.verified_name,
        "quality_rating": p.quality_rating,
        "code_verification_status": "VERIFIED",
        "messaging_limit_tier": p.messaging_limit_tier,
        "platform_type": "CLOUD_API",
        "throughput": {"level": "STANDARD"},
    });
    let wanted: Vec<&str> = match q.get("fields") {
        Some(f) => f.split(',').map(str::trim).collect(),
        None => vec![
            "verified_name",
            "code_verification_status",
            "display_phone_number",
            "quality_rating",
        ],
    };
    let mut out = serde_json::Map::new();
    for f in wanted {
        if let Some(v) = all.get(f) {
            out.insert(f.to_string(), v.clone());
        }
    }
    out.insert("id".into(), all["id"].clone());
    Json(Value::Object(out)).into_response()
}

/// The opaque cursor of the template at `index` (Graph's cursors are
/// base64 text; any opaque text serves).
fn cursor(index: usize) -> String {
    hex::encode(format!("tpl:{index}"))
}

fn from_cursor(c: &str) -> Option<usize> {
    let raw = hex::decode(c).ok()?;
    String::from_utf8(raw).ok()?.strip_prefix("tpl:")?.parse().ok()
}

/// `GET /{version}/{waba_id}/message_templates[?limit=&after=&before=]`:
/// one page of templates, with `paging.cursors` and, when more follow,
/// `paging.next` (a full URL, as Graph gives it).
pub(super) async fn message_templates(
    State(st): State<Arc<FakeState>>,
    Path((version, waba)): Path<(String, String)>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&st, &headers) {
        return graph_error(StatusCode::UNAUTHORIZED, 190, "Invalid OAuth access token");
    }
    let all = lock(&st.templates).clone();
    let limit = match q.get("limit") {
        Some(l) => match l.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => return graph_error(StatusCode::BAD_REQUEST, 100, "Invalid parameter: limit"),
        },
        None => st.page_size,
    };
    let start = match (q.get("after"), q.get("before")) {
        (Some(a), _) => match from_cursor(a) {
            Some(i) => i + 1,
            None => return graph_error(StatusCode::BAD_REQUEST, 100, "Invalid parameter: after"),
        },
        (None, Some(b)) => match from_cursor(b) {
            Some(i) => i.saturating_sub(limit),
            None => return graph_error(StatusCode::BAD_REQUEST, 100, "Invalid parameter: before"),
        },
        (None, None) => 0,
    };
    let end = (start + limit).min(all.len());
    let page: Vec<Value> = all.get(start..end).map(<[Value]>::to_vec).unwrap_or_default();
    if page.is_empty() {
        return Json(json!({"data": []})).into_response();
    }
    let mut paging = json!({"cursors": {"before": cursor(start), "after": cursor(end - 1)}});
    if end < all.len() {
        let host = headers
            .get(axum::http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        paging["next"] = json!(format!(
            "http://{host}/{version}/{waba}/message_templates?limit={limit}&after={}",
            cursor(end - 1)
        ));
    }
    if start > 0 {
        let host = headers
            .get(axum::http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        paging["previous"] = json!(format!(
            "http://{host}/{version}/{waba}/message_templates?limit={limit}&before={}",
            cursor(start)
        ));
    }
    Json(json!({"data": page, "paging": paging})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_carry_meta_s_parameter_shapes() {
        let t = meta_template(1, "a", "es_PE", "UTILITY", "APPROVED", "Hola {{1}}, {{2}}");
        assert_eq!(t["parameter_format"], "POSITIONAL");
        assert_eq!(
            t["components"][0]["example"]["body_text"][0].as_array().unwrap().len(),
            2
        );
        let n = meta_template(
            2,
            "b",
            "es_PE",
            "UTILITY",
            "APPROVED",
            "Hola {{nombre}} {{ fecha }} {{nombre}}",
        );
        assert_eq!(n["parameter_format"], "NAMED");
        let names: Vec<&str> = n["components"][0]["example"]["body_text_named_params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["param_name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["nombre", "fecha"]);
    }

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        assert_eq!(from_cursor(&cursor(17)), Some(17));
        assert_eq!(from_cursor("zz"), None);
        assert_eq!(from_cursor(&hex::encode("other:1")), None);
    }

    #[test]
    fn the_default_set_has_a_rejected_a_paused_and_a_named_template() {
        let all = default_templates();
        let status = |name: &str| {
            all.iter()
                .find(|t| t["name"] == name)
                .map(|t| t["status"].as_str().unwrap().to_string())
        };
        assert_eq!(status("promo_descuento").as_deref(), Some("REJECTED"));
        assert_eq!(status("encuesta_satisfaccion").as_deref(), Some("PAUSED"));
        assert_eq!(status("cita_reserva").as_deref(), Some("APPROVED"));
        assert!(all.iter().any(|t| t["parameter_format"] == "NAMED"));
    }
}
