//! Helpers shared by the `ledger_*` integration tests: run the real
//! `unavez` binary on a temporary ledger file.

#![allow(dead_code)]

#[path = "../failpoint_support/mod.rs"]
mod failpoint_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ledger")
        .join(name)
}

/// `unavez --db DB ARGS…` with a clean environment for config and db.
pub fn unavez(db: &Path) -> Command {
    prepare(Command::new(env!("CARGO_BIN_EXE_unavez")), db)
}

/// The same with failpoints armed by `spec` (see failpoint_support).
pub fn unavez_armed(db: &Path, spec: &str) -> Command {
    prepare(failpoint_support::armed(spec), db)
}

/// A configuration whose one setting is the widest `[import]
/// max_days_ahead`: the fixtures' appointments are years ahead of the real
/// clock, past the default 400 days. A test's own `--config` replaces it.
fn wide_horizon() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("unavez-wide-horizon-{}.toml", std::process::id()));
        std::fs::write(&path, "[import]\nmax_days_ahead = 3660\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    })
    .clone()
}

fn prepare(mut c: Command, db: &Path) -> Command {
    c.env("UNAVEZ_CONFIG", wide_horizon())
        .env_remove("UNAVEZ_DB")
        .env("RUST_LOG", "warn")
        .arg("--db")
        .arg(db);
    c
}

pub fn run(db: &Path, args: &[&str]) -> Output {
    unavez(db).args(args).output().expect("spawn unavez")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs a listing with `--json` and parses it; panics with stderr on failure.
pub fn json(db: &Path, args: &[&str]) -> serde_json::Value {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--json");
    let o = run(db, &all);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stdout(&o)))
}

/// The number on the report line that starts with `label`.
pub fn report_number(out: &str, label: &str) -> usize {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{out}"))
}

/// (key, state, fingerprint) of every intention, sorted by key.
pub fn intention_summary(db: &Path) -> Vec<(String, String, String)> {
    let v = json(db, &["intents", "list", "--limit", "100000"]);
    let mut rows: Vec<(String, String, String)> = v
        .as_array()
        .expect("array")
        .iter()
        .map(|i| {
            (
                i["key"].as_str().unwrap().to_string(),
                i["state"].as_str().unwrap().to_string(),
                i["fingerprint"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    rows.sort();
    rows
}
