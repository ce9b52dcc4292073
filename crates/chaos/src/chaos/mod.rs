//! The chaos harness behind `unavez-chaos`: the real dispatcher (`unavez
//! serve`) as a child process against `unavez sim` with seeded faults,
//! booking events imported while it runs (reschedules and cancellations
//! included), SIGKILLs at random moments and at each step of an attempt,
//! simulator restarts and store faults; then everything settles and a
//! history checker ([`check`]) compares the ledger with the simulator's own
//! records: its ground-truth log of what went out, and its journal of when
//! it first received each key, against the commit time of every booking
//! change (the harness's import timeline, see [`evidence`]).
//!
//! | file | job |
//! |---|---|
//! | [`plan`] | the seeded schedule and the model of the expected ledger |
//! | `procs.rs` | starting, killing and restarting the child processes |
//! | [`evidence`] | reading the simulator's log and journal, and the harness's import timeline |
//! | [`check`] | the pure history checker |

pub mod check;
pub mod evidence;
pub mod failpoints;
pub mod ledger_view;
pub mod plan;
mod procs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;
use rusqlite::Connection;
use serde::Serialize;

use crate::store::{Store, StoreError, open_connection};
use check::{Inputs, Verdict};
use evidence::{ImportWindow, read_sent};
use plan::{Ending, Options, Plan};
use procs::Env;

/// First argument of a child process: the harness binary re-executed as
/// the `unavez` command line (`unavez-chaos __unavez serve …`).
pub const CHILD_ARG: &str = "__unavez";

/// Runs a child: `args` is `[program, --failpoints SPEC, unavez args…]`
/// (the failpoints optional); arms the points, then runs the `unavez`
/// command line.
pub fn child<I, T>(args: I) -> anyhow::Result<std::process::ExitCode>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|a| a == FAILPOINTS_ARG) {
        let spec = args.get(2).and_then(|s| s.to_str()).unwrap_or_default().to_string();
        failpoints::arm(&spec).map_err(anyhow::Error::msg)?;
        args.drain(1..3.min(args.len()));
    }
    unavez::cli::run_from(args)
}

/// The child argument that carries a failpoint spec (see [`failpoints`]).
pub const FAILPOINTS_ARG: &str = "--failpoints";

#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Child(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("reading the ledger for the checker: {0}")]
    Ledger(#[from] rusqlite::Error),
    #[error("simulator log {path}, line {line}: {reason}")]
    Log { path: PathBuf, line: usize, reason: String },
}

/// What happened during the run, beside the checker's verdict.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    pub plan_fingerprint: String,
    pub waves: usize,
    pub events_imported: usize,
    pub random_kills: u32,
    /// Failpoint waves whose dispatcher aborted at the armed step.
    pub failpoints_fired: BTreeMap<String, bool>,
    /// Store-fault waves whose dispatcher was still running at the end.
    pub store_faults_survived: BTreeMap<String, bool>,
    pub sim_restarts: u32,
    pub lock_holds: u32,
    pub settle_seconds: f64,
    pub settled: bool,
    pub seconds: f64,
}

/// The full result: statistics, verdict and `PRAGMA integrity_check`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub stats: RunStats,
    pub verdict: Verdict,
    pub integrity: String,
    pub dir: PathBuf,
}

impl Report {
    /// Non-zero exit: duplicated, lost or wrongly sent above zero, or a
    /// damaged database.
    pub fn failed(&self) -> bool {
        self.verdict.failed() || self.integrity != "ok"
    }

    /// The human summary `unavez-chaos` prints.
    pub fn render(&self) -> String {
        let s = &self.stats;
        let v = &self.verdict;
        let mut out = String::new();
        let fired: Vec<String> = s
            .failpoints_fired
            .iter()
            .map(|(k, ok)| format!("{k}={}", yes(*ok)))
            .collect();
        let survived: Vec<String> = s
            .store_faults_survived
            .iter()
            .map(|(k, ok)| format!("{k}={}", yes(*ok)))
            .collect();
        out.push_str(&format!(
            "chaos: plan {} · {} waves · {} events imported · {} random SIGKILLs · {} simulator restarts · {} write-lock holds\n",
            s.plan_fingerprint, s.waves, s.events_imported, s.random_kills, s.sim_restarts, s.lock_holds
        ));
        out.push_str(&format!(
            "failpoints (dispatcher aborted at the step): {}\n",
            fired.join(" ")
        ));
        out.push_str(&format!("store faults (dispatcher survived): {}\n", survived.join(" ")));
        out.push_str(&format!(
            "settled: {} in {:.1} s · total {:.1} s · files in {}\n",
            yes(s.settled),
            s.settle_seconds,
            s.seconds,
            self.dir.display()
        ));
        let states: Vec<String> = v.states.iter().map(|(k, n)| format!("{k}={n}")).collect();
        out.push_str(&format!("final states: {}\n\n", states.join(" ")));
        out.push_str(&format!("intentions                 {}\n", v.intentions));
        out.push_str(&format!("messages sent              {}\n", v.messages_sent));
        out.push_str(&format!("duplicated                 {}\n", v.duplicated));
        out.push_str(&format!("lost                       {}\n", v.lost));
        out.push_str(&format!("wrongly sent               {}\n", v.wrongly_sent));
        out.push_str(&format!("uncertain left unresolved  {}\n", v.uncertain_unresolved));
        out.push_str(&format!(
            "in flight across a change  {} (first received by the engine before the change committed, or ≤ {} ms after)\n",
            v.in_flight_across_change,
            check::IN_FLIGHT_GRACE_MS
        ));
        out.push_str(&format!("ledger contradicts engine  {}\n", v.contradicted));
        out.push_str(&format!("PRAGMA integrity_check     {}\n", self.integrity));
        if !v.examples.is_empty() {
            out.push_str("\nfindings:\n");
            for e in &v.examples {
                out.push_str(&format!("  {e}\n"));
            }
        }
        out.push_str(if self.failed() {
            "\nRESULT: FAIL\n"
        } else {
            "\nRESULT: PASS\n"
        });
        out
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

/// The configuration the children run with: no reminders (every message is
/// due now), short lease and backoff so crashes are recovered within the
/// run, a channel timeout shorter than the simulator's hold so
/// `timeout_after` is a real timeout, no quiet hours, no daily cap.
fn config_text(db: &Path, sim_port: u16, server_port: u16) -> String {
    format!(
        r#"# Generated by `unavez-chaos`.
database = "{db}"
timezone = "America/Lima"

[policy]
booking_notice = true
reminder_offsets_minutes = []
confirm_reminder_offsets_minutes = []
update_notice = true
cancellation_notice = true
daily_cap_per_recipient = 0
quiet_hours = {{ start = "00:00", end = "00:00" }}
max_attempts = 100
backoff_seconds = [1]
lease_seconds = 3
uncertain_review_minutes = 60
max_reconcile_attempts = 200

[channel]
kind = "motor"

[channel.motor]
base_url = "http://127.0.0.1:{sim_port}"
instance_id = "clinica-chaos"
api_key_env = "UNAVEZ_MOTOR_API_KEY"
timeout_ms = 1000
connect_timeout_ms = 500

[dispatcher]
batch_size = 32
concurrency = 16
poll_ms = 100
shutdown_grace_ms = 2000

[server]
listen = "127.0.0.1:{server_port}"
"#,
        db = db.display()
    )
}

/// How far ahead the settle phase counts a planned intention as due: more
/// than stopping the children takes, so nothing falls due between "settled"
/// and the checker.
const SETTLE_AHEAD_MS: i64 = 30_000;

/// Runs the whole harness in `dir` (created), with `bin` as the binary the
/// children re-execute (this harness, see [`CHILD_ARG`]).
pub fn run(opts: &Options, bin: &Path, dir: &Path, settle_limit: Duration) -> Result<Report, ChaosError> {
    let t0 = Instant::now();
    std::fs::create_dir_all(dir).map_err(|e| ChaosError::Io(format!("creating {}: {e}", dir.display())))?;
    let plan = Plan::new(opts);
    let mut stats = RunStats {
        plan_fingerprint: plan.fingerprint(),
        waves: plan.waves.len(),
        ..Default::default()
    };
    let db = dir.join("ledger.db");
    let server_port = procs::free_port()?;
    // The engine's webhooks go to a server run by the harness itself (the
    // real `crate::server` router on its own port), so they keep arriving
    // while the dispatcher is being killed, as with a separate web process.
    let hook_port = procs::free_port()?;
    let webhook = format!("http://127.0.0.1:{hook_port}/webhooks/motor");
    let config = dir.join("unavez.toml");
    let env0 = Env {
        bin: bin.to_path_buf(),
        dir: dir.to_path_buf(),
        config: config.clone(),
        db: db.clone(),
    };
    // The simulator first (its port goes into the configuration).
    write(&config, &config_text(&db, 0, server_port))?;
    let (mut sim, sim_port) = env0.start_sim(0, plan.sim_seed, &plan.sim_faults, &webhook)?;
    write(&config, &config_text(&db, sim_port, server_port))?;
    let env = env0;
    Store::open(&db)?;
    let hooks = Hooks::start(&config, &db, hook_port)?;

    let start = Utc::now();
    let result = (|| -> Result<(), ChaosError> {
        for (w, wave) in plan.waves.iter().enumerate() {
            let file = dir.join(format!("wave-{w:03}.jsonl"));
            let text: Vec<String> = wave.events.iter().map(|e| e.to_json(start)).collect();
            write(&file, &(text.join("\n") + "\n"))?;
            let failpoint = match &wave.ending {
                Ending::Failpoint(spec) => Some(spec.as_str()),
                Ending::StoreFaults { spec, .. } => Some(spec.as_str()),
                Ending::KillAfterMs(_) => None,
            };
            let mut d = env.start_dispatcher(failpoint)?;
            let started_ms = Utc::now().timestamp_millis();
            if let Err(e) = env.import(&file) {
                procs::kill(&mut d);
                return Err(e);
            }
            // The import has committed and exited: the checker dates this
            // wave's booking changes by this moment.
            let window = ImportWindow {
                wave: w,
                started_ms,
                finished_ms: Utc::now().timestamp_millis(),
            };
            evidence::log_import(&dir.join("imports.jsonl"), &window)?;
            stats.events_imported += wave.events.len();
            let holder = wave.hold_lock_ms.map(|ms| {
                stats.lock_holds += 1;
                let db = db.clone();
                std::thread::spawn(move || hold_write_lock(&db, Duration::from_millis(ms)))
            });
            if wave.restart_sim {
                std::thread::sleep(Duration::from_millis(150));
                procs::kill(&mut sim);
                sim = env.start_sim(sim_port, plan.sim_seed, &plan.sim_faults, &webhook)?.0;
                stats.sim_restarts += 1;
            }
            match &wave.ending {
                Ending::KillAfterMs(ms) => {
                    std::thread::sleep(Duration::from_millis(*ms));
                    procs::kill(&mut d);
                    stats.random_kills += 1;
                }
                Ending::Failpoint(spec) => {
                    let status = procs::wait_for(&mut d, Duration::from_secs(30));
                    let fired = status.as_ref().is_some_and(procs::aborted);
                    if status.is_none() {
                        procs::kill(&mut d);
                    }
                    stats.failpoints_fired.insert(spec.clone(), fired);
                }
                Ending::StoreFaults { spec, run_ms } => {
                    std::thread::sleep(Duration::from_millis(*run_ms));
                    let alive = matches!(d.try_wait(), Ok(None));
                    procs::kill(&mut d);
                    stats.store_faults_survived.insert(spec.clone(), alive);
                }
            }
            if let Some(h) = holder {
                let _ = h.join();
            }
        }
        Ok(())
    })();
    // Settle: the simulator without faults (same memory), the dispatcher
    // without failpoints, until nothing is due, in flight or uncertain.
    procs::kill(&mut sim);
    result?;
    let settle_start = Instant::now();
    let (mut sim, _) = env.start_sim(sim_port, plan.sim_seed, "", &webhook)?;
    let mut d = env.start_dispatcher(None)?;
    let store = Store::open(&db)?;
    let mut conn = open_connection(&db)?;
    let deadline = Instant::now() + settle_limit;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = Utc::now().timestamp_millis();
        // Settled: nothing due, in flight or uncertain in the ledger, and
        // everything the engine accepted has gone out (its queue drained).
        // "Due" looks a little ahead: a retry the last faulty wave backed
        // off for a second is still work, and it falls due while the
        // children stop, before the checker looks.
        let gone_out: std::collections::HashSet<String> =
            read_sent(&dir.join("sent.jsonl"))?.into_iter().map(|m| m.key).collect();
        let unsettled = ledger_view::intentions(&conn)?.iter().any(|i| match i.state.as_str() {
            "dispatching" | "uncertain" => true,
            "planned" => i.next_attempt_at_ms.unwrap_or(i.due_at_ms).max(i.due_at_ms) <= now + SETTLE_AHEAD_MS,
            "accepted" => !gone_out.contains(&i.key),
            _ => false,
        });
        if !unsettled {
            stats.settled = true;
            break;
        }
        if Instant::now() > deadline {
            break;
        }
    }
    stats.settle_seconds = settle_start.elapsed().as_secs_f64();
    procs::stop(&mut d, "TERM", Duration::from_secs(10));
    procs::stop(&mut sim, "INT", Duration::from_secs(5));
    hooks.stop();

    let verdict = check_run(&mut conn, &plan, dir)?;
    let integrity = store.integrity_check()?;
    stats.seconds = t0.elapsed().as_secs_f64();
    Ok(Report {
        stats,
        verdict,
        integrity,
        dir: dir.to_path_buf(),
    })
}

/// The webhook server of the run (engine events → ledger).
struct Hooks {
    rt: tokio::runtime::Runtime,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<crate::server::ServerHandle>,
}

impl Hooks {
    fn start(config_path: &Path, db: &Path, port: u16) -> Result<Hooks, ChaosError> {
        let text = std::fs::read_to_string(config_path).map_err(|e| ChaosError::Io(e.to_string()))?;
        let config = crate::config::Config::parse(&text, config_path).map_err(|e| ChaosError::Io(e.to_string()))?;
        let secrets = crate::server::Secrets {
            motor_webhook_secret: Some(procs::WEBHOOK_SECRET.to_string()),
            ..Default::default()
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| ChaosError::Io(format!("starting the webhook runtime: {e}")))?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let db = db.to_path_buf();
        let handle = rt.block_on(async move {
            let listener = crate::server::bind(&format!("127.0.0.1:{port}")).await?;
            let state = crate::server::AppState::new(config, crate::templates::Templates::embedded(), db, secrets)?;
            crate::server::spawn(state, listener, async move {
                let _ = rx.await;
            })
        });
        let handle = handle.map_err(|e| ChaosError::Io(format!("starting the webhook server: {e}")))?;
        Ok(Hooks {
            rt,
            stop: Some(tx),
            handle: Some(handle),
        })
    }

    fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), h.wait()).await });
        }
    }
}

/// Another connection takes the write lock (`BEGIN IMMEDIATE`) and keeps it:
/// the dispatcher meets `SQLITE_BUSY` until its busy timeout lets it in.
fn hold_write_lock(db: &Path, d: Duration) {
    if let Ok(mut s) = Store::open(db) {
        let _ = s.write(|_tx| {
            std::thread::sleep(d);
            Ok::<_, StoreError>(())
        });
    }
}

fn write(path: &Path, text: &str) -> Result<(), ChaosError> {
    std::fs::write(path, text).map_err(|e| ChaosError::Io(format!("writing {}: {e}", path.display())))
}

/// Gathers the ledger's view, the simulator's log and journal and the
/// harness's import timeline (all in the run's `dir`) and runs the checker.
pub fn check_run(conn: &mut Connection, plan: &Plan, dir: &Path) -> Result<Verdict, ChaosError> {
    let sent = read_sent(&dir.join("sent.jsonl"))?;
    let receipts = evidence::read_receipts(&dir.join("engine-state.jsonl"))?;
    let imports = evidence::read_imports(&dir.join("imports.jsonl"))?;
    // One read transaction: the four views are one snapshot of the ledger.
    let (intentions, changes, commitments, missing) = {
        let tx = conn.transaction()?;
        let mut missing = Vec::new();
        for e in &plan.event_ids {
            if !ledger_view::has_event(&tx, e)? {
                missing.push(e.clone());
            }
        }
        (
            ledger_view::intentions(&tx)?,
            ledger_view::version_changes(&tx)?,
            ledger_view::commitments(&tx)?,
            missing,
        )
    };
    let changes = evidence::change_commits(&changes, &imports);
    Ok(check::check(&Inputs {
        intentions: &intentions,
        changes: &changes,
        receipts: &receipts,
        commitments: &commitments,
        sent: &sent,
        expected: &plan.expected,
        missing_events: &missing,
        now_ms: Utc::now().timestamp_millis(),
    }))
}
