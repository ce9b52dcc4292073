//! A short chaos run as part of `cargo test`: the `unavez` command line as
//! dispatcher (SIGKILLed at random moments and at each step of an attempt,
//! with store faults) against `unavez sim` with seeded faults, then the
//! history checker. Fails if anything was duplicated, lost or wrongly sent —
//! under the strict definition: the engine's own first receipt of a key
//! more than 500 ms after the commit of the change that made it stale — or
//! the database is damaged.

use std::process::Command;

#[test]
fn a_short_chaos_run_loses_nothing_and_sends_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_unavez-chaos"))
        .args([
            "--intentions",
            "300",
            "--kills",
            "3",
            "--seed",
            "7",
            "--settle-secs",
            "60",
        ])
        .arg("--dir")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "chaos failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for line in [
        "duplicated                 0",
        "lost                       0",
        "wrongly sent               0",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    assert!(stdout.contains("PRAGMA integrity_check     ok"), "{stdout}");
    // The verdict came from the strict checker, on the simulator's records.
    assert!(
        stdout.contains("(first received by the engine before the change committed, or ≤ 500 ms after)"),
        "{stdout}"
    );
    let run = dir.path().join("run");
    for record in ["engine-state.jsonl", "sent.jsonl", "imports.jsonl"] {
        assert!(run.join(record).exists(), "{record} missing");
    }
    // Every deterministic kill point fired and every store fault was survived.
    assert!(
        !stdout.contains("=NO"),
        "a failpoint did not fire or a store fault was not survived:\n{stdout}"
    );
    assert!(stdout.contains("settled: yes"), "{stdout}");
}
