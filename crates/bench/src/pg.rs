//! The PostgreSQL ledger's figures, each beside a baseline measured on the
//! same server in the same run: raw inserts and a bare `SKIP LOCKED` job
//! queue (a hand-written floor, not a product), then reserve + plan,
//! dispatch in-process against River on PostgreSQL (the peer: `riverqueue`
//! with its PostgreSQL driver, see [`crate::pgversus`]), dispatch with one
//! and three `unavez dispatch` processes against `unavez sim`, and the
//! console's screens at a million intentions. Every measurement gets a
//! schema of its own, dropped after.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, bail};
use chrono::{DateTime, Utc};
use unavez::config::Config;
use unavez_testkit::PgSchema;

use crate::dispatch::{API_KEY, SimProcess};
use crate::report::{Figure, Target};
use crate::wire::{Relay, Seen};

/// Rows per second of the bare baselines.
pub struct Baselines {
    pub raw_batched_per_s: f64,
    pub raw_rows: u64,
    pub queue_per_s: f64,
    pub queue_jobs: u64,
    pub queue_workers: usize,
}

pub(crate) fn client(url: &str) -> anyhow::Result<postgres::Client> {
    // The synchronous client blocks on a runtime of its own; the bench's
    // main thread has none, so it may.
    postgres::Client::connect(url, postgres::NoTls).with_context(|| format!("connecting to {url}"))
}

/// Runs `work` on `n` threads at once (one connection each) and adds up
/// what they counted; the first error is the result.
pub(crate) fn sum_of_workers(n: usize, work: impl Fn(usize) -> anyhow::Result<u64> + Sync) -> anyhow::Result<u64> {
    std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = (0..n).map(|i| s.spawn(move || work(i))).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench worker"))
            .sum::<anyhow::Result<u64>>()
    })
}

/// Durable inserts of the SQLite raw baseline's rows (one prepared
/// statement per row, 1,000 rows per commit), then a job queue worked by
/// `workers` connections: lock up to 128 available jobs with `FOR UPDATE
/// SKIP LOCKED`, mark them done, commit (fetch + complete, no work).
pub fn baselines(base: &str, rows: u64, jobs: u64, workers: usize) -> anyhow::Result<Baselines> {
    let schema = PgSchema::in_database(base);
    let mut c = client(&schema.url)?;
    c.batch_execute(
        "CREATE TABLE bench_raw (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL UNIQUE, payload TEXT NOT NULL, at BIGINT NOT NULL);
         CREATE TABLE bench_jobs (id BIGSERIAL PRIMARY KEY, state SMALLINT NOT NULL DEFAULT 0, payload TEXT NOT NULL);
         CREATE INDEX bench_jobs_available ON bench_jobs(id) WHERE state = 0;",
    )?;
    let payload = "x".repeat(crate::ledger_shape::RAW_ROW_BYTES);
    let t = Instant::now();
    let mut n = 0u64;
    while n < rows {
        let mut tx = c.transaction()?;
        let stmt = tx.prepare("INSERT INTO bench_raw(key, payload, at) VALUES ($1, $2, $3)")?;
        for j in n..(n + 1000).min(rows) {
            tx.execute(&stmt, &[&format!("raw-{j:09}:batched:v1"), &payload, &(j as i64)])?;
        }
        tx.commit()?;
        n = (n + 1000).min(rows);
    }
    let raw_batched_per_s = rows as f64 / t.elapsed().as_secs_f64();

    c.execute(
        "INSERT INTO bench_jobs(payload) SELECT 'job ' || g FROM generate_series(1, $1::bigint) AS g",
        &[&(jobs as i64)],
    )?;
    let t = Instant::now();
    let done = sum_of_workers(workers, |_| work_queue(&schema.url))?;
    let queue_per_s = done as f64 / t.elapsed().as_secs_f64();
    if done != jobs {
        bail!("the SKIP LOCKED queue finished {done} of {jobs} jobs");
    }
    Ok(Baselines {
        raw_batched_per_s,
        raw_rows: rows,
        queue_per_s,
        queue_jobs: jobs,
        queue_workers: workers,
    })
}

fn work_queue(url: &str) -> anyhow::Result<u64> {
    let mut c = client(url)?;
    let mut done = 0u64;
    loop {
        let mut tx = c.transaction()?;
        let n = tx.execute(
            "UPDATE bench_jobs SET state = 1 WHERE id IN (
                 SELECT id FROM bench_jobs WHERE state = 0 ORDER BY id LIMIT 128 FOR UPDATE SKIP LOCKED)",
            &[],
        )?;
        tx.commit()?;
        if n == 0 {
            // Nothing available: done, unless another worker still holds
            // locked rows it will complete.
            let left: i64 = c
                .query_one("SELECT count(*) FROM bench_jobs WHERE state = 0", &[])?
                .get(0);
            if left == 0 {
                return Ok(done);
            }
        }
        done += n;
    }
}

/// Reserve + plan into a fresh PostgreSQL ledger: the import path, as the
/// SQLite row measures it; then its same-schema floor (COPY of the same
/// rows into another fresh ledger, [`crate::floor`]).
pub fn reserve(base: &str, events: u64) -> anyhow::Result<(crate::reserve::Reserve, crate::floor::Floor)> {
    let schema = PgSchema::in_database(base);
    let (r, bounds) = crate::reserve::run_recorded(
        &PathBuf::from(&schema.url),
        "cita",
        events,
        1000,
        &Config::default(),
        true,
    )?;
    let dst = PgSchema::in_database(base);
    let dst_path = PathBuf::from(&dst.url);
    drop(unavez::store::Store::open(&dst_path)?);
    let floor = crate::floor::run(bounds.context("recorded")?, &dst_path)?;
    Ok((r, floor))
}

/// `processes` `unavez dispatch --until-idle` processes started together on
/// one PostgreSQL ledger of `n` due notices, against `unavez sim`; the
/// figure is accepted sends per second, from the first start to the last
/// exit, and the simulator's count must equal `n` (each sent once).
pub fn dispatch(
    base: &str,
    unavez: &Path,
    dir: &Path,
    n: u64,
    processes: usize,
    cfg: &Config,
    relay: Option<&Relay>,
) -> anyhow::Result<(f64, String, Seen)> {
    let schema = PgSchema::in_database(base);
    let db = PathBuf::from(&schema.url);
    let tag = if relay.is_some() { "w" } else { "" };
    crate::dispatch::prepare(&db, &format!("citapg{tag}{processes}"), n, cfg)?;
    // The children connect through the relay when counting (the import
    // above did not).
    let db = match relay {
        Some(r) => PathBuf::from(r.url(&schema.url)?),
        None => db,
    };
    let before = relay.map(Relay::seen).unwrap_or_default();
    let sim = SimProcess::start(unavez)?;
    let mut c = cfg.clone();
    c.database = PathBuf::new();
    c.channel.motor.base_url = sim.base_url.clone();
    c.channel.motor.api_key_env = "UNAVEZ_MOTOR_API_KEY".into();
    let config = dir.join(format!("pg-dispatch{tag}-{processes}.toml"));
    std::fs::write(&config, toml::to_string(&c)?).with_context(|| format!("writing {}", config.display()))?;
    let t = Instant::now();
    let children = (0..processes)
        .map(|_| {
            Command::new(unavez)
                .arg("--config")
                .arg(&config)
                .arg("--db")
                .arg(&db)
                .args(["dispatch", "--until-idle", "--json"])
                .env("UNAVEZ_MOTOR_API_KEY", API_KEY)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .context("starting unavez dispatch")
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut accepted = 0u64;
    let mut each = Vec::new();
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("unavez dispatch failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("dispatch --json printed {}", String::from_utf8_lossy(&out.stdout)))?;
        let a = report["dispatch"]["accepted"].as_u64().unwrap_or(0);
        accepted += a;
        each.push(a.to_string());
    }
    let seconds = t.elapsed().as_secs_f64();
    let seen = relay.map(Relay::seen).unwrap_or_default() - before;
    let (created, repeated) = sim.created_and_repeated()?;
    if accepted != n || created != n || repeated != 0 {
        bail!(
            "{processes} dispatchers accepted {accepted}; the simulator created {created} commands of {n}, {repeated} keys presented again"
        );
    }
    Ok((
        accepted as f64 / seconds,
        format!(
            "{n} due notices in {seconds:.2} s by {processes} process(es) (accepted each: {}); the simulator created {created} commands, no key presented twice",
            each.join(" + ")
        ),
        seen,
    ))
}

/// The console's screens on a PostgreSQL copy of the SQLite ledger `from`
/// (generated by the console section): `unavez ledger copy`'s library
/// path, `VACUUM ANALYZE`, then the same probe in a fresh process. Returns
/// the probe and the seconds the copy and the vacuum took.
pub fn console(
    base: &str,
    from: &Path,
    now: DateTime<Utc>,
    samples: usize,
) -> anyhow::Result<(crate::console::Probe, (f64, f64), PgSchema)> {
    let schema = PgSchema::in_database(base);
    let url = unavez_ledger::pg::PgUrl::parse(&schema.url)?;
    let t = Instant::now();
    unavez_ledger::copy::copy_sqlite_to_pg(from, &url, &mut |_, _, _| {})?;
    let copy_s = t.elapsed().as_secs_f64();
    // What autovacuum does to a freshly loaded table on a server left with
    // its defaults, within a minute of the copy: statistics, the visibility
    // map (index-only scans) and the search index's pending list.
    // The CI server this usually runs on has autovacuum off, so without it
    // the console would be timed on a table no running server keeps.
    let mut c = client(&schema.url)?;
    let t = Instant::now();
    c.batch_execute("VACUUM ANALYZE")?;
    let vacuum_s = t.elapsed().as_secs_f64();
    let probe = crate::console::probe_in_child(Path::new(&schema.url), now, samples)?;
    Ok((probe, (copy_s, vacuum_s), schema))
}

/// `pg-console-ledger`: the console section's ledger, kept (its URL and
/// the generation's clock printed for `probe-console`).
pub fn kept_console_ledger(base: &str, dir: &Path, total: u64) -> anyhow::Result<std::process::ExitCode> {
    let now = Utc::now();
    let from = dir.join("pg-console.db");
    crate::console::generate(&from, total, now)?;
    let (p, _, schema) = console(base, &from, now, 50)?;
    eprintln!("{p:?}");
    println!("--db '{}' --now-ms {}", schema.url, now.timestamp_millis());
    std::mem::forget(schema);
    Ok(std::process::ExitCode::SUCCESS)
}

/// The PostgreSQL rows of the table, in `run` (section `pg`).
pub fn rows(run: &mut crate::Run<'_>, dir: &Path, unavez: &Path, river: &Path) -> anyhow::Result<()> {
    let base = run.args.pg.clone();
    run.say(&format!(
        "postgresql: baselines on {}",
        unavez_ledger::pg::PgUrl::parse(&base)
            .map(|u| u.to_string())
            .unwrap_or_default()
    ));
    let workers = 8;
    let b = if run.wants_pg("baselines") {
        let b = baselines(&base, run.scale(100_000), run.scale(50_000), workers)?;
        run.figures.push(
            Figure::new("pg raw: 1000 rows per commit", b.raw_batched_per_s, "rows/s").note(format!(
                "{} rows of the SQLite raw row's shape, one prepared INSERT each",
                b.raw_rows
            )),
        );
        run.figures.push(
            Figure::new("pg queue: SKIP LOCKED fetch + complete", b.queue_per_s, "jobs/s").note(format!(
                "{} no-op jobs, {} connections, 128 locked per transaction (a hand-written floor; the peer is River on PostgreSQL below)",
                b.queue_jobs, b.queue_workers
            )),
        );
        Some(b)
    } else {
        None
    };

    if run.wants_pg("reserve") {
        let events = run.scale(100_000);
        run.say(&format!("postgresql: reserve + plan, {events} booking events"));
        let (r, floor) = reserve(&base, events)?;
        let mut f = crate::reserve_figure("pg reserve + plan", &r, &floor);
        if let Some(b) = &b {
            f.note.push_str(&format!(
                "; raw batched (bare table, one INSERT per row) {} rows/s",
                crate::report::num(b.raw_batched_per_s)
            ));
        }
        run.figures.push(f);
    }

    let (conc, batch) = (run.args.dispatch_concurrency, run.args.dispatch_batch);
    let cfg = crate::dispatch::config(conc, batch, 20);
    if run.wants_pg("versus") {
        versus(run, dir, river, &base, &cfg, conc, batch)?;
    }
    if run.wants_pg("http") {
        http(run, dir, unavez, &base, &cfg, b.as_ref().map(|b| b.queue_per_s))?;
    }
    if run.wants_pg("wire") {
        round_trips(run, &base, dir, unavez, &cfg)?;
    }
    if run.wants_pg("console") {
        console_rows(run, dir, &base)?;
    }
    Ok(())
}

/// In-process dispatch on PostgreSQL against River on PostgreSQL.
fn versus(
    run: &mut crate::Run<'_>,
    dir: &Path,
    river: &Path,
    base: &str,
    cfg: &Config,
    conc: u32,
    batch: u32,
) -> anyhow::Result<()> {
    let plan = crate::pgversus::PgPlan {
        base,
        dir,
        river: river.exists().then(|| river.to_path_buf()),
        sweep_jobs: run.scale(20_000),
        full_jobs: run.scale(50_000),
        cfg: cfg.clone(),
    };
    let outcome = crate::pgversus::run(&plan, &|m| run.say(m))?;
    let (river_fig, figs) = crate::pgversus::figures(&outcome, conc, batch);
    let river_fig = river_fig.unwrap_or_else(|| {
        Figure::missing(
            "peer: river on PostgreSQL",
            "jobs/s",
            None,
            format!("no peer binary at {} (benches/run.sh builds it)", river.display()),
        )
    });
    // Beside the River SQLite row, when that section ran.
    match run.figures.iter().position(|f| f.name.starts_with("peer: river work")) {
        Some(i) => run.figures.insert(i + 1, river_fig),
        None => run.figures.push(river_fig),
    }
    run.figures.extend(figs);
    Ok(())
}

/// Dispatch over HTTP to `unavez sim` by 1 and 3 processes.
fn http(
    run: &mut crate::Run<'_>,
    dir: &Path,
    unavez: &Path,
    base: &str,
    cfg: &Config,
    queue_per_s: Option<f64>,
) -> anyhow::Result<()> {
    for processes in [1, 3] {
        let n = run.scale(30_000);
        run.say(&format!(
            "postgresql: dispatch, {processes} process(es), {n} due notices"
        ));
        let (per_s, note, _) = dispatch(base, unavez, dir, n, processes, cfg, None)?;
        let mut f = Figure::new(
            format!("pg dispatch, {processes} process(es), HTTP to `unavez sim`"),
            per_s,
            "msg/s",
        );
        if let Some(q) = queue_per_s {
            f = f.baseline_in("pg SKIP LOCKED queue", q, "jobs/s");
        }
        run.figures.push(f.note(note));
    }
    Ok(())
}

/// The console's screens on a PostgreSQL ledger.
fn console_rows(run: &mut crate::Run<'_>, dir: &Path, base: &str) -> anyhow::Result<()> {
    let total = run.scale(1_000_000);
    let now = Utc::now();
    let from = dir.join("pg-console.db");
    run.say(&format!(
        "postgresql: console, generating {total} intentions and copying them in"
    ));
    crate::console::generate(&from, total, now)?;
    let (p, (copy_s, vacuum_s), _schema) = console(base, &from, now, if run.args.quick { 50 } else { 200 })?;
    for (name, p50, p95, n) in &p.queries {
        run.figures.push(
            Figure::new(format!("pg console p95: {name}"), *p95, "ms")
                .baseline("point lookup p95", p.point_p95_ms)
                .target(Target::AtMost(if name.starts_with("search") { 20.0 } else { 10.0 }))
                .note(format!(
                    "p50 {p50:.2} ms over {n} samples after {} warm-up samples, at {} intentions (copied in by `ledger copy` in {copy_s:.0} s, then VACUUM ANALYZE in {vacuum_s:.0} s)",
                    p.warmup, p.intentions
                )),
        );
    }
    // The floor every screen stands on: one prepared statement, one row by
    // its primary key, one round trip to the server.
    run.figures.push(
        Figure::new("pg console: point lookup p95", p.point_p95_ms, "ms").note(format!(
            "p50 {:.2} ms: one intention by id (the baseline of the rows above)",
            p.point_p50_ms
        )),
    );
    run.figures.push(
        Figure::new("pg console: time to first frame", p.first_frame_ms, "ms")
            .baseline("open ledger", p.open_ms)
            .target(Target::AtMost(300.0))
            .note(p.first_frame_kind.clone()),
    );
    let _ = std::fs::remove_file(&from);
    Ok(())
}

/// Round trips and statements per message for one and three `unavez
/// dispatch` processes over HTTP, counted by a relay on the wire
/// ([`crate::wire`]): scaling out must not cost more per message.
fn round_trips(run: &mut crate::Run<'_>, base: &str, dir: &Path, unavez: &Path, cfg: &Config) -> anyhow::Result<()> {
    let relay = Relay::start(base)?;
    let n = run.scale(10_000);
    let (mut per, mut net) = (Vec::new(), Vec::new());
    for processes in [1, 3] {
        // What starting and stopping costs whatever the work: each process
        // connects, checks the schema, reconciles before and after, polls
        // statuses and writes its heartbeat rows. Measured on an empty
        // ledger, so that the per-message figure can be read without it.
        run.say(&format!(
            "postgresql: round trips of {processes} process(es) with nothing due (start and stop)"
        ));
        let (_, _, idle) = dispatch(base, unavez, dir, 0, processes, cfg, Some(&relay))?;
        run.say(&format!(
            "postgresql: round trips per message, {processes} process(es), {n} due notices through a counting relay"
        ));
        let (per_s, _, seen) = dispatch(base, unavez, dir, n, processes, cfg, Some(&relay))?;
        let rt = seen.round_trips as f64 / n as f64;
        let st = seen.statements as f64 / n as f64;
        let rt_net = seen.round_trips.saturating_sub(idle.round_trips) as f64 / n as f64;
        per.push(rt);
        net.push(rt_net);
        let mut f = Figure::new(
            format!("pg round trips per message, {processes} process(es) over HTTP"),
            rt,
            "round trips",
        );
        let mut g = Figure::new(
            format!("pg round trips per message net of start/stop, {processes} process(es) over HTTP"),
            rt_net,
            "round trips",
        );
        if let ([one, ..], [one_net, ..]) = (&per[..], &net[..])
            && processes > 1
        {
            // Scaling out must not cost more per message than one process.
            f = f.baseline("1 process", *one).target(Target::AtMost(*one));
            g = g.baseline("1 process", *one_net).target(Target::AtMost(*one_net));
        }
        run.figures.push(f.note(format!(
            "{n} messages: {} round trips, {} statements ({st:.2} per message) on {} connections, counted on the wire between the dispatchers and the server; {per_s:.0} msg/s through the relay",
            seen.round_trips, seen.statements, seen.connections
        )));
        run.figures.push(g.note(format!(
            "the same run less {} round trips ({} statements, {} connections) that {processes} process(es) cost with nothing due: start (schema check, reconciliation, heartbeat) and stop (reconciliation, status poll, last heartbeat)",
            idle.round_trips, idle.statements, idle.connections
        )));
    }
    Ok(())
}
