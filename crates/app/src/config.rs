//! Configuration: one TOML file (see `config.example.toml`), every setting
//! with a default so that `unavez demo` runs with none.
//!
//! Secrets never live here: the file names the *environment variables* that
//! hold tokens and webhook secrets, so the file can be committed and shown.

mod alerts;
mod backup;
mod doctor;
pub mod feeds;
mod import;
mod server;

use std::path::{Path, PathBuf};

use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

pub use alerts::AlertsConfig;
pub use backup::{BackupConfig, Periodic};
pub use doctor::DoctorConfig;
pub use feeds::FeedConfig;
pub use import::{ImportConfig, MAX_DAYS_AHEAD_LIMIT, PHONE_PROPERTIES};
pub use server::ServerConfig;

pub use crate::channel::config::{ChannelConfig, ChannelKind, CloudConfig, MotorConfig};
pub use crate::domain::operator::{Operator, Role};
pub use crate::policy::{InboundConfig, Policy, QuietHours};
use crate::templates::{TemplateError, Templates};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("cannot read templates {path}: {source}")]
    ReadTemplates { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Templates(#[from] TemplateError),
    #[error("storage.group {group:?}: {reason}")]
    UnknownGroup { group: String, reason: String },
    #[error("environment variable {var} (named by {field}) is not set")]
    MissingSecret { var: String, field: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    #[default]
    Es,
    En,
}

/// `[console]`: how the console looks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    pub theme: Theme,
}

/// The console's colours: for a dark or a light terminal background, or
/// `auto` (from `COLORFGBG`, dark when the terminal does not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    #[default]
    Auto,
    Dark,
    Light,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The ledger: a SQLite file, or a `postgres://` URL without its
    /// password (that comes from `PGPASSWORD`, or from a URL given in
    /// `UNAVEZ_DB`/`--db`).
    pub database: PathBuf,
    /// IANA time zone of the operating day and of message texts.
    pub timezone: String,
    /// Console language.
    pub language: Language,
    /// `[console]`: the console's look (tablero, themes).
    pub console: ConsoleConfig,
    /// Template file; `None` uses the embedded `assets/templates.toml`.
    pub templates: Option<PathBuf>,
    pub policy: Policy,
    pub channel: ChannelConfig,
    pub dispatcher: DispatcherConfig,
    pub server: ServerConfig,
    pub storage: StorageConfig,
    pub inbound: InboundConfig,
    pub import: ImportConfig,
    pub alerts: AlertsConfig,
    /// `[backup]`: periodic backups of a SQLite ledger in `serve`.
    pub backup: BackupConfig,
    /// `[doctor]`: thresholds of `unavez doctor`.
    pub doctor: DoctorConfig,
    #[serde(rename = "operator")]
    pub operators: Vec<Operator>,
    /// With operators mapped to OS accounts, still accept `--operator`
    /// naming someone else (a shared kiosk account); recorded as such.
    pub allow_operator_flag: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database: PathBuf::from("unavez.db"),
            timezone: "America/Lima".into(),
            language: Language::Es,
            console: ConsoleConfig::default(),
            templates: None,
            policy: Policy::default(),
            channel: ChannelConfig::default(),
            dispatcher: DispatcherConfig::default(),
            server: ServerConfig::default(),
            storage: StorageConfig::default(),
            inbound: InboundConfig::default(),
            import: ImportConfig::default(),
            alerts: AlertsConfig::default(),
            backup: BackupConfig::default(),
            doctor: DoctorConfig::default(),
            operators: vec![
                Operator {
                    name: "recepcion".into(),
                    role: Role::FrontDesk,
                    os_user: None,
                },
                Operator {
                    name: "supervisora".into(),
                    role: Role::Supervisor,
                    os_user: None,
                },
                Operator {
                    name: "tecnico".into(),
                    role: Role::Technician,
                    os_user: None,
                },
            ],
            allow_operator_flag: false,
        }
    }
}

/// `[storage]`: who may read the ledger's files.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// A Unix group that shares the ledger (the service and the staff's
    /// accounts): new files get mode 0660 and this group. Without one,
    /// 0600 (only the account that created them).
    pub group: Option<String>,
    /// Refuse to start on a configuration file that other accounts can
    /// write (group- or world-writable): whoever can edit it can point
    /// `base_url` at their own server. Off: a warning at start.
    pub strict: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DispatcherConfig {
    /// Run the dispatcher inside the console.
    pub embedded: bool,
    /// Intentions claimed per transaction.
    pub batch_size: u32,
    /// Sends in flight at once.
    pub concurrency: u32,
    /// Idle poll interval.
    pub poll_ms: u64,
    /// How long shutdown waits for in-flight sends.
    pub shutdown_grace_ms: u64,
    /// How often a running dispatcher writes its heartbeat row; three
    /// missed beats and other processes count it as gone.
    pub heartbeat_ms: u64,
    /// How often a channel paused because it refused us (a rejected
    /// credential, an unknown or unlinked instance, TLS) is probed with a
    /// request that sends nothing.
    pub channel_probe_ms: u64,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            embedded: true,
            batch_size: 64,
            concurrency: 16,
            poll_ms: 500,
            shutdown_grace_ms: 5_000,
            heartbeat_ms: 5_000,
            channel_probe_ms: 60_000,
        }
    }
}

/// A reply word in two keyword lists would mean two things at once (a
/// "SI" that confirms and opts out); compared as the classifier compares
/// replies (case and accents folded).
fn keyword_clash(cfg: &InboundConfig) -> Result<(), (&'static str, String)> {
    use crate::domain::inbound::normalize;
    let lists = [
        ("confirm", &cfg.confirm),
        ("opt_out", &cfg.opt_out),
        ("reschedule", &cfg.reschedule),
    ];
    let mut seen: std::collections::HashMap<String, (&str, &str)> = std::collections::HashMap::new();
    for (list, words) in lists {
        for w in words.iter() {
            let key = normalize(w);
            match seen.get(&key) {
                Some((other, first)) if *other != list => {
                    return Err((
                        list,
                        format!(
                            "{w:?} is also in inbound.{other} (as {first:?}); a reply word may mean only one thing"
                        ),
                    ));
                }
                _ => {
                    seen.insert(key, (list, w));
                }
            }
        }
    }
    Ok(())
}

impl Config {
    /// Reads and validates a config file; errors name the file and line.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let cfg = Self::parse(&text, path)?;
        cfg.check_file_mode(path)?;
        Ok(cfg)
    }

    /// A configuration file that other accounts can write lets them
    /// redirect the channel (`base_url`) or the ledger: a warning, or a
    /// refusal under `[storage] strict`.
    fn check_file_mode(&self, path: &Path) -> Result<(), ConfigError> {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(());
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o022 == 0 {
            return Ok(());
        }
        let who = if mode & 0o002 != 0 {
            "every account"
        } else {
            "its group"
        };
        let message = format!(
            "{} can be written by {who} (mode {mode:o}): whoever can edit it can redirect base_url; chmod go-w it",
            path.display()
        );
        if self.storage.strict {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                field: "storage.strict".into(),
                message,
            });
        }
        tracing::warn!("configuration {message} (refused with [storage] strict = true)");
        Ok(())
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1))
                .unwrap_or(0);
            ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                message: e.message().to_string(),
            }
        })?;
        cfg.validate(path)?;
        Ok(cfg)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            field: field.to_string(),
            message,
        };
        if unavez_ledger::location::Location::setting_has_password(&self.database) {
            return Err(invalid(
                "database",
                "a password does not belong in the configuration file: set PGPASSWORD (or give the URL in UNAVEZ_DB or --db)"
                    .into(),
            ));
        }
        self.timezone
            .parse::<Tz>()
            .map_err(|_| invalid("timezone", format!("unknown IANA time zone {:?}", self.timezone)))?;
        self.policy
            .validate()
            .map_err(|e| invalid(&format!("policy.{}", e.field), e.message))?;
        self.import
            .validate()
            .map_err(|(field, message)| invalid(&field, message))?;
        if self.dispatcher.concurrency == 0 || self.dispatcher.batch_size == 0 {
            return Err(invalid(
                "dispatcher",
                "concurrency and batch_size must be at least 1".into(),
            ));
        }
        if !(100..=3_600_000).contains(&self.dispatcher.channel_probe_ms) {
            return Err(invalid(
                "dispatcher.channel_probe_ms",
                format!(
                    "must be between 100 and 3600000, got {}",
                    self.dispatcher.channel_probe_ms
                ),
            ));
        }
        if !(500..=60_000).contains(&self.dispatcher.heartbeat_ms) {
            return Err(invalid(
                "dispatcher.heartbeat_ms",
                format!("must be between 500 and 60000, got {}", self.dispatcher.heartbeat_ms),
            ));
        }
        self.alerts
            .validate()
            .map_err(|(f, m)| invalid(&format!("alerts.{f}"), m))?;
        self.backup
            .validate()
            .map_err(|(f, m)| invalid(&format!("backup.{f}"), m))?;
        self.server
            .validate()
            .map_err(|(f, m)| invalid(&format!("server.{f}"), m))?;
        self.validate_people().map_err(|(f, m)| invalid(&f, m))?;
        keyword_clash(&self.inbound).map_err(|(f, m)| invalid(&format!("inbound.{f}"), m))?;
        Ok(())
    }

    /// Operator names and OS accounts name one person each.
    fn validate_people(&self) -> Result<(), (String, String)> {
        let mut names = std::collections::HashSet::new();
        let mut users = std::collections::HashMap::new();
        for o in &self.operators {
            if o.name.trim().is_empty() {
                return Err(("operator.name".into(), "an operator needs a name".into()));
            }
            if !names.insert(o.name.as_str()) {
                return Err((
                    "operator.name".into(),
                    format!("operator {:?} is defined twice", o.name),
                ));
            }
            if let Some(u) = &o.os_user
                && let Some(first) = users.insert(u.as_str(), o.name.as_str())
            {
                return Err((
                    "operator.os_user".into(),
                    format!("OS account {u:?} is given to both {first:?} and {:?}", o.name),
                ));
            }
        }
        if self.storage.group.as_deref().is_some_and(|g| g.trim().is_empty()) {
            return Err(("storage.group".into(), "an empty group name; remove the setting".into()));
        }
        Ok(())
    }

    /// Whether operators are mapped to OS accounts (identity verified);
    /// without any mapping the installation is single-user.
    pub fn identity_verified(&self) -> bool {
        self.operators.iter().any(|o| o.os_user.is_some())
    }

    /// Atención's rule for this installation: with a channel that cannot
    /// be asked about a message (the Cloud API), accepted or sent messages
    /// without news for `[policy] status_poll_minutes` are cases ("sin
    /// confirmación de entrega"); the engine is polled instead.
    pub fn attention_rule(&self) -> crate::domain::attention::AttentionRule {
        let minutes = i64::try_from(
            self.policy
                .status_poll_minutes
                .min(crate::policy::MAX_STATUS_POLL_MINUTES),
        )
        .unwrap_or(60);
        crate::domain::attention::AttentionRule {
            unconfirmed_window: (self.channel.kind == ChannelKind::Cloud).then(|| chrono::Duration::minutes(minutes)),
            ..Default::default()
        }
    }

    /// The configured time zone (validated at load).
    pub fn tz(&self) -> Tz {
        self.timezone.parse().unwrap_or(chrono_tz::America::Lima)
    }

    /// The message templates: the file `templates` names, else the
    /// embedded set. The file is read here so the core stays free of I/O.
    pub fn load_templates(&self) -> Result<Templates, ConfigError> {
        let Some(path) = &self.templates else {
            return Ok(Templates::embedded());
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadTemplates {
            path: path.clone(),
            source,
        })?;
        Ok(Templates::parse(&text, &path.display().to_string())?)
    }

    /// The operator `name` names: exactly, or else as a person types it
    /// (any case, with or without accents) when only one matches so.
    pub fn operator(&self, name: &str) -> Option<&Operator> {
        if let Some(op) = self.operators.iter().find(|o| o.name == name) {
            return Some(op);
        }
        let mut loose = self
            .operators
            .iter()
            .filter(|o| crate::domain::operator::name_matches(name, &o.name));
        match (loose.next(), loose.next()) {
            (Some(op), None) => Some(op),
            _ => None,
        }
    }

    /// The gid of `[storage] group`, looked up in the system's group
    /// database.
    pub fn storage_gid(&self) -> Result<Option<u32>, ConfigError> {
        let Some(name) = &self.storage.group else {
            return Ok(None);
        };
        match nix::unistd::Group::from_name(name) {
            Ok(Some(g)) => Ok(Some(g.gid.as_raw())),
            Ok(None) => Err(ConfigError::UnknownGroup {
                group: name.clone(),
                reason: "no such group on this system".into(),
            }),
            Err(e) => Err(ConfigError::UnknownGroup {
                group: name.clone(),
                reason: e.to_string(),
            }),
        }
    }
}

/// Reads a secret from the environment variable a config field names.
pub fn secret_from_env(var: &str, field: &str) -> Result<String, ConfigError> {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ConfigError::MissingSecret {
            var: var.to_string(),
            field: field.to_string(),
        })
}

#[cfg(test)]
mod tests;
