//! unavez dispatch on PostgreSQL against River on PostgreSQL (issue 29),
//! in one run, on the same server.
//!
//! - **unavez**: the dispatcher with the engine simulator in this process
//!   (the set-up of the SQLite in-process row), so that the HTTP
//!   simulator's share of two cores does not decide the figure; one and
//!   three dispatchers, all three inside this one process, each with
//!   sessions of its own and its own lease owner.
//! - **River**: `benches/river` with its PostgreSQL driver, its workers
//!   swept over [`RIVER_SWEEP`](crate::versus::RIVER_SWEEP) and the best
//!   setting kept.
//! - **Fairness**: River's pool holds [`RIVER_POOL`] connections, what
//!   three unavez dispatchers hold (a session and a pre-send reader each);
//!   the peak number of connections each side really had open is sampled
//!   from `pg_stat_activity` and printed, with each side's
//!   `synchronous_commit` (the server's; neither side changes it).
//! - Three full-size repeats, interleaved (unavez ×1, unavez ×3, River),
//!   the median of each, and the median of the per-repeat ratios of the
//!   better unavez setting to River. Every unavez repeat checks the
//!   simulator's count: every key created once, none presented twice.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use unavez::config::Config;
use unavez::dispatch::{Db, Settings, dispatch_until_idle};
use unavez_testkit::PgSchema;

use crate::dispatch;
use crate::peer::{self, OnPg, River};
use crate::report::{Figure, Target, num};
use crate::versus::{REPEATS, RIVER_COOLDOWN_MS, RIVER_SWEEP, median, sweep_note};

/// River's pool size: the connections three unavez dispatchers hold (each
/// a ledger session and a pre-send reader). One dispatcher holds two, so
/// at that setting River has the larger pool.
pub const RIVER_POOL: u32 = 6;
/// unavez dispatchers in the one process.
pub const DISPATCHERS: [usize; 2] = [1, 3];

/// One unavez repeat on PostgreSQL.
pub struct PgRun {
    pub accepted: u64,
    pub seconds: f64,
    pub peak_connections: u64,
}

impl PgRun {
    pub fn per_s(&self) -> f64 {
        self.accepted as f64 / self.seconds
    }
}

#[derive(Default)]
pub struct PgOutcome {
    pub river_sweep: Vec<(u32, Result<f64, String>)>,
    pub river_best: Option<u32>,
    /// Per dispatcher count, its repeats.
    pub unavez_runs: Vec<(usize, Vec<PgRun>)>,
    pub river_runs: Vec<Result<(River, u64), String>>,
    /// The same-schema dispatch floor's repeats ([`crate::pgfloor`]).
    pub floor_runs: Vec<Result<f64, String>>,
    pub synchronous_commit: String,
}

/// Samples the number of client connections to `url`'s database every
/// 50 ms while `f` runs (other than the sampler's own): the connections
/// the measured side really held, for the fairness line.
pub fn with_peak_connections<T>(url: &str, f: impl FnOnce() -> T) -> anyhow::Result<(T, u64)> {
    let mut c = crate::pg::client(url)?;
    let stop = AtomicBool::new(false);
    let peak = AtomicU64::new(0);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let n: i64 = c
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                           AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
                        &[],
                    )
                    .map(|r| r.get(0))
                    .unwrap_or(0);
                peak.fetch_max(n as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let out = f();
        stop.store(true, Ordering::Relaxed);
        out
    });
    Ok((out, peak.load(Ordering::Relaxed)))
}

/// `synchronous_commit` on a connection to `url` (the URL unavez's
/// ledgers connect through, with no session setting of their own).
pub fn synchronous_commit(url: &str) -> anyhow::Result<String> {
    Ok(crate::pg::client(url)?
        .query_one("SHOW synchronous_commit", &[])?
        .get(0))
}

/// `k` dispatchers in this process, with the simulator in it too, on a
/// fresh PostgreSQL ledger of `n` due notices; every key must reach the
/// simulator once.
pub fn in_process(base: &str, tag: &str, n: u64, k: usize, cfg: &Config) -> anyhow::Result<PgRun> {
    let schema = PgSchema::in_database(base);
    let db = PathBuf::from(&schema.url);
    dispatch::prepare(&db, &format!("p{tag}"), n, cfg)?;
    let rt = tokio::runtime::Runtime::new()?;
    let (outcome, peak) = with_peak_connections(base, || {
        rt.block_on(async {
            let sim = unavez::sim::spawn(unavez::sim::SimOptions::default()).await?;
            let ch = dispatch::channel(cfg, sim.base_url())?;
            let dbs = (0..k).map(|_| Db::open(&db)).collect::<Result<Vec<_>, _>>()?;
            let base_settings = Settings::from_config(cfg);
            let t = Instant::now();
            let tasks: Vec<_> = dbs
                .into_iter()
                .enumerate()
                .map(|(i, db)| {
                    let mut s = base_settings.clone();
                    // Several processes would each have an owner of their own.
                    s.owner = format!("{}-{i}", s.owner);
                    tokio::spawn(dispatch_until_idle(db, Arc::new(s), ch.clone()))
                })
                .collect();
            let mut accepted = 0;
            for task in tasks {
                accepted += task.await??.0.accepted;
            }
            let seconds = t.elapsed().as_secs_f64();
            let stats = sim.stats();
            sim.shutdown().await;
            Ok::<_, anyhow::Error>((accepted, seconds, stats.created, stats.repeated))
        })
    })?;
    let (accepted, seconds, created, repeated) = outcome?;
    if accepted != n || created != n || repeated != 0 {
        bail!(
            "{k} dispatcher(s) accepted {accepted} of {n}; the simulator created {created} commands, {repeated} keys presented again"
        );
    }
    Ok(PgRun {
        accepted,
        seconds,
        peak_connections: peak,
    })
}

fn river_once(bin: &Path, dir: &Path, base: &str, jobs: u64, workers: u32) -> Result<(River, u64), String> {
    let on = OnPg {
        url: base.to_string(),
        pool: RIVER_POOL,
    };
    with_peak_connections(base, || {
        peer::run(bin, jobs, workers, RIVER_COOLDOWN_MS, dir, Some(&on))
    })
    .and_then(|(r, peak)| Ok((r?, peak)))
    .map_err(|e| format!("{e:#}"))
}

/// What to run.
pub struct PgPlan<'a> {
    pub base: &'a str,
    pub dir: &'a Path,
    pub river: Option<PathBuf>,
    pub sweep_jobs: u64,
    pub full_jobs: u64,
    pub cfg: Config,
}

pub fn run(plan: &PgPlan<'_>, say: &dyn Fn(&str)) -> anyhow::Result<PgOutcome> {
    let mut out = PgOutcome {
        synchronous_commit: synchronous_commit(plan.base)?,
        unavez_runs: DISPATCHERS.iter().map(|k| (*k, Vec::new())).collect(),
        ..PgOutcome::default()
    };
    if let Some(bin) = &plan.river {
        for w in RIVER_SWEEP {
            say(&format!(
                "sweep: river on postgresql, {} jobs at {w} workers, pool {RIVER_POOL}",
                plan.sweep_jobs
            ));
            let r = river_once(bin, plan.dir, plan.base, plan.sweep_jobs, w).map(|(r, _)| r.work_per_s);
            say(&format!(
                "  {}",
                r.as_ref().map_or_else(Clone::clone, |v| format!("{} jobs/s", num(*v)))
            ));
            out.river_sweep.push((w, r));
        }
        out.river_best = out
            .river_sweep
            .iter()
            .filter_map(|(w, r)| r.as_ref().ok().map(|v| (*w, *v)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(w, _)| w);
    }
    for rep in 0..REPEATS {
        for (k, runs) in &mut out.unavez_runs {
            say(&format!(
                "repeat {}/{REPEATS}: unavez on postgresql, {k} dispatcher(s) in-process, {} due notices",
                rep + 1,
                plan.full_jobs
            ));
            let r = in_process(plan.base, &format!("{k}r{rep}"), plan.full_jobs, *k, &plan.cfg)?;
            say(&format!(
                "  {} msg/s, {} connections",
                num(r.per_s()),
                r.peak_connections
            ));
            runs.push(r);
        }
        say(&format!(
            "repeat {}/{REPEATS}: the dispatch floor on postgresql (its rows in bare SQL, {} connections), {} due notices",
            rep + 1,
            crate::pgfloor::FLOOR_CONNECTIONS,
            plan.full_jobs
        ));
        let batch = plan.cfg.dispatcher.batch_size;
        let f = crate::pgfloor::run(plan.base, &format!("r{rep}"), plan.full_jobs, batch, &plan.cfg);
        let f = f.map_err(|e| format!("{e:#}"));
        say(&format!(
            "  {}",
            f.as_ref().map_or_else(Clone::clone, |v| format!("{} msg/s", num(*v)))
        ));
        out.floor_runs.push(f);
        if let (Some(bin), Some(w)) = (&plan.river, out.river_best) {
            say(&format!(
                "repeat {}/{REPEATS}: river on postgresql, {} jobs at {w} workers",
                rep + 1,
                plan.full_jobs
            ));
            let r = river_once(bin, plan.dir, plan.base, plan.full_jobs, w);
            say(&format!(
                "  {}",
                r.as_ref()
                    .map_or_else(Clone::clone, |(r, _)| format!("{} jobs/s", num(r.work_per_s)))
            ));
            out.river_runs.push(r);
        }
    }
    Ok(out)
}

fn list(v: &[f64]) -> String {
    v.iter().map(|x| num(*x)).collect::<Vec<_>>().join(" / ")
}

/// The River PostgreSQL row (to go beside the River SQLite row), and the
/// unavez rows with the ratio.
pub fn figures(o: &PgOutcome, conc: u32, batch: u32) -> (Option<Figure>, Vec<Figure>) {
    let river: Vec<f64> = o
        .river_runs
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|(r, _)| r.work_per_s))
        .collect();
    let river_peak = o
        .river_runs
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|(_, p)| *p))
        .max()
        .unwrap_or(0);
    let river_fig = if let Some(m) = median(river.clone()) {
        let sweep = sweep_note(&o.river_sweep);
        let line = o
            .river_runs
            .iter()
            .find_map(|r| r.as_ref().ok())
            .map(|(r, _)| r.line.clone())
            .unwrap_or_default();
        Some(Figure::new("peer: river on PostgreSQL (fetch + run + complete)", m, "jobs/s").note(format!(
            "median of {} repeats ({} jobs/s) at {} workers (sweep {sweep}); pool {RIVER_POOL}, peak {river_peak} connections open, synchronous_commit {}; e.g. {line}",
            river.len(),
            list(&river),
            o.river_best.unwrap_or_default(),
            o.synchronous_commit
        )))
    } else {
        o.river_sweep.first().map(|(_, r)| {
            Figure::missing(
                "peer: river on PostgreSQL",
                "jobs/s",
                None,
                r.clone().err().unwrap_or_default(),
            )
        })
    };
    let mut figs = Vec::new();
    let mut medians = Vec::new();
    for (k, runs) in &o.unavez_runs {
        let v: Vec<f64> = runs.iter().map(PgRun::per_s).collect();
        let Some(m) = median(v.clone()) else { continue };
        medians.push((*k, m));
        let peak = runs.iter().map(|r| r.peak_connections).max().unwrap_or(0);
        figs.push(
            Figure::new(
                format!("pg dispatch, {k} dispatcher(s) in one process, in-process simulator"),
                m,
                "msg/s",
            )
            .note(format!(
                "median of {} repeats ({} msg/s); {} due notices each, every key created once by the simulator's count, none presented twice; concurrency {conc}, batch {batch}; peak {peak} connections open, synchronous_commit {}",
                v.len(),
                list(&v),
                runs.first().map_or(0, |r| r.accepted),
                o.synchronous_commit
            )),
        );
    }
    // Per repeat: the better unavez setting of that repeat against River.
    let river_ratios: Vec<f64> = o
        .river_runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let (r, _) = r.as_ref().ok()?;
            Some(best_unavez(o, i) / r.work_per_s)
        })
        .collect();
    let name = "pg dispatch (best of 1 and 3) / river on PostgreSQL";
    let target = Target::AtLeast(1.0);
    match median(river_ratios.clone()) {
        Some(m) => figs.push(
            Figure::new(name, m, "x")
                .baseline("river", 1.0)
                .target(target)
                .note(format!(
                    "median of the per-repeat ratios {} (interleaved; unavez medians {}; river {} jobs/s)",
                    ratios(&river_ratios),
                    medians
                        .iter()
                        .map(|(k, m)| format!("{k}: {}", num(*m)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    list(&river)
                )),
        ),
        None => figs.push(Figure::missing(
            name,
            "x",
            Some(target),
            "needs the pg and peer sections, both measured",
        )),
    }
    figs.extend(floor_figures(o));
    (river_fig, figs)
}

/// The better unavez setting of the `i`th repeat (NaN if none ran).
fn best_unavez(o: &PgOutcome, i: usize) -> f64 {
    o.unavez_runs
        .iter()
        .filter_map(|(_, runs)| runs.get(i).map(PgRun::per_s))
        .fold(f64::NAN, f64::max)
}

/// The same-schema dispatch floor, and two readings of it, each the median
/// of per-repeat ratios: how close the dispatcher comes to the rows it must
/// write, and how close those rows alone come to River. No target: they
/// say where the River ratio's gap lies (the target is River's).
fn floor_figures(o: &PgOutcome) -> Vec<Figure> {
    let name = format!(
        "pg dispatch floor: the same rows in bare SQL, {} connections",
        crate::pgfloor::FLOOR_CONNECTIONS
    );
    let floors: Vec<Option<f64>> = o.floor_runs.iter().map(|f| f.as_ref().ok().copied()).collect();
    let measured: Vec<f64> = floors.iter().flatten().copied().collect();
    let Some(m) = median(measured.clone()) else {
        let why = o.floor_runs.iter().find_map(|f| f.clone().err());
        return vec![Figure::missing(
            name,
            "msg/s",
            None,
            why.unwrap_or_else(|| "not run".into()),
        )];
    };
    let mut figs = vec![Figure::new(name, m, "msg/s").note(format!(
        "median of {} repeats ({} msg/s), interleaved with the rows above: per message the claim's and the result's `intentions` versions, the attempt inserted before the request and ended after it, two history rows, the counts folded at commit; one statement per phase, results in the next claim's transaction, no reads, no pre-send check, no HTTP",
        measured.len(),
        list(&measured)
    ))];
    let per_repeat = |f: &dyn Fn(usize, f64) -> Option<f64>| -> Vec<f64> {
        floors
            .iter()
            .enumerate()
            .filter_map(|(i, fl)| f(i, (*fl)?))
            .filter(|x| x.is_finite())
            .collect()
    };
    let ours = per_repeat(&|i, fl| Some(best_unavez(o, i) / fl));
    figs.extend(ratio_figure(
        "pg dispatch (best of 1 and 3) / its same-schema floor",
        "floor",
        &ours,
        "the cost of the dispatcher's logic, its reads, the pre-send check and HTTP",
    ));
    let rows = per_repeat(&|i, fl| {
        let (r, _) = o.river_runs.get(i)?.as_ref().ok()?;
        Some(fl / r.work_per_s)
    });
    figs.extend(ratio_figure(
        "pg dispatch floor / river on PostgreSQL",
        "river",
        &rows,
        "the most any dispatcher writing these rows on this schema could reach",
    ));
    figs
}

/// A ratio with no target: the median of its per-repeat values.
fn ratio_figure(name: &str, base: &str, per_repeat: &[f64], what: &str) -> Option<Figure> {
    let m = median(per_repeat.to_vec())?;
    Some(
        Figure::new(name, m, "x")
            .baseline(base, 1.0)
            .note(format!("per repeat {}: {what}", ratios(per_repeat))),
    )
}

fn ratios(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" / ")
}
