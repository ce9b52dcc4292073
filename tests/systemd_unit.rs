//! The shipped systemd unit (`assets/unavez.service`) against the real
//! binary: every flag of its `ExecStart` is one the binary's `--help`
//! lists for that place (global or `serve`), and the whole command line
//! parses, so the unit cannot drift from the CLI. The settings the
//! operations guide promises are in it. (`systemd-analyze verify` runs in
//! `.ci/run` where it is installed.)

use std::process::Command;

const UNIT: &str = include_str!("../assets/unavez.service");
const BIN: &str = env!("CARGO_BIN_EXE_unavez");

/// `Key=value` lines of the unit (comments and sections left out); a key
/// may repeat.
fn settings() -> Vec<(&'static str, &'static str)> {
    UNIT.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .collect()
}

fn value(key: &str) -> &'static str {
    let found: Vec<&str> = settings()
        .into_iter()
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .collect();
    assert_eq!(found.len(), 1, "{key} once in the unit: {found:?}");
    found[0]
}

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).arg("--help").output().unwrap();
    assert!(
        out.status.success(),
        "unavez {args:?} --help: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether `help` lists `flag` (as `--flag`, `--flag <VALUE>` or
/// `-f, --flag`).
fn lists(help: &str, flag: &str) -> bool {
    help.lines()
        .any(|l| l.trim_start().split([' ', ',', '=']).any(|w| w == flag))
}

/// Whether `help` shows `flag` taking a value (`--flag <VALUE>`).
fn takes_value(help: &str, flag: &str) -> bool {
    help.lines().any(|l| l.contains(&format!("{flag} <")))
}

#[test]
fn exec_start_uses_only_flags_the_binary_has() {
    let exec: Vec<&str> = value("ExecStart").split_whitespace().collect();
    assert_eq!(
        exec[0], "/usr/local/bin/unavez",
        "the path docs/operations.md installs to"
    );
    let args = &exec[1..];
    // Global flags (and their values) up to the subcommand.
    let global = help(&[]);
    let mut i = 0;
    while let Some(flag) = args.get(i).and_then(|a| a.strip_prefix("--")) {
        let name = format!("--{}", flag.split('=').next().unwrap());
        assert!(
            lists(&global, &name),
            "{name} (ExecStart) is not in `unavez --help`:\n{global}"
        );
        i += if !flag.contains('=') && takes_value(&global, &name) {
            2
        } else {
            1
        };
    }
    assert_eq!(args.get(i), Some(&"serve"), "the unit runs serve: {args:?}");
    let serve = help(&["serve"]);
    for a in &args[i + 1..] {
        let Some(flag) = a.strip_prefix("--") else { continue };
        let name = format!("--{}", flag.split('=').next().unwrap());
        assert!(
            lists(&serve, &name),
            "{name} (ExecStart) is not in `unavez serve --help`:\n{serve}"
        );
    }
    // And the whole line parses: clap answers --help only after every
    // earlier flag and value was accepted.
    let out = Command::new(BIN).args(args).arg("--help").output().unwrap();
    assert!(
        out.status.success(),
        "ExecStart's arguments do not parse: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Headless service"));
}

#[test]
fn the_unit_has_the_settings_the_guide_promises() {
    for (key, want) in [
        ("User", "unavez"),
        ("StateDirectory", "unavez"),
        ("EnvironmentFile", "/etc/unavez/secrets.env"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("PrivateTmp", "yes"),
        ("ProtectHome", "yes"),
        ("Restart", "on-failure"),
        // serve's clean shutdown (docs/operations.md, "Stopping serve").
        ("KillSignal", "SIGTERM"),
    ] {
        assert_eq!(value(key), want, "{key}");
    }
    let families = value("RestrictAddressFamilies");
    for f in ["AF_INET", "AF_INET6", "AF_UNIX"] {
        assert!(families.split_whitespace().any(|w| w == f), "{f} in {families}");
    }
    assert!(value("MemoryMax").ends_with('G') || value("MemoryMax").ends_with('M'));
    // The stop timeout leaves room for the default shutdown grace (5 s).
    let stop: u64 = value("TimeoutStopSec").parse().unwrap();
    assert!(stop >= 10, "TimeoutStopSec={stop}");
}
