//! `unavez doctor` (issue 26 §1): gathers the facts each check needs (the
//! configuration, the ledger's file and schema, free space, the channel's
//! answer, Meta's templates, the listen address, heartbeat rows) and lets
//! `domain::doctor` decide. A check that cannot run because another
//! failed is skipped with the reason. The webhook check needs the
//! server's own handlers, so the binary adds it (see `Report::insert`).

use std::path::{Path, PathBuf};

use chrono::Utc;

use crate::channel::config::ChannelKind;
use crate::channel::graph::{GraphClient, GraphError};
use crate::channel::{AsyncChannel, ProbeOutcome};
use crate::config::Config;
use crate::domain::fault::ChannelFault;
use crate::location::Location;
use crate::store::inspect;
use crate::templates::Templates;
use unavez_core::doctor;
pub use unavez_core::doctor::{Check, CheckId, Finding, SkipReason, Status, healthy};

/// What `doctor` is given: the configuration as loaded (or why it did
/// not load), and the ledger setting.
pub struct Inputs {
    pub config: Result<(Config, Templates), String>,
    pub config_path: Option<PathBuf>,
    pub db: Option<PathBuf>,
}

/// The secrets this configuration needs, by variable name: the channel's
/// and its webhook's.
pub fn required_secrets(cfg: &Config) -> Vec<String> {
    let mut vars = vec![crate::channel::secret_env(&cfg.channel).to_string()];
    match cfg.channel.kind {
        ChannelKind::Motor => vars.push(cfg.server.motor_webhook_secret_env.clone()),
        ChannelKind::Cloud => {
            vars.push(cfg.server.cloud_app_secret_env.clone());
            vars.push(cfg.server.cloud_verify_token_env.clone());
        }
    }
    vars
}

fn set(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.trim().is_empty())
}

/// Every check but the webhooks', in the report's order.
pub async fn run(inputs: Inputs) -> Vec<Check> {
    let (cfg, templates) = match inputs.config {
        Ok(c) => c,
        Err(detail) => {
            let mut out = vec![Check::new(
                CheckId::Config,
                Status::Fail,
                Finding::ConfigInvalid { detail },
            )];
            for id in [
                CheckId::Secrets,
                CheckId::Ledger,
                CheckId::Channel,
                CheckId::Templates,
                CheckId::Listen,
                CheckId::Dispatchers,
            ] {
                out.push(Check::skip(id, SkipReason::NoConfig));
            }
            return out;
        }
    };
    let mut out = vec![Check::new(
        CheckId::Config,
        Status::Ok,
        Finding::ConfigOk {
            path: inputs.config_path.map(|p| p.display().to_string()),
            timezone: cfg.timezone.clone(),
        },
    )];
    let missing: Vec<String> = required_secrets(&cfg).into_iter().filter(|v| !set(v)).collect();
    out.push(if missing.is_empty() {
        Check::new(
            CheckId::Secrets,
            Status::Ok,
            Finding::SecretsOk {
                vars: required_secrets(&cfg),
            },
        )
    } else {
        Check::new(
            CheckId::Secrets,
            Status::Fail,
            Finding::SecretsMissing { vars: missing },
        )
    });
    let db = inputs.db.unwrap_or_else(|| cfg.database.clone());
    // The ledger's clients are blocking (PostgreSQL's runs its own
    // runtime, which may not start inside this one).
    let (ledger_ok, ledger) = {
        let (cfg, db) = (cfg.clone(), db.clone());
        tokio::task::spawn_blocking(move || {
            let mut checks = Vec::new();
            (ledger_checks(&cfg, &db, &mut checks), checks)
        })
        .await
        .unwrap_or_else(|e| {
            let detail = e.to_string();
            (
                false,
                vec![fail(CheckId::Ledger, Finding::LedgerUnreachable { detail })],
            )
        })
    };
    out.extend(ledger);
    let channel_ok = channel_check(&cfg, &mut out).await;
    out.push(templates_check(&cfg, &templates, channel_ok).await);
    out.push(listen_check(&cfg).await);
    out.push(if ledger_ok {
        dispatchers_check(&cfg, &db).await
    } else {
        Check::skip(CheckId::Dispatchers, SkipReason::NoLedger)
    });
    out
}

/// The ledger's checks; whether it could be read.
fn ledger_checks(cfg: &Config, db: &Path, out: &mut Vec<Check>) -> bool {
    let location = match Location::parse(db) {
        Ok(l) => l,
        Err(e) => {
            out.push(Check::new(
                CheckId::Ledger,
                Status::Fail,
                Finding::LedgerUnreachable { detail: e.to_string() },
            ));
            return false;
        }
    };
    match location {
        Location::Sqlite(path) => sqlite_checks(cfg, &path, out),
        Location::Postgres(url) => match inspect::pg_facts(&url) {
            Ok(f) => {
                out.push(Check::new(
                    CheckId::Ledger,
                    Status::Ok,
                    Finding::LedgerOk {
                        location: url.to_string(),
                        wal: false,
                    },
                ));
                out.push(doctor::schema(f.version, f.known));
                out.push(Check::skip(CheckId::LedgerFile, SkipReason::NotSqlite));
                out.push(Check::skip(CheckId::Disk, SkipReason::NotSqlite));
                out.push(doctor::clock(f.server_ms - Utc::now().timestamp_millis()));
                f.version == f.known
            }
            Err(e) => {
                out.push(Check::new(
                    CheckId::Ledger,
                    Status::Fail,
                    Finding::LedgerUnreachable { detail: e.to_string() },
                ));
                out.push(Check::skip(CheckId::Schema, SkipReason::NoLedger));
                out.push(Check::skip(CheckId::Clock, SkipReason::NoLedger));
                false
            }
        },
    }
}

fn sqlite_checks(cfg: &Config, path: &Path, out: &mut Vec<Check>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display().to_string();
    let Ok(meta) = std::fs::metadata(path) else {
        out.push(Check::new(
            CheckId::Ledger,
            Status::Fail,
            Finding::LedgerMissing { path: shown },
        ));
        for id in [CheckId::Schema, CheckId::LedgerFile, CheckId::Disk] {
            out.push(Check::skip(id, SkipReason::NoLedger));
        }
        return false;
    };
    let facts = inspect::file_facts(path);
    let readable = match &facts {
        Err(e) => {
            out.push(Check::new(
                CheckId::Ledger,
                Status::Fail,
                Finding::LedgerUnreachable { detail: e.to_string() },
            ));
            out.push(Check::skip(CheckId::Schema, SkipReason::NoLedger));
            false
        }
        Ok(f) => {
            out.push(if f.quick_check != "ok" {
                Check::new(
                    CheckId::Ledger,
                    Status::Fail,
                    Finding::LedgerDamaged {
                        detail: f.quick_check.clone(),
                    },
                )
            } else if f.journal_mode != "wal" {
                Check::new(
                    CheckId::Ledger,
                    Status::Warn,
                    Finding::NotWal {
                        journal: f.journal_mode.clone(),
                    },
                )
            } else {
                Check::new(
                    CheckId::Ledger,
                    Status::Ok,
                    Finding::LedgerOk {
                        location: shown.clone(),
                        wal: true,
                    },
                )
            });
            let schema = doctor::schema(f.user_version, inspect::known_version());
            let current = schema.status == Status::Ok;
            out.push(schema);
            f.quick_check == "ok" && current
        }
    };
    out.push(doctor::file_mode(meta.permissions().mode()));
    out.push(free_space(path, cfg.doctor.min_free_mb));
    out.push(Check::skip(CheckId::Clock, SkipReason::NotPostgres));
    readable
}

fn free_space(path: &Path, min_mb: u64) -> Check {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match nix::sys::statvfs::statvfs(dir) {
        // `fsblkcnt_t` and `c_ulong` are u64 here, narrower elsewhere.
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
        Ok(s) => {
            let free = u64::from(s.blocks_available()).saturating_mul(s.fragment_size() as u64) / (1024 * 1024);
            doctor::disk(free, min_mb)
        }
        Err(e) => Check::new(
            CheckId::Disk,
            Status::Warn,
            Finding::LedgerUnreachable {
                detail: format!("statvfs {}: {e}", dir.display()),
            },
        ),
    }
}

/// The channel answers and takes us; whether it did.
async fn channel_check(cfg: &Config, out: &mut Vec<Check>) -> bool {
    let var = crate::channel::secret_env(&cfg.channel).to_string();
    let Some(secret) = std::env::var(&var).ok().filter(|s| !s.trim().is_empty()) else {
        out.push(Check::skip(CheckId::Channel, SkipReason::MissingSecret(var)));
        return false;
    };
    let check = match cfg.channel.kind {
        ChannelKind::Motor => motor_check(cfg, secret, &var).await,
        ChannelKind::Cloud => cloud_check(cfg, secret, &var).await,
    };
    let ok = check.status == Status::Ok;
    out.push(check);
    ok
}

fn fail(id: CheckId, finding: Finding) -> Check {
    Check::new(id, Status::Fail, finding)
}

async fn motor_check(cfg: &Config, key: String, var: &str) -> Check {
    let instance = cfg.channel.motor.instance_id.clone();
    let channel = match crate::channel::motor::MotorChannel::with_api_key(&cfg.channel.motor, key) {
        Ok(c) => c,
        Err(e) => return fail(CheckId::Channel, Finding::ChannelUnreachable { detail: e.to_string() }),
    };
    match channel.probe().await {
        ProbeOutcome::Ok => Check::new(CheckId::Channel, Status::Ok, Finding::MotorOk { instance }),
        ProbeOutcome::Down { fault, detail } => fail(
            CheckId::Channel,
            match fault {
                ChannelFault::CredentialRejected => Finding::TokenRejected {
                    var: var.to_string(),
                    detail,
                },
                ChannelFault::InstanceUnknown => Finding::InstanceUnknown { instance },
                ChannelFault::InstanceDisconnected => Finding::InstanceUnlinked { instance },
                ChannelFault::Tls => Finding::ChannelUnreachable { detail },
            },
        ),
        ProbeOutcome::Unavailable { detail } => fail(CheckId::Channel, Finding::ChannelUnreachable { detail }),
    }
}

fn graph_failure(e: GraphError, var: &str) -> Check {
    match e {
        GraphError::TokenRejected { .. } => fail(
            CheckId::Channel,
            Finding::TokenRejected {
                var: var.to_string(),
                detail: e.to_string(),
            },
        ),
        e => fail(CheckId::Channel, Finding::ChannelUnreachable { detail: e.to_string() }),
    }
}

async fn cloud_check(cfg: &Config, token: String, var: &str) -> Check {
    let client = match GraphClient::with_token(&cfg.channel.cloud, token) {
        Ok(c) => c,
        Err(e) => return fail(CheckId::Channel, Finding::ChannelUnreachable { detail: e.to_string() }),
    };
    match client.phone_info().await {
        Ok(p) => {
            let quality = p.quality_rating.unwrap_or_else(|| "UNKNOWN".into());
            if quality == "RED" {
                return Check::new(
                    CheckId::Channel,
                    Status::Warn,
                    Finding::CloudQualityLow {
                        display: p.display_phone_number,
                        quality,
                    },
                );
            }
            Check::new(
                CheckId::Channel,
                Status::Ok,
                Finding::CloudOk {
                    display: p.display_phone_number,
                    name: p.verified_name,
                    quality,
                    tier: p.messaging_limit_tier.unwrap_or_else(|| "?".into()),
                },
            )
        }
        Err(e) => graph_failure(e, var),
    }
}

async fn templates_check(cfg: &Config, templates: &Templates, channel_ok: bool) -> Check {
    if cfg.channel.kind == ChannelKind::Motor {
        return doctor::template_lengths(templates.all());
    }
    if !channel_ok {
        return Check::skip(CheckId::Templates, SkipReason::ChannelDown);
    }
    if cfg.channel.cloud.waba_id.trim().is_empty() {
        return fail(CheckId::Templates, Finding::NoWabaId);
    }
    let token = std::env::var(&cfg.channel.cloud.token_env).unwrap_or_default();
    let theirs = match GraphClient::with_token(&cfg.channel.cloud, token) {
        Ok(c) => c.templates(&cfg.channel.cloud.waba_id).await,
        Err(e) => {
            return fail(
                CheckId::Templates,
                Finding::ChannelUnreachable { detail: e.to_string() },
            );
        }
    };
    match theirs {
        Ok(theirs) => {
            let findings = crate::template_check::compare(templates.all(), &theirs);
            if findings.is_empty() {
                Check::new(
                    CheckId::Templates,
                    Status::Ok,
                    Finding::TemplatesOk {
                        count: templates.all().len(),
                    },
                )
            } else {
                fail(CheckId::Templates, Finding::TemplatesDiffer { findings })
            }
        }
        Err(e) => Check {
            id: CheckId::Templates,
            ..graph_failure(e, &cfg.channel.cloud.token_env)
        },
    }
}

/// `[server] listen` can be bound, or a `serve` already answers
/// `/healthz` there.
async fn listen_check(cfg: &Config) -> Check {
    let addr = cfg.server.listen.clone();
    match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => {
            drop(l);
            Check::new(CheckId::Listen, Status::Ok, Finding::ListenFree { addr })
        }
        Err(e) => {
            let url = format!("http://{addr}/healthz");
            let answered = reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(3))
                .build()
                .ok()
                .map(|c| c.get(url).send());
            let serving = match answered {
                Some(f) => f.await.is_ok_and(|r| r.status().is_success()),
                None => false,
            };
            if serving {
                Check::new(CheckId::Listen, Status::Ok, Finding::ListenServing { addr })
            } else {
                fail(
                    CheckId::Listen,
                    Finding::ListenBusy {
                        addr,
                        detail: e.to_string(),
                    },
                )
            }
        }
    }
}

async fn dispatchers_check(cfg: &Config, db: &Path) -> Check {
    let db = db.to_path_buf();
    let rows = tokio::task::spawn_blocking(move || {
        let mut store = crate::store::Store::attach(&db)?;
        store.read(|tx| tx.heartbeats(Utc::now() - chrono::Duration::days(7)))
    })
    .await;
    match rows {
        Ok(Ok(beats)) => doctor::dispatchers(&beats, &crate::channel::instance_label(&cfg.channel), Utc::now()),
        Ok(Err(e)) => fail(
            CheckId::Dispatchers,
            Finding::LedgerUnreachable { detail: e.to_string() },
        ),
        Err(e) => fail(
            CheckId::Dispatchers,
            Finding::LedgerUnreachable { detail: e.to_string() },
        ),
    }
}
