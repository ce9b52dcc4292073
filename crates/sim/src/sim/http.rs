//! HTTP routes of the simulator: the WhatsApp engine API (`/v1/…`) and a
//! few loopback admin routes (`/sim/…`) for tests, benchmarks and the demo.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::PauseMode;
use super::core::{Core, lock};
use super::faults::FaultSpec;
use super::messages::{Reply, app_id, handle_message};

/// Lets a handler close its own connection without answering (a reset or
/// a lost response), which a normal handler cannot express.
#[derive(Clone)]
pub struct ConnKill(pub Arc<Notify>);

pub fn router(core: Arc<Core>) -> Router {
    Router::new()
        .route("/v1/instances/{id}", get(get_instance))
        .route("/v1/instances/{id}/messages", post(post_message))
        .route("/v1/commands/{id}", get(get_command))
        .route("/v1/commands/{id}/cancel", post(cancel_command))
        .route("/sim/instances/{id}/relink", post(relink))
        .route("/sim/instances/{id}/disconnect", post(disconnect))
        .route("/sim/instances/{id}/connect", post(connect))
        .route("/sim/api-key", post(rotate_api_key))
        .route("/sim/stats", get(stats))
        .route("/sim/commands", get(list_commands))
        .route("/sim/sent", get(sent))
        .route("/sim/pause", post(pause))
        .route("/sim/resume", post(resume))
        .route("/sim/faults", get(get_faults).post(set_faults))
        .with_state(core)
}

fn error(status: StatusCode, code: &str, detail: impl Into<String>) -> Response {
    (status, Json(json!({"error": code, "detail": detail.into()}))).into_response()
}

/// The app a bearer key belongs to. Only an opaque hash is kept, so the
/// key itself never lands in the journal or in responses.
// The error is the ready-made 401 response; handlers return it as is.
#[allow(clippy::result_large_err)]
fn auth(core: &Core, headers: &HeaderMap) -> Result<String, Response> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let Some(bearer) = bearer else {
        return Err(error(
            StatusCode::UNAUTHORIZED,
            "no_autorizado",
            "falta Authorization: Bearer <api key>",
        ));
    };
    if let Some(expected) = core.api_key()
        && expected != bearer
    {
        return Err(error(StatusCode::UNAUTHORIZED, "no_autorizado", "api key desconocida"));
    }
    Ok(app_id(bearer))
}

fn unavailable(core: &Core) -> Option<Response> {
    (*core.mode.borrow() == PauseMode::Unavailable).then(|| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "motor_no_disponible",
            "el motor está en pausa",
        )
    })
}

/// Closes the connection with no response at all.
async fn drop_connection(kill: Option<Extension<ConnKill>>) -> Response {
    match kill {
        Some(Extension(k)) => {
            k.0.notify_one();
            std::future::pending::<Response>().await
        }
        // Served outside our accept loop: the closest honest answer.
        None => error(StatusCode::SERVICE_UNAVAILABLE, "conexion_cortada", "simulated reset"),
    }
}

async fn post_message(
    State(core): State<Arc<Core>>,
    Path(instance_id): Path<String>,
    headers: HeaderMap,
    kill: Option<Extension<ConnKill>>,
    body: Bytes,
) -> Response {
    if let Some(r) = unavailable(&core) {
        return r;
    }
    let app = match auth(&core, &headers) {
        Ok(a) => a,
        Err(r) => return r,
    };
    // Keys may carry UTF-8 (the engine contract counts characters, not bytes).
    let raw_key = match headers
        .get("idempotency-key")
        .map(|v| std::str::from_utf8(v.as_bytes()))
    {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(_)) => {
            core.bump(|s| s.rejected += 1);
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "clave_invalida",
                "Idempotency-Key: no es UTF-8 válido",
            );
        }
    };
    let key = raw_key.unwrap_or_default();
    match handle_message(&core, &app, &instance_id, key, &body).await {
        Reply::Json {
            status,
            body,
            retry_after,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut r = (status, Json(body)).into_response();
            if let Some(secs) = retry_after {
                r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            r
        }
        Reply::Reset => drop_connection(kill).await,
        Reply::Lost { hold_ms } => {
            // Processed and stored; the answer is held past any sane client
            // timeout and then the connection drops without it.
            tokio::time::sleep(Duration::from_millis(hold_ms)).await;
            drop_connection(kill).await
        }
    }
}

async fn get_command(State(core): State<Arc<Core>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if let Some(r) = unavailable(&core) {
        return r;
    }
    let app = match auth(&core, &headers) {
        Ok(a) => a,
        Err(r) => return r,
    };
    match lock(&core.engine).commands.get(&id).filter(|c| c.app == app) {
        Some(c) => (StatusCode::OK, Json(c.to_json())).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "comando_desconocido",
            format!("no hay comando {id} en esta app"),
        ),
    }
}

async fn cancel_command(State(core): State<Arc<Core>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if let Some(r) = unavailable(&core) {
        return r;
    }
    let app = match auth(&core, &headers) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let mut engine = lock(&core.engine);
    match engine.cancel(&app, &id, Utc::now()) {
        Some((c, changed)) => {
            if changed {
                core.changed(&c, false);
            }
            (StatusCode::OK, Json(c.to_json())).into_response()
        }
        None => error(
            StatusCode::NOT_FOUND,
            "comando_desconocido",
            format!("no hay comando {id} en esta app"),
        ),
    }
}

/// `GET /v1/instances/{id}`: whether the instance exists and has a phone
/// linked. Sends nothing: unavez probes a paused channel with it.
async fn get_instance(State(core): State<Arc<Core>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if let Some(r) = unavailable(&core) {
        return r;
    }
    if let Err(r) = auth(&core, &headers) {
        return r;
    }
    if !core.knows_instance(&id) {
        return error(
            StatusCode::NOT_FOUND,
            "instancia_desconocida",
            format!("no hay instancia {id} en este motor"),
        );
    }
    let estado = if core.is_disconnected(&id) {
        "desconectada"
    } else {
        "conectada"
    };
    let generation = lock(&core.engine).generation(&id);
    Json(json!({"instance_id": id, "estado": estado, "generation": generation})).into_response()
}

async fn disconnect(State(core): State<Arc<Core>>, Path(id): Path<String>) -> Response {
    lock(&core.disconnected).insert(id.clone());
    Json(json!({"instance_id": id, "estado": "desconectada"})).into_response()
}

async fn connect(State(core): State<Arc<Core>>, Path(id): Path<String>) -> Response {
    lock(&core.disconnected).remove(&id);
    Json(json!({"instance_id": id, "estado": "conectada"})).into_response()
}

#[derive(Deserialize)]
struct ApiKeyBody {
    /// The only key accepted from now on; `null`: any non-empty one.
    api_key: Option<String>,
}

/// Rotates the accepted bearer key, as an engine operator would: from now
/// on only the new one works. The key is never echoed back.
async fn rotate_api_key(State(core): State<Arc<Core>>, body: Bytes) -> Response {
    match serde_json::from_slice::<ApiKeyBody>(&body) {
        Ok(b) => {
            let key = b.api_key.filter(|k| !k.trim().is_empty());
            let any = key.is_none();
            core.set_api_key(key);
            Json(json!({"rotated": true, "any_key": any})).into_response()
        }
        Err(e) => error(StatusCode::UNPROCESSABLE_ENTITY, "cuerpo_invalido", e.to_string()),
    }
}

async fn relink(State(core): State<Arc<Core>>, Path(id): Path<String>) -> Response {
    let mut engine = lock(&core.engine);
    let (generation, failed) = engine.relink(&id, Utc::now());
    core.generation_changed(&id, generation);
    for c in &failed {
        core.changed(c, false);
    }
    let ids: Vec<&str> = failed.iter().map(|c| c.command_id.as_str()).collect();
    Json(json!({"instance_id": id, "generation": generation, "failed": ids})).into_response()
}

async fn stats(State(core): State<Arc<Core>>) -> Response {
    Json(core.stats_json()).into_response()
}

#[derive(Deserialize)]
struct CommandsQuery {
    instance_id: Option<String>,
    key: Option<String>,
}

/// Every command (optionally one instance or key), app included, for tests.
async fn list_commands(State(core): State<Arc<Core>>, Query(q): Query<CommandsQuery>) -> Response {
    let engine = lock(&core.engine);
    let mut out: Vec<Value> = engine
        .commands
        .values()
        .filter(|c| q.instance_id.as_ref().is_none_or(|i| &c.instance_id == i))
        .filter(|c| q.key.as_ref().is_none_or(|k| &c.idempotency_key == k))
        .map(|c| c.to_json())
        .collect();
    out.sort_by(|a, b| a["command_id"].as_str().cmp(&b["command_id"].as_str()));
    Json(out).into_response()
}

async fn sent(State(core): State<Arc<Core>>) -> Response {
    Json(core.sent()).into_response()
}

#[derive(Deserialize, Default)]
struct PauseBody {
    /// `refuse` (connections refused) or `unavailable` (503 to everything).
    mode: Option<String>,
    /// Resume by itself after this long.
    for_ms: Option<u64>,
}

async fn pause(State(core): State<Arc<Core>>, body: Bytes) -> Response {
    let b: PauseBody = if body.is_empty() {
        PauseBody::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(b) => b,
            Err(e) => return error(StatusCode::UNPROCESSABLE_ENTITY, "cuerpo_invalido", e.to_string()),
        }
    };
    let mode = match b.mode.as_deref() {
        None | Some("refuse") => PauseMode::Refuse,
        Some("unavailable") => PauseMode::Unavailable,
        Some(other) => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "modo_invalido",
                format!("mode {other:?}: expected refuse or unavailable"),
            );
        }
    };
    super::pause_core(&core, mode, b.for_ms.map(Duration::from_millis));
    Json(json!({"mode": mode})).into_response()
}

async fn resume(State(core): State<Arc<Core>>) -> Response {
    core.mode.send_replace(PauseMode::Up);
    Json(json!({"mode": PauseMode::Up})).into_response()
}

async fn get_faults(State(core): State<Arc<Core>>) -> Response {
    core.faults().to_string().into_response()
}

async fn set_faults(State(core): State<Arc<Core>>, body: String) -> Response {
    match FaultSpec::parse(&body) {
        Ok(f) => {
            core.set_faults(f);
            core.faults().to_string().into_response()
        }
        Err(e) => error(StatusCode::UNPROCESSABLE_ENTITY, "faults_invalidos", e.to_string()),
    }
}
