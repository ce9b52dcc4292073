//! The result table: each figure beside the baseline measured in the same
//! run, the ratio between them, the target and whether it was met.

use std::fmt::Write as _;

/// A target: the value must be at least, or at most, this.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    AtLeast(f64),
    AtMost(f64),
}

impl Target {
    pub fn met(self, v: f64) -> bool {
        match self {
            Target::AtLeast(t) => v >= t,
            Target::AtMost(t) => v <= t,
        }
    }
}

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Figure {
    pub name: String,
    pub value: Option<f64>,
    pub unit: &'static str,
    /// The baseline's name, value and unit.
    pub baseline: Option<(String, f64, &'static str)>,
    pub target: Option<Target>,
    /// Why the figure is missing, or a remark that belongs beside it.
    pub note: String,
}

impl Figure {
    pub fn new(name: impl Into<String>, value: f64, unit: &'static str) -> Figure {
        Figure {
            name: name.into(),
            value: Some(value),
            unit,
            baseline: None,
            target: None,
            note: String::new(),
        }
    }

    /// A figure that could not be measured in this run, and why.
    pub fn missing(
        name: impl Into<String>,
        unit: &'static str,
        target: Option<Target>,
        why: impl Into<String>,
    ) -> Figure {
        Figure {
            name: name.into(),
            value: None,
            unit,
            baseline: None,
            target,
            note: why.into(),
        }
    }

    /// A baseline in the figure's own unit.
    pub fn baseline(mut self, name: impl Into<String>, value: f64) -> Figure {
        self.baseline = Some((name.into(), value, self.unit));
        self
    }

    /// A baseline in another unit (e.g. raw rows/s beside intentions/s).
    pub fn baseline_in(mut self, name: impl Into<String>, value: f64, unit: &'static str) -> Figure {
        self.baseline = Some((name.into(), value, unit));
        self
    }

    pub fn target(mut self, t: Target) -> Figure {
        self.target = Some(t);
        self
    }

    pub fn note(mut self, n: impl Into<String>) -> Figure {
        self.note = n.into();
        self
    }

    pub fn met(&self) -> Option<bool> {
        Some(self.target?.met(self.value?))
    }
}

/// A number in a readable width: integers above 100, else 2–3 significant digits.
pub fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        let s = format!("{:.0}", v);
        // Thousands separators make 50,000 vs 5,000 readable at a glance.
        let (sign, digits) = s.strip_prefix('-').map(|d| ("-", d)).unwrap_or(("", s.as_str()));
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        format!("{sign}{out}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn target_text(t: Target, unit: &str) -> String {
    match t {
        Target::AtLeast(v) => format!(">= {} {unit}", num(v)),
        Target::AtMost(v) => format!("<= {} {unit}", num(v)),
    }
}

/// Renders the table as aligned plain text (Markdown-compatible pipes).
pub fn render(figures: &[Figure]) -> String {
    let header = ["figure", "value", "baseline (same run)", "ratio", "target", "met?"];
    let mut rows: Vec<[String; 6]> = Vec::new();
    for f in figures {
        let value = match f.value {
            Some(v) => format!("{} {}", num(v), f.unit),
            None => "—".to_string(),
        };
        let (baseline, ratio) = match (&f.baseline, f.value) {
            (Some((name, b, unit)), Some(v)) if *b != 0.0 => {
                (format!("{name}: {} {unit}", num(*b)), format!("{:.2}", v / b))
            }
            (Some((name, b, unit)), _) => (format!("{name}: {} {unit}", num(*b)), "—".into()),
            (None, _) => ("—".into(), "—".into()),
        };
        let target = f.target.map(|t| target_text(t, f.unit)).unwrap_or_else(|| "—".into());
        let met = match f.met() {
            Some(true) => "yes".to_string(),
            Some(false) => "NO".to_string(),
            None if f.target.is_some() => "not measured".to_string(),
            None => "—".to_string(),
        };
        rows.push([f.name.clone(), value, baseline, ratio, target, met]);
    }
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        out.push('|');
        for (c, w) in cells.iter().zip(widths.iter()) {
            let pad = w - c.chars().count();
            let _ = write!(out, " {c}{} |", " ".repeat(pad));
        }
        out.push('\n');
    };
    line(&mut out, &header.map(String::from));
    out.push('|');
    for w in widths {
        let _ = write!(out, "{}|", "-".repeat(w + 2));
    }
    out.push('\n');
    for r in &rows {
        line(&mut out, r);
    }
    let notes: Vec<String> = figures
        .iter()
        .filter(|f| !f.note.is_empty())
        .map(|f| format!("- {}: {}", f.name, f.note))
        .collect();
    if !notes.is_empty() {
        out.push_str("\nNotes:\n");
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }
    out
}

/// p-th percentile (0–100) of a sample, nearest-rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Peak resident set size of this process (`VmHWM`), in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
