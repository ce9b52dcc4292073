//! `unavez doctor [--json]` (issue 26 §1): every check the service needs,
//! each with a fix, in the configured language. Exit 0 when no check
//! warns or fails, 3 when one does, 1 only when doctor itself cannot run.
//! The checks are `app::doctor`'s; the webhooks' is here because it asks
//! the server's own handlers, in-process (nothing is written: the requests
//! are ones the handlers refuse before the ledger).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;

use super::Cli;
use crate::config::{Config, Language};
use crate::doctor::{Check, CheckId, Finding, Inputs, SkipReason, Status};
use crate::templates::Templates;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// One JSON array on stdout: `{id, status, message, fix}` per check.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct JsonCheck<'a> {
    id: &'a str,
    status: &'a str,
    message: String,
    fix: String,
}

fn load(cli: &Cli) -> Result<(Config, Templates), String> {
    let config = match &cli.config {
        Some(p) => Config::load(p).map_err(|e| e.to_string())?,
        None => Config::default(),
    };
    let templates = config.load_templates().map_err(|e| e.to_string())?;
    Ok((config, templates))
}

/// The report as checks, for the CLI and the console.
pub fn report(
    cli_config: Option<PathBuf>,
    db: Option<PathBuf>,
    loaded: Result<(Config, Templates), String>,
) -> anyhow::Result<Vec<Check>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let for_webhooks = loaded.as_ref().ok().cloned();
    let resolved_db = db.clone();
    let mut checks = rt.block_on(crate::doctor::run(Inputs {
        config: loaded,
        config_path: cli_config,
        db,
    }));
    if let Some((cfg, templates)) = for_webhooks {
        let ledger_ok = checks
            .iter()
            .filter(|c| matches!(c.id, CheckId::Ledger | CheckId::Schema))
            .all(|c| c.status == Status::Ok);
        let db = resolved_db.unwrap_or_else(|| cfg.database.clone());
        let w = rt.block_on(webhooks(&cfg, templates, &db, ledger_ok));
        let at = checks
            .iter()
            .position(|c| c.id == CheckId::Listen)
            .unwrap_or(checks.len());
        checks.insert(at, w);
    }
    Ok(checks)
}

pub fn run(cli: &Cli, args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let loaded = load(cli);
    let language = loaded.as_ref().map(|(c, _)| c.language).unwrap_or(Language::Es);
    let checks = report(cli.config.clone(), cli.db.clone(), loaded)?;
    let s = crate::i18n::strings(language);
    let (words, tw) = (s.doctor, s.templates);
    if args.json {
        let out: Vec<JsonCheck> = checks
            .iter()
            .map(|c| {
                let (message, fix) = words.say(c, tw);
                JsonCheck {
                    id: c.id.as_str(),
                    status: c.status.as_str(),
                    message,
                    fix,
                }
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", words.title);
        for c in &checks {
            let (message, fix) = words.say(c, tw);
            let mark = match c.status {
                Status::Ok => "✓",
                Status::Skip => "·",
                Status::Warn => "!",
                Status::Fail => "✗",
            };
            println!("{mark} {:<12} {}", c.id.as_str(), crate::domain::text::inert(&message));
            if !fix.is_empty() && matches!(c.status, Status::Warn | Status::Fail) {
                println!("  {:<12} → {}", "", crate::domain::text::inert(&fix));
            }
        }
        let healthy = crate::doctor::healthy(&checks);
        println!("{}", if healthy { words.all_ok } else { words.some_bad });
    }
    Ok(if crate::doctor::healthy(&checks) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

/// The webhook the configured channel calls, asked of the server's own
/// router as `serve` would answer it: the Cloud API's verification
/// challenge, or the engine's signature over a sample body.
async fn webhooks(cfg: &Config, templates: Templates, db: &Path, ledger_ok: bool) -> Check {
    use crate::channel::config::ChannelKind;
    let id = CheckId::Webhooks;
    match cfg.channel.kind {
        ChannelKind::Motor => {
            let var = &cfg.server.motor_webhook_secret_env;
            let Some(secret) = std::env::var(var).ok().filter(|s| !s.trim().is_empty()) else {
                return Check::skip(id, SkipReason::MissingSecret(var.clone()));
            };
            if !ledger_ok {
                return Check::skip(id, SkipReason::NoLedger);
            }
            match motor_signature(cfg, templates, db, &secret).await {
                Ok(()) => Check::new(id, Status::Ok, Finding::MotorWebhookOk),
                Err(detail) => Check::new(id, Status::Fail, Finding::WebhookFailed { detail }),
            }
        }
        ChannelKind::Cloud => {
            let var = &cfg.server.cloud_verify_token_env;
            let Some(token) = std::env::var(var).ok().filter(|s| !s.trim().is_empty()) else {
                return Check::skip(id, SkipReason::MissingSecret(var.clone()));
            };
            if !ledger_ok {
                return Check::skip(id, SkipReason::NoLedger);
            }
            match cloud_challenge(cfg, templates, db, &token).await {
                Ok(()) => Check::new(
                    id,
                    Status::Ok,
                    Finding::CloudWebhookOk {
                        public_url: cfg.server.public_url.clone(),
                    },
                ),
                Err(detail) => Check::new(id, Status::Fail, Finding::WebhookFailed { detail }),
            }
        }
    }
}

/// The server's router on the ledger, with the secrets `serve` would read.
fn router_on(cfg: &Config, templates: Templates, db: &Path) -> Result<axum::Router, String> {
    let ledger = crate::ledger::Ledger::attach_or_open(db).map_err(|e| e.to_string())?;
    let secrets = crate::server::Secrets::from_env(&cfg.server);
    let state = crate::server::AppState::on_ledger(cfg.clone(), templates, ledger, secrets);
    Ok(crate::server::router(state))
}

/// One request through `router`: its status and (the start of) its body.
async fn ask(router: &mut axum::Router, req: axum::http::Request<axum::body::Body>) -> Result<(u16, String), String> {
    use tower_service::Service as _;
    let resp = router.call(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), 4096)
        .await
        .map_err(|e| e.to_string())?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// `POST /webhooks/motor` through the server's router: a body signed with
/// the configured secret passes the signature check and is then refused
/// as no event (400, so nothing is written), and the same body signed
/// with another secret is refused as unsigned (401).
async fn motor_signature(cfg: &Config, templates: Templates, db: &Path, secret: &str) -> Result<(), String> {
    use crate::channel::motor_event::{SIGNATURE_HEADER, sign};
    let mut router = router_on(cfg, templates, db)?;
    let body: &[u8] = br#"{"doctor": "a signature check, not an event"}"#;
    let post = |signature: String| {
        axum::http::Request::post("/webhooks/motor")
            .header(SIGNATURE_HEADER, signature)
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(body))
            .map_err(|e| e.to_string())
    };
    match ask(&mut router, post(sign(secret.as_bytes(), body))?).await? {
        (400, _) => {}
        (status, text) => return Err(format!("a body signed with the secret got HTTP {status}: {text}")),
    }
    let forged = format!("{secret}-forged");
    match ask(&mut router, post(sign(forged.as_bytes(), body))?).await? {
        (401, _) => Ok(()),
        (status, text) => Err(format!("a body signed with another secret got HTTP {status}: {text}")),
    }
}

/// `GET /webhooks/whatsapp?hub.mode=subscribe&…` through the server's
/// router, as Meta sends it when the webhook is configured.
async fn cloud_challenge(cfg: &Config, templates: Templates, db: &Path, token: &str) -> Result<(), String> {
    let mut router = router_on(cfg, templates, db)?;
    let challenge = format!("doctor-{}", std::process::id());
    let uri = format!(
        "/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token={}&hub.challenge={challenge}",
        url_encode(token)
    );
    let req = axum::http::Request::get(uri)
        .body(axum::body::Body::empty())
        .map_err(|e| e.to_string())?;
    match ask(&mut router, req).await? {
        (200, body) if body == challenge => Ok(()),
        (status, body) => Err(format!("HTTP {status}: {body}")),
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
