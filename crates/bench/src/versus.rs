//! unavez dispatch against River, each at its best, in one run.
//!
//! Two shared cores make a single run noisy (the ratio moved between 1.02
//! and 1.26 on the same code), so this section:
//!
//! 1. sweeps each side's configuration with a smaller job count (unavez:
//!    concurrency and batch size; River: workers, fetch cooldown 1 ms) and
//!    keeps each side's fastest;
//! 2. runs the full-size dispatch and the full-size River work three times
//!    at those configurations, interleaved (unavez, river, unavez, river,
//!    …), so that both see the same drift in the machine's load;
//! 3. reports the median of the three per-repeat ratios, with every
//!    repeat's figures and the chosen configurations in the notes.

use std::path::{Path, PathBuf};

use crate::dispatch::{self, Throughput};
use crate::peer::{self, River};
use crate::report::{Figure, Target, num};

/// The unavez dispatcher's sizes tried by the sweep: (concurrency, batch).
pub const UNAVEZ_SWEEP: [(u32, u32); 4] = [(64, 64), (128, 128), (256, 256), (512, 512)];
/// River's worker counts tried by the sweep (issue 12).
pub const RIVER_SWEEP: [u32; 3] = [128, 512, 1000];
/// River's fetch cooldown: its minimum, so it is not throttled by pacing.
pub const RIVER_COOLDOWN_MS: u64 = 1;
/// Interleaved full-size repeats.
pub const REPEATS: usize = 3;

/// What to run and at which sizes.
pub struct Plan<'a> {
    pub dir: &'a Path,
    /// Run the unavez side (`--only dispatch`).
    pub unavez: bool,
    /// The River binary, when the peer side runs (`--only peer`).
    pub river: Option<PathBuf>,
    /// Jobs per sweep trial and per full repeat.
    pub sweep_jobs: u64,
    pub full_jobs: u64,
    /// A fixed unavez configuration instead of the sweep.
    pub fixed: Option<(u32, u32)>,
}

/// Every measurement of the section.
#[derive(Default)]
pub struct Outcome {
    pub unavez_sweep: Vec<((u32, u32), f64)>,
    pub river_sweep: Vec<(u32, Result<f64, String>)>,
    pub unavez_best: Option<(u32, u32)>,
    pub river_best: Option<u32>,
    pub unavez_runs: Vec<Throughput>,
    pub river_runs: Vec<Result<River, String>>,
}

fn best<K: Copy>(trials: impl Iterator<Item = (K, f64)>) -> Option<K> {
    trials.max_by(|a, b| a.1.total_cmp(&b.1)).map(|(k, _)| k)
}

/// One unavez dispatch of `n` fresh due intentions at `(conc, batch)`.
fn unavez_once(dir: &Path, tag: &str, n: u64, (conc, batch): (u32, u32)) -> anyhow::Result<Throughput> {
    let cfg = dispatch::config(conc, batch, 20);
    let db = dir.join(format!("dispatch-{tag}.db"));
    dispatch::prepare(&db, &format!("c{tag}"), n, &cfg)?;
    let t = dispatch::in_process(&db, &cfg);
    // The ledgers are large and only needed for the figure.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    t
}

fn river_once(bin: &Path, dir: &Path, jobs: u64, workers: u32) -> Result<River, String> {
    peer::run(bin, jobs, workers, RIVER_COOLDOWN_MS, dir, None).map_err(|e| format!("{e:#}"))
}

/// Runs the plan; `say` prints progress.
pub fn run(plan: &Plan<'_>, say: &dyn Fn(&str)) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    if plan.unavez {
        out.unavez_best = match plan.fixed {
            Some(c) => Some(c),
            None => {
                for (i, c) in UNAVEZ_SWEEP.iter().enumerate() {
                    say(&format!(
                        "sweep: unavez dispatch of {} at concurrency {} batch {}",
                        plan.sweep_jobs, c.0, c.1
                    ));
                    let t = unavez_once(plan.dir, &format!("sweep{i}"), plan.sweep_jobs, *c)?;
                    say(&format!("  {} msg/s", num(t.per_s())));
                    out.unavez_sweep.push((*c, t.per_s()));
                }
                best(out.unavez_sweep.iter().copied())
            }
        };
    }
    if let Some(bin) = &plan.river {
        for w in RIVER_SWEEP {
            say(&format!("sweep: river work of {} jobs at {w} workers", plan.sweep_jobs));
            let r = river_once(bin, plan.dir, plan.sweep_jobs, w).map(|r| r.work_per_s);
            say(&format!(
                "  {}",
                r.as_ref().map_or_else(Clone::clone, |v| format!("{} jobs/s", num(*v)))
            ));
            out.river_sweep.push((w, r));
        }
        out.river_best = best(
            out.river_sweep
                .iter()
                .filter_map(|(w, r)| r.as_ref().ok().map(|v| (*w, *v))),
        );
    }
    for rep in 0..REPEATS {
        if let Some(c) = out.unavez_best {
            say(&format!(
                "repeat {}/{REPEATS}: unavez dispatch of {} at concurrency {} batch {}",
                rep + 1,
                plan.full_jobs,
                c.0,
                c.1
            ));
            let t = unavez_once(plan.dir, &format!("full{rep}"), plan.full_jobs, c)?;
            say(&format!("  {} msg/s", num(t.per_s())));
            out.unavez_runs.push(t);
        }
        if let (Some(bin), Some(w)) = (&plan.river, out.river_best) {
            say(&format!(
                "repeat {}/{REPEATS}: river work of {} jobs at {w} workers",
                rep + 1,
                plan.full_jobs
            ));
            let r = river_once(bin, plan.dir, plan.full_jobs, w);
            say(&format!(
                "  {}",
                r.as_ref()
                    .map_or_else(Clone::clone, |r| format!("{} jobs/s", num(r.work_per_s)))
            ));
            out.river_runs.push(r);
        }
    }
    Ok(out)
}

/// The median of a sample (the middle one of three).
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

fn list(v: &[f64]) -> String {
    v.iter().map(|x| num(*x)).collect::<Vec<_>>().join(" / ")
}

/// The section's figures: unavez dispatch (median of the repeats), River
/// work (median), and the median per-repeat ratio.
pub fn figures(o: &Outcome, raw_single: Option<f64>) -> Vec<Figure> {
    let mut figs = Vec::new();
    let u: Vec<f64> = o.unavez_runs.iter().map(Throughput::per_s).collect();
    let r: Vec<f64> = o
        .river_runs
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|r| r.work_per_s))
        .collect();
    if let (Some(m), Some((conc, batch))) = (median(u.clone()), o.unavez_best) {
        let sweep = o
            .unavez_sweep
            .iter()
            .map(|((c, b), v)| format!("{c}/{b}: {}", num(*v)))
            .collect::<Vec<_>>()
            .join(", ");
        let runs = o
            .unavez_runs
            .iter()
            .map(|t| format!("{} in {:.2} s ({})", t.accepted, t.seconds, t.other))
            .collect::<Vec<_>>()
            .join("; ");
        let mut f = Figure::new("dispatch, in-process simulator", m, "msg/s").target(Target::AtLeast(5000.0));
        if let Some(b) = raw_single {
            f = f.baseline_in("raw 1 row/commit", b, "rows/s");
        }
        let swept = if sweep.is_empty() {
            "fixed".to_string()
        } else {
            format!("sweep concurrency/batch {sweep}")
        };
        figs.push(f.note(format!(
            "median of {} repeats ({} msg/s) at concurrency {conc}, batch {batch} ({swept}); {runs}",
            u.len(),
            list(&u)
        )));
    }
    if let Some(m) = median(r.clone()) {
        let sweep = sweep_note(&o.river_sweep);
        let line = o
            .river_runs
            .iter()
            .find_map(|r| r.as_ref().ok())
            .map(|r| r.line.clone())
            .unwrap_or_default();
        figs.push(Figure::new("peer: river work (fetch + run + complete)", m, "jobs/s").note(format!(
            "median of {} repeats ({} jobs/s) at {} workers, fetch cooldown {RIVER_COOLDOWN_MS} ms (sweep of workers {sweep}); e.g. {line}",
            r.len(),
            list(&r),
            o.river_best.unwrap_or_default()
        )));
    } else if o.river_best.is_none() && !o.river_sweep.is_empty() {
        let why = o
            .river_sweep
            .iter()
            .find_map(|(_, r)| r.clone().err())
            .unwrap_or_default();
        figs.push(Figure::missing("peer: river work", "jobs/s", None, why));
    }
    if !o.river_sweep.is_empty() {
        let ratios: Vec<f64> = o
            .unavez_runs
            .iter()
            .zip(&o.river_runs)
            .filter_map(|(u, r)| r.as_ref().ok().map(|r| u.per_s() / r.work_per_s))
            .collect();
        let name = "unavez dispatch / river work";
        match median(ratios.clone()) {
            Some(m) => figs.push(
                Figure::new(name, m, "x")
                    .baseline("river", 1.0)
                    .target(Target::AtLeast(1.5))
                    .note(format!(
                        "median of the per-repeat ratios {} (unavez {} msg/s vs river {} jobs/s, interleaved); unavez does more per message (claim + validity + durable attempt + pre-send check + HTTP send + result + history) than a river no-op job",
                        ratios.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" / "),
                        list(&u),
                        list(&r)
                    )),
            ),
            None => figs.push(Figure::missing(
                name,
                "x",
                Some(Target::AtLeast(1.5)),
                "needs the dispatch and peer sections, both measured",
            )),
        }
    }
    figs
}

/// The River workers sweep, one `workers: jobs/s` (or its failure) each,
/// for a figure's note.
pub(crate) fn sweep_note(sweep: &[(u32, Result<f64, String>)]) -> String {
    sweep
        .iter()
        .map(|(w, v)| match v {
            Ok(v) => format!("{w}: {}", num(*v)),
            Err(e) => format!("{w}: failed ({e})"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
