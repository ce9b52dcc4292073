//! `unavez-bench`: unavez's figures beside the physical limit of this disk
//! and a peer job queue, measured in one run. See `docs/bench-log.md` and `docs/testing.md`.
//!
//! ```sh
//! benches/run.sh            # builds release binaries (root + peer) and runs this
//! ```
//!
//! Every SQLite file uses the production pragmas (WAL, `synchronous=FULL`,
//! busy timeout) because it is opened through `unavez::store` (`Store` or
//! `open_connection`).
//!
//! | module | measures / holds |
//! |---|---|
//! | `raw` | the disk's limit: durable inserts of intention-sized rows |
//! | `reserve` | ingest: reserve + plan, intentions per second |
//! | `floor` | reserve + plan's baseline: the same rows written again into the same schema in bulk |
//! | `import` | `unavez import` of one agenda as CSV and as JSONL, and their ratio |
//! | `dispatch` | the dispatcher in-process and over HTTP, latency at a steady load, reprocess |
//! | `peer` | the river peer queue, one run |
//! | `versus` | unavez dispatch against river: each side's sweep, three interleaved repeats, the median ratio |
//! | `webhook` | status webhooks applied per second |
//! | `pg` | the PostgreSQL ledger: raw and `SKIP LOCKED` baselines, reserve + plan, dispatch with 1 and 3 processes, the console at a million intentions |
//! | `pgversus` | unavez dispatch on PostgreSQL (1 and 3 dispatchers, in-process simulator) against River on PostgreSQL, interleaved |
//! | `pgfloor` | the rows a dispatched message writes, alone, in bare SQL on the same schema: the most any dispatcher keeping that evidence could reach |
//! | `wire` | a counting relay between `unavez dispatch` processes and PostgreSQL: round trips and statements per message |
//! | `console`, `screens` | a generated million-row ledger and the console's screens on it |
//! | `ledger_shape` | the raw baseline and the fast ledger generator (bench-only SQL) |
//! | `report` | the figures table |
//!
//! **Layering:** a dev crate (`publish = false`) on top of the `unavez`
//! facade; `cargo install` never installs it.

mod console;
mod dispatch;
mod floor;
mod import;
mod ledger_shape;
mod peer;
mod pg;
mod pgfloor;
mod pgversus;
mod raw;
mod report;
mod reserve;
mod screens;
mod versus;
mod webhook;
mod wire;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::{TimeZone, Utc};
use clap::{Parser, Subcommand};

use report::{Figure, Target};

/// The product's allocator (see `src/main.rs`), so the in-process figures
/// measure what `unavez` runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "unavez-bench",
    about = "unavez figures against the disk's limit and a peer queue"
)]
struct Args {
    /// Directory for the benchmark databases (default: a new temp dir, removed after).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Ten times smaller sizes, to check the harness itself quickly.
    #[arg(long)]
    quick: bool,
    /// Only these sections (comma-separated): raw, reserve, import, console, dispatch, http, webhook, reprocess, peer, pg.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The peer binary (default: benches/river/target/release/unavez-river-peer).
    #[arg(long)]
    river_bin: Option<PathBuf>,
    /// The `unavez` binary for `unavez sim` (default: beside this binary).
    #[arg(long)]
    unavez_bin: Option<PathBuf>,
    /// Dispatcher concurrency (sends in flight) for the HTTP and latency
    /// sections, and for the in-process dispatch with `--no-sweep`.
    #[arg(long, default_value_t = 128)]
    dispatch_concurrency: u32,
    /// Dispatcher batch size (intentions claimed per transaction), as above.
    #[arg(long, default_value_t = 128)]
    dispatch_batch: u32,
    /// Dispatch in-process at --dispatch-concurrency/--dispatch-batch
    /// instead of at the best configuration of a sweep.
    #[arg(long)]
    no_sweep: bool,
    /// The PostgreSQL server of the `pg` section (a scratch schema per
    /// measurement is made and dropped there).
    #[arg(
        long,
        env = "UNAVEZ_BENCH_PG",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pg: String,
    /// Only these parts of the `pg` section (comma-separated): baselines,
    /// reserve, versus (in-process dispatch against River and the dispatch
    /// floor), http, wire
    /// (round trips per message), console. Default: all of them.
    #[arg(long, value_delimiter = ',')]
    pg_parts: Vec<String>,
    /// Print the table as Markdown only (no progress lines).
    #[arg(long)]
    quiet: bool,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// (internal) The console probe, run in a fresh process.
    #[command(hide = true)]
    ProbeConsole {
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        now_ms: i64,
        #[arg(long)]
        samples: usize,
    },
    /// (internal) A generated ledger of `intentions` copied into a schema
    /// of `--pg` that is kept, for probing the console on PostgreSQL again
    /// and again with `probe-console --db URL --now-ms N`.
    #[command(hide = true)]
    PgConsoleLedger {
        #[arg(long)]
        intentions: u64,
        #[arg(long)]
        dir: PathBuf,
    },
}

/// A cheap deterministic hash (shared by the sections).
pub fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn main() -> ExitCode {
    let started = Instant::now();
    let args = Args::parse();
    let result = match &args.cmd {
        Some(Cmd::ProbeConsole { db, now_ms, samples }) => probe_console(started, db, *now_ms, *samples),
        Some(Cmd::PgConsoleLedger { intentions, dir }) => pg::kept_console_ledger(&args.pg, dir, *intentions),
        None => bench(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn probe_console(started: Instant, db: &std::path::Path, now_ms: i64, samples: usize) -> anyhow::Result<ExitCode> {
    let now = Utc.timestamp_millis_opt(now_ms).single().context("bad --now-ms")?;
    let p = screens::probe(started, db, now, samples)?;
    println!("{}", serde_json::to_string(&p)?);
    Ok(ExitCode::SUCCESS)
}

struct Run<'a> {
    args: &'a Args,
    figures: Vec<Figure>,
}

impl Run<'_> {
    fn wants(&self, section: &str) -> bool {
        self.args.only.is_empty() || self.args.only.iter().any(|s| s == section)
    }

    /// Whether the `pg` section runs `part` (see `--pg-parts`).
    fn wants_pg(&self, part: &str) -> bool {
        self.args.pg_parts.is_empty() || self.args.pg_parts.iter().any(|s| s == part)
    }
    fn say(&self, msg: &str) {
        if !self.args.quiet {
            eprintln!("[{}] {msg}", Utc::now().format("%H:%M:%S"));
        }
    }
    fn scale(&self, n: u64) -> u64 {
        if self.args.quick { (n / 10).max(1) } else { n }
    }
}

/// The `unavez` binary for `unavez sim` and `unavez dispatch` children.
fn unavez_bin(args: &Args) -> PathBuf {
    args.unavez_bin.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("unavez")))
            .unwrap_or_default()
    })
}

/// Reserve + plan beside its same-schema floor (issue 29: at most twice
/// the floor's time for the same rows, so at least half its rate).
pub fn reserve_figure(name: &str, r: &reserve::Reserve, floor: &floor::Floor) -> Figure {
    let floor_rate = r.intentions as f64 / floor.seconds;
    Figure::new(name, r.intentions_per_s(), "intentions/s")
        .baseline("same rows, same schema, bulk writes", floor_rate)
        .target(Target::AtLeast(0.5 * floor_rate))
        .note(format!(
            "{} events -> {} intentions in {:.2} s ({:.0} events/s), 1,000 events per transaction; floor: the same {} rows ({}) in {} transactions in {:.2} s, {:.2}x of its rate (target >= 0.5x)",
            r.events,
            r.intentions,
            r.seconds,
            r.events as f64 / r.seconds,
            floor.rows,
            floor.summary(),
            floor.transactions,
            floor.seconds,
            floor.seconds / r.seconds
        ))
}

/// The River peer binary (`benches/river`).
fn river_bin(args: &Args) -> PathBuf {
    args.river_bin.clone().unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../benches/river/target/release/unavez-river-peer")
    })
}

fn bench(args: &Args) -> anyhow::Result<ExitCode> {
    let (dir, remove_after) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("unavez-bench-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut run = Run {
        args,
        figures: Vec::new(),
    };
    run.say(&format!("databases in {}", dir.display()));

    // Raw baseline first: everything else is compared to it.
    let mut raw_single: Option<f64> = None;
    let mut raw_batched = None;
    if run.wants("raw") || run.wants("reserve") || run.wants("dispatch") || run.wants("webhook") {
        run.say("raw baseline: durable single-row and batched inserts");
        let r = raw::run(
            &dir,
            Duration::from_secs(if args.quick { 1 } else { 4 }),
            run.scale(100_000),
            1000,
        )?;
        raw_single = Some(r.single_per_s);
        raw_batched = Some(r.batched_per_s);
        run.figures.push(
            Figure::new("raw: 1 row per durable commit", r.single_per_s, "rows/s").note(format!(
                "{} rows of {} B, WAL + synchronous=FULL (one fsync each)",
                r.single_rows,
                ledger_shape::RAW_ROW_BYTES
            )),
        );
        run.figures.push(
            Figure::new(format!("raw: {} rows per commit", r.batch), r.batched_per_s, "rows/s")
                .baseline("1 row/commit", r.single_per_s)
                .note(format!("{} rows", r.batched_rows)),
        );
    }

    if run.wants("reserve") {
        let events = run.scale(100_000);
        run.say(&format!("reserve + plan: {events} booking events"));
        let (r, bounds) = reserve::run(&dir, events, 1000)?;
        let floor_db = dir.join("reserve-floor.db");
        drop(unavez::store::Store::open(&floor_db)?);
        run.say("reserve + plan: the same rows again, multi-row INSERT into the same schema");
        let floor = floor::run(bounds, &floor_db)?;
        let mut f = reserve_figure("reserve + plan", &r, &floor);
        if let Some(b) = raw_batched {
            f.note
                .push_str(&format!("; raw batched (bare table) {} rows/s", report::num(b)));
        }
        let cpu = r
            .cpu_seconds
            .map(|c| {
                format!(
                    "; {c:.2} s on a CPU ({:.1} µs per intention)",
                    c * 1e6 / r.intentions as f64
                )
            })
            .unwrap_or_default();
        f.note.push_str(&cpu);
        run.figures.push(f);
    }

    if run.wants("import") {
        let rows = run.scale(200_000);
        run.say(&format!("import: one {rows}-row agenda as JSONL, then as CSV"));
        let r = import::run(&dir, rows)?;
        run.figures.push(
            Figure::new(format!("import CSV ({} rows)", r.rows), r.csv_s, "s")
                .baseline("same rows as JSONL", r.jsonl_s)
                // Issue 27: CSV within 2x of JSONL (it was quadratic).
                .target(Target::AtMost(2.0 * r.jsonl_s))
                .note(format!(
                    "{} events stored from each file; JSONL {:.2} s, CSV {:.2} s ({:.2}x)",
                    r.stored,
                    r.jsonl_s,
                    r.csv_s,
                    r.csv_s / r.jsonl_s
                )),
        );
    }

    if run.wants("console") {
        let total = run.scale(1_000_000);
        let now = Utc::now();
        let db = dir.join("console.db");
        run.say(&format!("console: generating {total} intentions"));
        let gen_s = console::generate(&db, total, now)?;
        run.say(&format!(
            "console: generated in {gen_s:.1} s; probing in a fresh process"
        ));
        let p = console::probe_in_child(&db, now, if args.quick { 50 } else { 200 })?;
        for (name, p50, p95, n) in &p.queries {
            run.figures.push(
                Figure::new(format!("console p95: {name}"), *p95, "ms")
                    .baseline("point lookup p95", p.point_p95_ms)
                    // Issue 10: a patient search keeps p95 within 20 ms.
                    .target(Target::AtMost(if name.starts_with("search") { 20.0 } else { 10.0 }))
                    .note(format!(
                        "p50 {p50:.2} ms over {n} samples after {} warm-up samples, at {} intentions",
                        p.warmup, p.intentions
                    )),
            );
        }
        run.figures.push(
            Figure::new("console: time to first frame", p.first_frame_ms, "ms")
                .baseline("open ledger", p.open_ms)
                .target(Target::AtMost(300.0))
                .note(p.first_frame_kind.clone()),
        );
        run.figures.push(
            Figure::new("console: peak RSS", p.peak_rss_mib, "MiB")
                .target(Target::AtMost(80.0))
                .note("VmHWM of the probe process after the first frame and every query"),
        );
    }

    if run.wants("reprocess") {
        let n = run.scale(50_000);
        run.say(&format!("reprocess: dry run of a {n}-intention day"));
        let (secs, items) = dispatch::reprocess_dry_run(&dir.join("reprocess.db"), n)?;
        run.figures.push(
            Figure::new(format!("reprocess dry run ({} intentions, one day)", items), secs, "s")
                .target(Target::AtMost(1.0))
                .note("dispatch::reprocess::plan over every state of the day (read only)"),
        );
    }

    // Dispatch against the peer: each side at its best configuration from
    // a sweep, then three interleaved full-size repeats (see `versus`).
    if run.wants("dispatch") || run.wants("peer") {
        let river = run.wants("peer").then(|| river_bin(args));
        let plan = versus::Plan {
            dir: &dir,
            unavez: run.wants("dispatch"),
            river,
            sweep_jobs: run.scale(20_000),
            full_jobs: run.scale(50_000),
            fixed: args
                .no_sweep
                .then_some((args.dispatch_concurrency, args.dispatch_batch)),
        };
        let outcome = versus::run(&plan, &|m| run.say(m))?;
        run.figures.extend(versus::figures(&outcome, raw_single));
    }
    // The HTTP and latency sections keep one fixed configuration, so that
    // their figures compare across runs.
    let (conc, batch) = (args.dispatch_concurrency, args.dispatch_batch);
    if run.wants("http") {
        let n = run.scale(50_000);
        let cfg = dispatch::config(conc, batch, 20);
        let bin = unavez_bin(args);
        let sim = dispatch::SimProcess::start(&bin)?;
        let db = dir.join("dispatch-http.db");
        run.say(&format!(
            "dispatch over HTTP to `unavez sim`: importing {n} due intentions"
        ));
        dispatch::prepare(&db, "citah", n, &cfg)?;
        run.say("dispatch over HTTP: running until idle");
        let t = dispatch::over_http(&db, &cfg, &sim)?;
        let mut f =
            Figure::new("dispatch over HTTP to `unavez sim`", t.per_s(), "msg/s").target(Target::AtLeast(2000.0));
        if let Some(b) = raw_single {
            f = f.baseline_in("raw 1 row/commit", b, "rows/s");
        }
        run.figures.push(f.note(format!(
            "{} accepted in {:.2} s; concurrency {conc}, batch {batch}; {}",
            t.accepted, t.seconds, t.other
        )));
        let ln = run.scale(10_000);
        let rate = 2000.0;
        let ldb = dir.join("dispatch-latency.db");
        run.say(&format!("dispatch latency: {ln} intentions falling due at {rate:.0}/s"));
        dispatch::prepare(&ldb, "cital", ln, &cfg)?;
        let (p50, p99, samples) = dispatch::latency(&ldb, &cfg, &sim, rate)?;
        run.figures.push(
            Figure::new("dispatch over HTTP: due -> accepted p50", p50, "ms").note(format!(
                "{samples} intentions falling due at {rate:.0}/s, dispatcher as in `serve` (poll 20 ms)"
            )),
        );
        run.figures
            .push(Figure::new("dispatch over HTTP: due -> accepted p99", p99, "ms"));
    }
    if run.wants("webhook") {
        let n = run.scale(20_000);
        run.say(&format!(
            "webhook ingest: {} Cloud API statuses for {n} messages",
            3 * n
        ));
        let w = webhook::run(&dir.join("webhooks.db"), n, 100, 8)?;
        let mut f = Figure::new(
            "webhook ingest (Cloud API status batches)",
            w.events as f64 / w.seconds,
            "events/s",
        )
        .target(Target::AtLeast(5000.0));
        if let Some(b) = raw_batched {
            f = f.baseline_in("raw batched", b, "rows/s");
        }
        run.figures.push(f.note(format!(
            "{} events in {} signed requests of 100 statuses (8 clients; 10% repeated, 10% reversed) in {:.2} s; {} of {n} read at the end",
            w.events, w.requests, w.seconds, w.read_at_end
        )));
    }
    if run.wants("pg") {
        let bin = unavez_bin(args);
        // River on PostgreSQL belongs to this section (its peer row).
        pg::rows(&mut run, &dir, &bin, &river_bin(args))?;
    }
    println!("{}", report::render(&run.figures));
    if remove_after {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let missed = run.figures.iter().filter(|f| f.met() == Some(false)).count();
    if missed > 0 {
        run.say(&format!("{missed} target(s) missed"));
    }
    Ok(ExitCode::SUCCESS)
}
