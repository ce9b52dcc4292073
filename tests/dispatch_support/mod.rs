//! Shared helpers for the dispatcher integration tests: a temp ledger and
//! config file, the real `unavez` binary as child processes, booking event
//! files, and the simulator's ground-truth log.
#![allow(dead_code)]

#[path = "../failpoint_support/mod.rs"]
mod failpoint_support;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use unavez::domain::state::IntentionState;
use unavez::store::{HistoryRow, IntentFilter, IntentionRow, Store};

pub const BIN: &str = env!("CARGO_BIN_EXE_unavez");
pub const MOTOR_KEY_ENV: &str = "UNAVEZ_TEST_MOTOR_KEY";
pub const CLOUD_TOKEN_ENV: &str = "UNAVEZ_TEST_CLOUD_TOKEN";
pub const INSTANCE: &str = "clinica-test";
pub const CLOUD_SECRET_ENV: &str = "UNAVEZ_TEST_CLOUD_APP_SECRET";
pub const CLOUD_SECRET: &str = "secreto-de-app-de-prueba";
/// The engine's webhook secret `serve` checks (and a simulator signs with).
pub const MOTOR_WEBHOOK_SECRET: &str = "secreto-de-webhook-del-motor";

/// Test policy and dispatcher settings; small leases and fast retries so
/// crash recovery fits in a CI run.
#[derive(Debug, Clone)]
pub struct Cfg {
    /// `[channel]` section body (kind and sub-tables).
    pub channel: String,
    pub lease_seconds: u64,
    pub uncertain_review_minutes: u64,
    pub max_attempts: u32,
    pub max_reconcile_attempts: u32,
    pub backoff_seconds: Vec<u64>,
    pub batch_size: u32,
    pub concurrency: u32,
    pub poll_ms: u64,
    pub shutdown_grace_ms: u64,
    /// `[server] listen` of `serve` (port 0: any free port).
    pub server_listen: String,
}

impl Cfg {
    pub fn motor(base_url: &str) -> Cfg {
        Cfg {
            channel: format!(
                "kind = \"motor\"\n[channel.motor]\nbase_url = \"{base_url}\"\ninstance_id = \"{INSTANCE}\"\n\
                 api_key_env = \"{MOTOR_KEY_ENV}\"\ntimeout_ms = 600\nconnect_timeout_ms = 300\n"
            ),
            lease_seconds: 3,
            uncertain_review_minutes: 30,
            max_attempts: 100,
            max_reconcile_attempts: 1000,
            backoff_seconds: vec![1],
            batch_size: 16,
            concurrency: 8,
            poll_ms: 100,
            shutdown_grace_ms: 1000,
            server_listen: "127.0.0.1:0".into(),
        }
    }

    pub fn cloud(base_url: &str) -> Cfg {
        Cfg {
            channel: format!(
                "kind = \"cloud\"\n[channel.cloud]\nbase_url = \"{base_url}\"\napi_version = \"v21.0\"\n\
                 phone_number_id = \"1234567890\"\ntoken_env = \"{CLOUD_TOKEN_ENV}\"\ntimeout_ms = 500\n"
            ),
            ..Cfg::motor("http://127.0.0.1:9")
        }
    }

    pub fn with_motor_timeout(mut self, ms: u64) -> Cfg {
        self.channel = self
            .channel
            .replace("timeout_ms = 600\n", &format!("timeout_ms = {ms}\n"));
        self
    }

    pub fn with_lease(mut self, seconds: u64) -> Cfg {
        self.lease_seconds = seconds;
        self
    }

    fn toml(&self, db: &Path) -> String {
        format!(
            r#"database = "{db}"
timezone = "America/Lima"

[policy]
reminder_offsets_minutes = []
confirm_reminder_offsets_minutes = []
quiet_hours = {{ start = "00:00", end = "00:00" }}
daily_cap_per_recipient = 0
max_attempts = {max_attempts}
backoff_seconds = {backoff:?}
lease_seconds = {lease}
uncertain_review_minutes = {review}
max_reconcile_attempts = {max_rec}

[dispatcher]
batch_size = {batch}
concurrency = {conc}
poll_ms = {poll}
shutdown_grace_ms = {grace}

[server]
listen = "{listen}"
cloud_app_secret_env = "{CLOUD_SECRET_ENV}"

[channel]
{channel}
"#,
            listen = self.server_listen,
            db = db.display(),
            max_attempts = self.max_attempts,
            backoff = self.backoff_seconds,
            lease = self.lease_seconds,
            review = self.uncertain_review_minutes,
            max_rec = self.max_reconcile_attempts,
            batch = self.batch_size,
            conc = self.concurrency,
            poll = self.poll_ms,
            grace = self.shutdown_grace_ms,
            channel = self.channel,
        )
    }
}

/// A temp directory with a ledger and a config file.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub config: PathBuf,
    /// The PostgreSQL schema the ledger lives in, dropped with the Env.
    schema: Option<unavez_testkit::PgSchema>,
}

impl Env {
    pub fn new(cfg: &Cfg) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("unavez.db");
        Env::on(cfg, dir, db)
    }

    /// The same on a PostgreSQL ledger: `url` names a scratch schema
    /// (`unavez_testkit::PgSchema`).
    pub fn postgres(cfg: &Cfg, url: &str) -> Env {
        Env::on(cfg, tempfile::tempdir().unwrap(), PathBuf::from(url))
    }

    /// An initialised ledger on `backend` (the conformance suite's
    /// parameter, see `unavez_testkit::on_both!`).
    pub fn with(backend: unavez_testkit::Backend, cfg: &Cfg) -> Env {
        match backend {
            unavez_testkit::Backend::Sqlite => Env::new(cfg),
            unavez_testkit::Backend::Postgres => {
                let schema = unavez_testkit::PgSchema::new();
                let mut env = Env::postgres(cfg, &schema.url);
                env.schema = Some(schema);
                env
            }
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.schema.is_some() || self.db.to_string_lossy().starts_with("postgres")
    }

    fn on(cfg: &Cfg, dir: tempfile::TempDir, db: PathBuf) -> Env {
        let config = dir.path().join("unavez.toml");
        std::fs::write(&config, cfg.toml(&db)).unwrap();
        let env = Env {
            dir,
            db,
            config,
            schema: None,
        };
        env.ok(&["init"]);
        env
    }

    /// Another config file on the same ledger (a second policy).
    pub fn alt_config(&self, name: &str, cfg: &Cfg) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, cfg.toml(&self.db)).unwrap();
        p
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        self.command_with(&self.config, args)
    }

    pub fn command_with(&self, config: &Path, args: &[&str]) -> Command {
        self.prepare(Command::new(BIN), config, args)
    }

    /// `unavez …` with failpoints armed by `spec` (see failpoint_support).
    pub fn command_armed(&self, spec: &str, args: &[&str]) -> Command {
        self.prepare(failpoint_support::armed(spec), &self.config, args)
    }

    fn prepare(&self, mut c: Command, config: &Path, args: &[&str]) -> Command {
        c.arg("--config").arg(config).args(args);
        c.env(MOTOR_KEY_ENV, "clave-de-prueba")
            .env(CLOUD_TOKEN_ENV, "token-de-prueba")
            .env(CLOUD_SECRET_ENV, CLOUD_SECRET)
            .env("UNAVEZ_MOTOR_WEBHOOK_SECRET", MOTOR_WEBHOOK_SECRET)
            .env_remove("UNAVEZ_DB")
            .env_remove("UNAVEZ_CONFIG");
        c
    }

    /// Runs `unavez …` to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs `unavez …` and asserts success.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "unavez {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn ok_with(&self, config: &Path, args: &[&str]) -> String {
        let out = self.command_with(config, args).output().unwrap();
        assert!(
            out.status.success(),
            "unavez {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts `unavez …` in the background; killed when the guard drops.
    pub fn spawn(&self, args: &[&str]) -> Proc {
        let child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Proc(Some(child))
    }

    /// Writes booking events to a `.jsonl` file and imports it.
    pub fn import(&self, name: &str, lines: &[String]) {
        let p = self.write_events(name, lines);
        self.ok(&["import", p.to_str().unwrap()]);
    }

    pub fn write_events(&self, name: &str, lines: &[String]) -> PathBuf {
        let p = self.path(name);
        let mut f = std::fs::File::create(&p).unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        p
    }

    /// A reader's connection: attached, not migrated, so it opens even
    /// while a (frozen) dispatcher holds SQLite's write lock.
    pub fn store(&self) -> Store {
        let location = unavez_ledger::location::Location::parse(&self.db).unwrap();
        Store::attach_location(&location).unwrap()
    }

    pub fn intentions(&self) -> Vec<IntentionRow> {
        self.store()
            .read(|tx| {
                tx.list_intentions(&IntentFilter {
                    limit: 1_000_000,
                    ..Default::default()
                })
            })
            .unwrap()
    }

    pub fn by_key(&self) -> HashMap<String, IntentionRow> {
        self.intentions().into_iter().map(|i| (i.key.clone(), i)).collect()
    }

    pub fn history(&self, id: i64) -> Vec<HistoryRow> {
        self.store().read(|tx| tx.history(id)).unwrap()
    }

    pub fn state_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for i in self.intentions() {
            *m.entry(i.state.to_string()).or_insert(0) += 1;
        }
        m
    }

    /// True when nothing is planned-and-due, dispatching or uncertain.
    pub fn settled(&self) -> bool {
        let now = Utc::now();
        self.intentions().iter().all(|i| match i.state {
            IntentionState::Dispatching | IntentionState::Uncertain => false,
            IntentionState::Planned => i.due_at > now,
            _ => true,
        })
    }
}

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub Option<Child>);

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait for a graceful exit; returns stdout.
    pub fn terminate(&mut self) -> String {
        let mut c = self.0.take().unwrap();
        let st = Command::new("kill")
            .arg("-TERM")
            .arg(c.id().to_string())
            .status()
            .unwrap();
        assert!(st.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if c.try_wait().unwrap().is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "process did not stop after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "graceful stop failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `cond` until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `appointment.scheduled` three days ahead: its booking notice is due now.
pub fn scheduled(reference: &str, n: usize) -> String {
    let starts = Utc::now() + chrono::Duration::days(3);
    scheduled_at(reference, n, starts, 1)
}

pub fn scheduled_at(reference: &str, n: usize, starts: DateTime<Utc>, version: i64) -> String {
    serde_json::json!({
        "event_id": format!("{reference}-sched-v{version}"),
        "type": "appointment.scheduled",
        "ref": reference,
        "version": version,
        "starts_at": starts.to_rfc3339(),
        "contact": {"phone": phone(n), "name": format!("Paciente {n}"), "language": "es"},
        "service": "Odontología",
        "location": "Sede Miraflores",
    })
    .to_string()
}

pub fn rescheduled(reference: &str, starts: DateTime<Utc>, version: i64) -> String {
    serde_json::json!({
        "event_id": format!("{reference}-resched-v{version}"),
        "type": "appointment.rescheduled",
        "ref": reference,
        "version": version,
        "starts_at": starts.to_rfc3339(),
    })
    .to_string()
}

pub fn cancelled(reference: &str) -> String {
    serde_json::json!({
        "event_id": format!("{reference}-cancel"),
        "type": "appointment.cancelled",
        "ref": reference,
    })
    .to_string()
}

pub fn phone(n: usize) -> String {
    format!("+5199{:07}", n)
}

pub use unavez_testkit::sent_keys;

/// Key → times it went out.
pub fn sent_counts(log: &Path) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for k in sent_keys(log) {
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

/// Asserts no key went out twice.
pub fn assert_no_duplicates(log: &Path) {
    let dups: Vec<(String, usize)> = sent_counts(log).into_iter().filter(|(_, n)| *n > 1).collect();
    assert!(dups.is_empty(), "duplicate messages in the ground-truth log: {dups:?}");
}

/// A tokio runtime for in-process simulators, kept alive by the test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The engine simulator in-process (real HTTP on loopback), logging what
/// went out to `log` and posting its signed webhooks to `webhook` (e.g. a
/// `serve` process's `/webhooks/motor`).
pub fn start_sim_with_webhook(
    rt: &tokio::runtime::Runtime,
    log: &Path,
    faults: &str,
    seed: u64,
    webhook: &str,
) -> unavez::sim::SimHandle {
    let opts = unavez::sim::SimOptions {
        log: Some(log.to_path_buf()),
        faults: unavez::sim::FaultSpec::parse(faults).unwrap(),
        seed,
        webhook: Some(webhook.to_string()),
        webhook_secret: MOTOR_WEBHOOK_SECRET.as_bytes().to_vec(),
        ..Default::default()
    };
    rt.block_on(unavez::sim::spawn(opts)).unwrap()
}

/// The engine simulator in-process (real HTTP on loopback), logging what
/// went out to `log`.
pub fn start_sim(rt: &tokio::runtime::Runtime, log: &Path, faults: &str, seed: u64) -> unavez::sim::SimHandle {
    let opts = unavez::sim::SimOptions {
        log: Some(log.to_path_buf()),
        faults: unavez::sim::FaultSpec::parse(faults).unwrap(),
        seed,
        ..Default::default()
    };
    rt.block_on(unavez::sim::spawn(opts)).unwrap()
}
