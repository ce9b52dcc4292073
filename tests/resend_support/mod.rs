//! Shared by the resend tests: a ledger file and config in a temp dir, the
//! real `unavez` binary, booking events imported the way a user does, and
//! channel evidence fed through the ledger's own state machine.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

use chrono::Utc;
use unavez::domain::state::Signal;
use unavez::store::{Cause, Entry, IntentionDetail, IntentionRow, OperatorActionRow, Store};

pub const BIN: &str = env!("CARGO_BIN_EXE_unavez");
pub const EVIL: &str = "\u{1b}[31mRED\u{1b}[0m\u{7}";
pub const EVIL_SHOWN: &str = "\\e[31mRED\\e[0m\\a";

pub struct Ledger {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub config: PathBuf,
    /// The PostgreSQL schema the ledger lives in, dropped with it.
    _schema: Option<unavez_testkit::PgSchema>,
}

/// What the binary said.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }
}

/// What a test changes in the config: top-level keys (`language = "en"`),
/// `[policy]` lines, and tables appended at the end (`[[operator]]`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra<'a> {
    pub top: &'a str,
    pub policy: &'a str,
    pub tables: &'a str,
}

impl Ledger {
    /// A ledger and a test config (booking notice only, no reminders, no
    /// quiet hours) with `extra`.
    /// On `backend`: the conformance suite's parameter
    /// (`unavez_testkit::on_both!`).
    pub fn new(backend: unavez_testkit::Backend, extra: Extra<'_>) -> Ledger {
        let dir = tempfile::tempdir().unwrap();
        let (db, schema) = match backend {
            unavez_testkit::Backend::Sqlite => (dir.path().join("unavez.db"), None),
            unavez_testkit::Backend::Postgres => {
                let s = unavez_testkit::PgSchema::new();
                (PathBuf::from(&s.url), Some(s))
            }
        };
        let config = dir.path().join("unavez.toml");
        std::fs::write(&config, config_text(&db, extra)).unwrap();
        let l = Ledger {
            dir,
            db,
            config,
            _schema: schema,
        };
        let r = l.run(&["init"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        l
    }

    /// Another config on the same ledger.
    pub fn alt_config(&self, name: &str, extra: Extra<'_>) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, config_text(&self.db, extra)).unwrap();
        p
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with(&self.config, args)
    }

    pub fn run_with(&self, config: &std::path::Path, args: &[&str]) -> Run {
        let out: Output = Command::new(BIN)
            .arg("--config")
            .arg(config)
            .args(args)
            .env_remove("UNAVEZ_DB")
            .env_remove("UNAVEZ_CONFIG")
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Imports one booking per reference with `unavez import`: an
    /// appointment three days ahead whose booking notice is due now.
    pub fn book(&self, refs: &[&str], name: &str) {
        let starts = Utc::now() + chrono::Duration::days(3);
        let lines: Vec<String> = refs
            .iter()
            .enumerate()
            .map(|(n, r)| {
                serde_json::json!({
                    "event_id": format!("{r}-sched-v1"),
                    "type": "appointment.scheduled",
                    "ref": r,
                    "version": 1,
                    "starts_at": starts.to_rfc3339(),
                    "contact": {"phone": format!("+5199{:07}", n + 1), "name": name, "language": "es"},
                    "service": "Odontología",
                    "location": "Sede Miraflores",
                })
                .to_string()
            })
            .collect();
        let file = self.dir.path().join("events.jsonl");
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let r = self.run(&["import", file.to_str().unwrap()]);
        assert_eq!(r.code, 0, "import: {}{}", r.stdout, r.stderr);
    }

    pub fn store(&self) -> Store {
        Store::open(&self.db).unwrap()
    }

    pub fn intention(&self, key: &str) -> IntentionRow {
        self.store().read(|tx| tx.find_intention(key)).unwrap()
    }

    pub fn exists(&self, key: &str) -> bool {
        self.store().read(|tx| tx.find_intention(key)).is_ok()
    }

    pub fn detail(&self, key: &str) -> IntentionDetail {
        self.store().read(|tx| tx.intention_detail(key)).unwrap()
    }

    pub fn actions(&self) -> Vec<OperatorActionRow> {
        self.store().read(|tx| tx.operator_actions(100)).unwrap()
    }

    /// Feeds channel evidence (`claim`, `accepted`, `delivered`, `read`,
    /// `failed`, …) through the state machine, as the dispatcher and the
    /// webhooks would.
    pub fn signals(&self, key: &str, signals: &[Signal]) {
        let id = self.intention(key).id;
        let mut store = self.store();
        for s in signals {
            store
                .write(|tx| {
                    tx.signal(
                        id,
                        *s,
                        &Entry {
                            signal: s.name(),
                            cause: Cause::Webhook,
                            evidence: Some("test"),
                            note: None,
                            commitment_version: Some(1),
                        },
                        Utc::now(),
                    )
                })
                .unwrap();
        }
    }
}

/// Sent and read, as the engine reports it.
pub const READ: &[Signal] = &[Signal::Claim, Signal::Accepted, Signal::Delivered, Signal::Read];
/// Sent and definitively failed.
pub const FAILED: &[Signal] = &[Signal::Claim, Signal::Failed];

fn config_text(db: &std::path::Path, extra: Extra<'_>) -> String {
    format!(
        r#"database = "{db}"
timezone = "America/Lima"
{top}

[policy]
reminder_offsets_minutes = []
confirm_reminder_offsets_minutes = []
quiet_hours = {{ start = "00:00", end = "00:00" }}
{policy}

{tables}
"#,
        db = db.display(),
        top = extra.top,
        policy = extra.policy,
        tables = extra.tables,
    )
}

/// Whether text would act on a terminal (any C0/C1 control but newline).
pub fn has_controls(s: &str) -> bool {
    s.chars().any(|c| c.is_control() && c != '\n')
}
