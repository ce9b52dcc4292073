//! Dispatch: 50,000 due intentions through the real dispatcher (claim with
//! validity, durable attempt, send, result and history), against the engine
//! simulator in this process (`unavez::sim::spawn`) or as a separate
//! `unavez sim` process; plus the due→accepted latency at a steady offered
//! load, and the reprocess dry run of a 50,000-intention day.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::Utc;
use unavez::channel::Channel;
use unavez::channel::motor::MotorChannel;
use unavez::config::{Config, QuietHours};
use unavez::dispatch::{Db, Services, Settings, dispatch_until_idle};
use unavez::store::{Store, open_connection};

use crate::ledger_shape::{self, LedgerShape};
use crate::report::percentile;

pub const API_KEY: &str = "bench-api-key";

/// The configuration the dispatch benchmarks run with: booking notices only
/// (every intention due now), no quiet hours or daily cap (they would defer
/// most of 50,000 messages to the same few recipients), and the dispatcher
/// sizes given.
pub fn config(concurrency: u32, batch: u32, poll_ms: u64) -> Config {
    let mut c = Config::default();
    c.policy.reminder_offsets_minutes = vec![];
    c.policy.confirm_reminder_offsets_minutes = vec![];
    c.policy.quiet_hours = Some(QuietHours {
        start: "00:00".into(),
        end: "00:00".into(),
    });
    c.policy.daily_cap_per_recipient = 0;
    c.dispatcher.concurrency = concurrency;
    c.dispatcher.batch_size = batch;
    c.dispatcher.poll_ms = poll_ms;
    c.channel.motor.instance_id = "clinica-bench".into();
    c.channel.motor.api_key_env = "UNAVEZ_BENCH_UNUSED".into();
    c
}

/// Ledger with `n` due booking notices, through the real import path.
pub fn prepare(path: &Path, prefix: &str, n: u64, cfg: &Config) -> anyhow::Result<()> {
    let r = crate::reserve::run_into(path, prefix, n, 1000, cfg)?;
    if r.intentions != n {
        bail!("expected {n} planned intentions, the import planned {}", r.intentions);
    }
    Ok(())
}

pub struct Throughput {
    pub accepted: u64,
    pub seconds: f64,
    pub other: String,
}

impl Throughput {
    pub fn per_s(&self) -> f64 {
        self.accepted as f64 / self.seconds
    }
}

pub fn channel(cfg: &Config, base_url: String) -> anyhow::Result<Arc<dyn Channel>> {
    let mut m = cfg.channel.motor.clone();
    m.base_url = base_url;
    Ok(Arc::new(MotorChannel::with_api_key(&m, API_KEY)?))
}

/// Runs `dispatch_until_idle` over the prepared ledger.
async fn run_until_idle(db_path: &Path, cfg: &Config, ch: Arc<dyn Channel>) -> anyhow::Result<Throughput> {
    let db = Db::open(db_path)?;
    let settings = Arc::new(Settings::from_config(cfg));
    let t = Instant::now();
    let cpu = process_cpu_seconds();
    let (report, _) = dispatch_until_idle(db, settings, ch).await?;
    let seconds = t.elapsed().as_secs_f64();
    // Every thread of this process (the dispatcher, its blocking pool and,
    // in process, the simulator): on two shared cores the wall clock also
    // measures other work, the CPU time much less so.
    let cpu = match cpu.zip(process_cpu_seconds()) {
        Some((a, b)) => format!(
            "; {:.2} s on a CPU ({:.0} µs per message)",
            b - a,
            (b - a) * 1e6 / report.accepted.max(1) as f64
        ),
        None => String::new(),
    };
    Ok(Throughput {
        accepted: report.accepted,
        seconds,
        other: format!(
            "claimed {} failed {} uncertain {} retried {} store errors {}{cpu}",
            report.claimed, report.failed, report.uncertain, report.retried, report.store_errors
        ),
    })
}

/// This process's CPU time so far (user + system, `/proc/self/stat`, in
/// clock ticks of 10 ms), on Linux.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// The simulator in this process (HTTP on loopback inside one runtime).
pub fn in_process(db_path: &Path, cfg: &Config) -> anyhow::Result<Throughput> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let sim = unavez::sim::spawn(unavez::sim::SimOptions::default()).await?;
        let ch = channel(cfg, sim.base_url())?;
        let out = run_until_idle(db_path, cfg, ch).await;
        sim.shutdown().await;
        out
    })
}

/// A running `unavez sim` child process.
pub struct SimProcess {
    child: Child,
    pub base_url: String,
}

impl SimProcess {
    pub fn start(unavez: &Path) -> anyhow::Result<SimProcess> {
        let mut child = Command::new(unavez)
            .args(["sim", "--listen", "127.0.0.1:0"])
            .env("UNAVEZ_MOTOR_API_KEY", API_KEY)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {} sim (build it with benches/run.sh)", unavez.display()))?;
        let out = child.stdout.take().context("sim stdout")?;
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .context("reading the sim's address")?;
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .with_context(|| format!("unexpected sim banner {line:?}"))?;
        Ok(SimProcess {
            base_url: format!("http://{addr}"),
            child,
        })
    }
}

impl SimProcess {
    /// The simulator's own count of commands created, and of keys
    /// presented again (`GET /sim/stats`): the judge of "each once".
    pub fn created_and_repeated(&self) -> anyhow::Result<(u64, u64)> {
        let url = format!("{}/sim/stats", self.base_url);
        let stats: serde_json::Value = tokio::runtime::Runtime::new()?
            .block_on(async { reqwest::get(&url).await?.error_for_status()?.json().await })?;
        let n = |k: &str| {
            stats[k]
                .as_u64()
                .with_context(|| format!("no {k} in /sim/stats: {stats}"))
        };
        Ok((n("created")?, n("repeated")?))
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Throughput against `unavez sim` in its own process.
pub fn over_http(db_path: &Path, cfg: &Config, sim: &SimProcess) -> anyhow::Result<Throughput> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let ch = channel(cfg, sim.base_url.clone())?;
        run_until_idle(db_path, cfg, ch).await
    })
}

/// Due→accepted latency at a steady offered load: intentions fall due one
/// every `1/rate` s, the dispatcher runs as in `serve`; p50 and p99 in ms.
pub fn latency(db_path: &Path, cfg: &Config, sim: &SimProcess, rate: f64) -> anyhow::Result<(f64, f64, usize)> {
    Store::open(db_path)?;
    let mut conn = open_connection(db_path)?;
    let start = Utc::now().timestamp_millis() + 500;
    let step_us = (1_000_000.0 / rate) as i64;
    let n = ledger_shape::write(&mut conn, |c| ledger_shape::spread_due(c, start, step_us))?;
    let rt = tokio::runtime::Runtime::new()?;
    let deadline = Instant::now() + Duration::from_secs(120 + (n as f64 / rate) as u64);
    rt.block_on(async {
        let ch = channel(cfg, sim.base_url.clone())?;
        let services = Services::start(db_path, Settings::from_config(cfg), ch)?;
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let planned = ledger_shape::count_state(&conn, "planned")?;
            let dispatching = ledger_shape::count_state(&conn, "dispatching")?;
            if planned + dispatching == 0 || Instant::now() > deadline {
                break;
            }
        }
        services.stop().await?;
        Ok::<_, anyhow::Error>(())
    })?;
    let mut v: Vec<f64> = ledger_shape::due_to_accepted_ms(&conn)?
        .into_iter()
        .map(|x| x as f64)
        .collect();
    v.sort_by(f64::total_cmp);
    Ok((percentile(&v, 50.0), percentile(&v, 99.0), v.len()))
}

/// Reprocess dry run over one day of `n` intentions (half planned and due,
/// the rest in every other state); returns seconds and items planned.
pub fn reprocess_dry_run(path: &Path, n: u64) -> anyhow::Result<(f64, usize)> {
    let cfg = config(16, 64, 500);
    let now = Utc::now();
    {
        Store::open(path)?;
        let mut conn = open_connection(path)?;
        let shape = LedgerShape {
            contacts: n / 5 + 1,
            past_days: 1,
            future_days: 1,
            now,
            tz: cfg.tz(),
            total: n,
        };
        ledger_shape::write(&mut conn, |c| ledger_shape::generate_contacts(c, shape.contacts, now))?;
        ledger_shape::write(&mut conn, |c| ledger_shape::generate_intentions(c, &shape, 0, n))?;
        ledger_shape::write(&mut conn, |c| ledger_shape::set_day(c, "2026-11-30"))?;
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let db = Db::open(path)?;
        let settings = Arc::new(Settings::from_config(&cfg));
        let t = Instant::now();
        let items =
            unavez::dispatch::reprocess::plan(&db, &settings, "2026-11-30".parse().expect("a day"), &[]).await?;
        Ok((t.elapsed().as_secs_f64(), items.len()))
    })
}
