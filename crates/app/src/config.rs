//! Configuration: one TOML file (see `config.example.toml`), every setting
//! with a default so that `unavez demo` runs with none.
//!
//! Secrets never live here: the file names the *environment variables* that
//! hold tokens and webhook secrets, so the file can be committed and shown.

use std::path::{Path, PathBuf};

use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// SQLite file.
    pub database: PathBuf,
    /// IANA time zone of the operating day and of message texts.
    pub timezone: String,
    /// Console language.
    pub language: Language,
    /// Template file; `None` uses the embedded `assets/templates.toml`.
    pub templates: Option<PathBuf>,
    pub policy: Policy,
    pub channel: ChannelConfig,
    pub dispatcher: DispatcherConfig,
    pub server: ServerConfig,
    pub inbound: InboundConfig,
    pub import: ImportConfig,
    #[serde(rename = "operator")]
    pub operators: Vec<Operator>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database: PathBuf::from("unavez.db"),
            timezone: "America/Lima".into(),
            language: Language::Es,
            templates: None,
            policy: Policy::default(),
            channel: ChannelConfig::default(),
            dispatcher: DispatcherConfig::default(),
            server: ServerConfig::default(),
            inbound: InboundConfig::default(),
            import: ImportConfig::default(),
            operators: vec![
                Operator {
                    name: "recepcion".into(),
                    role: Role::FrontDesk,
                },
                Operator {
                    name: "supervisora".into(),
                    role: Role::Supervisor,
                },
                Operator {
                    name: "tecnico".into(),
                    role: Role::Technician,
                },
            ],
        }
    }
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
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        DispatcherConfig {
            embedded: true,
            batch_size: 64,
            concurrency: 16,
            poll_ms: 500,
            shutdown_grace_ms: 5_000,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: String,
    pub body_limit_bytes: usize,
    /// Cloud API app secret (HMAC of webhook bodies), by env var name.
    pub cloud_app_secret_env: String,
    /// Cloud API webhook verification token, by env var name.
    pub cloud_verify_token_env: String,
    /// Shared secret of the engine's webhooks, by env var name.
    pub motor_webhook_secret_env: String,
    /// Bearer token for `POST /v1/bookings/events`, by env var name.
    pub ingest_token_env: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8089".into(),
            body_limit_bytes: 2 * 1024 * 1024,
            cloud_app_secret_env: "UNAVEZ_CLOUD_APP_SECRET".into(),
            cloud_verify_token_env: "UNAVEZ_CLOUD_VERIFY_TOKEN".into(),
            motor_webhook_secret_env: "UNAVEZ_MOTOR_WEBHOOK_SECRET".into(),
            ingest_token_env: "UNAVEZ_INGEST_TOKEN".into(),
        }
    }
}

/// `[import]`: how calendar files are read (`unavez import agenda.ics`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImportConfig {
    /// ISO 3166 country of phones typed without a country code
    /// (`987 654 321` → `+51987654321` with `"PE"`).
    pub default_country: String,
    /// How many days ahead the occurrences of a recurring event are
    /// imported; later ones are imported by a later import of the file.
    pub recurrence_days: u32,
    /// Where a phone typed as text is looked for, in this order, after
    /// `X-UNAVEZ-PHONE` and an `ATTENDEE` with a `tel:` URI.
    pub phone_properties: Vec<String>,
}

/// The text properties `[import] phone_properties` may name.
pub const PHONE_PROPERTIES: [&str; 5] = ["SUMMARY", "DESCRIPTION", "LOCATION", "COMMENT", "CONTACT"];

impl Default for ImportConfig {
    fn default() -> Self {
        ImportConfig {
            default_country: "PE".into(),
            recurrence_days: 60,
            phone_properties: vec!["SUMMARY".into(), "DESCRIPTION".into(), "LOCATION".into()],
        }
    }
}

impl ImportConfig {
    /// The default country as libphonenumber's id (validated at load).
    pub fn country(&self) -> phonenumber::country::Id {
        self.default_country
            .trim()
            .to_ascii_uppercase()
            .parse()
            .unwrap_or(phonenumber::country::Id::PE)
    }

    /// `(field, message)` of the first bad setting.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let code = self.default_country.trim().to_ascii_uppercase();
        if code.parse::<phonenumber::country::Id>().is_err() {
            return Err((
                "import.default_country".into(),
                format!(
                    "unknown country {:?} (expected an ISO 3166 code such as \"PE\")",
                    self.default_country
                ),
            ));
        }
        if !(1..=731).contains(&self.recurrence_days) {
            return Err((
                "import.recurrence_days".into(),
                format!("must be between 1 and 731 days, got {}", self.recurrence_days),
            ));
        }
        if let Some(p) = self
            .phone_properties
            .iter()
            .find(|p| !PHONE_PROPERTIES.contains(&p.to_ascii_uppercase().as_str()))
        {
            return Err((
                "import.phone_properties".into(),
                format!("{p:?} is not one of {}", PHONE_PROPERTIES.join(", ")),
            ));
        }
        Ok(())
    }
}

impl Config {
    /// Reads and validates a config file; errors name the file and line.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
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
        Ok(())
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

    pub fn operator(&self, name: &str) -> Option<&Operator> {
        self.operators.iter().find(|o| o.name == name)
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
mod tests {
    use super::*;

    #[test]
    fn the_example_file_parses() {
        let text = include_str!("../../../config.example.toml");
        let cfg = Config::parse(text, Path::new("config.example.toml")).unwrap();
        assert_eq!(cfg.tz(), chrono_tz::America::Lima);
        assert_eq!(cfg.policy.reminder_offsets_minutes, vec![1440, 120]);
        assert_eq!(cfg.policy.max_resends_per_day, 2);
    }

    #[test]
    fn the_resend_cap_is_read_and_checked() {
        let cfg = Config::parse("[policy]\nmax_resends_per_day = 5\n", Path::new("c.toml")).unwrap();
        assert_eq!(cfg.policy.max_resends_per_day, 5);
        assert_eq!(Config::default().policy.max_resends_per_day, 2);
        let e = Config::parse("[policy]\nmax_resends_per_day = 0\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("policy.max_resends_per_day"), "{e}");
        let e = Config::parse("[policy]\nmax_resends_per_day = -1\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().starts_with("c.toml:2:"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = Config::parse(
            "timezone = \"America/Lima\"\n[policy]\nmax_attempts = \"x\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("c.toml:3:"), "{e}");
        let e = Config::parse("timezone = \"Mars/Olympus\"\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("timezone"), "{e}");
        let e = Config::parse(
            "[policy]\nquiet_hours = { start = \"25:00\", end = \"07:00\" }\n",
            Path::new("c.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("quiet_hours"), "{e}");
        let e = Config::parse("colour = 1\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
    }

    #[test]
    fn the_import_section_is_read_and_checked() {
        let cfg = Config::parse(
            "[import]\ndefault_country = \"co\"\nrecurrence_days = 30\nphone_properties = [\"DESCRIPTION\"]\n",
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(cfg.import.country(), phonenumber::country::Id::CO);
        assert_eq!((cfg.import.recurrence_days, cfg.import.phone_properties.len()), (30, 1));
        assert_eq!(Config::default().import.default_country, "PE");
        for (bad, field) in [
            ("default_country = \"XX\"", "import.default_country"),
            ("recurrence_days = 0", "import.recurrence_days"),
            ("phone_properties = [\"DTSTART\"]", "import.phone_properties"),
        ] {
            let e = Config::parse(&format!("[import]\n{bad}\n"), Path::new("c.toml")).unwrap_err();
            assert!(e.to_string().contains(field), "{e}");
        }
    }
}
