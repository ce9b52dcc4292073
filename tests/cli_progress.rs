//! `unavez import` of a large file, through the real binary: on a terminal
//! (a real pseudo-terminal) it shows a progress bar on stderr; piped, or
//! with `--json`, the output carries no byte of progress.

mod ledger_support;

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use ledger_support::*;
use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// A booking file large enough to take a moment in a debug build.
fn large_file(dir: &Path, events: usize) -> std::path::PathBuf {
    let f = dir.join("large.jsonl");
    // Ahead of the real clock, within the default `[import] max_days_ahead`.
    let first = chrono::Utc::now() + chrono::Duration::days(30);
    let text: String = (0..events)
        .map(|i| {
            format!(
                "{{\"event_id\":\"e{i}\",\"type\":\"appointment.scheduled\",\"ref\":\"cita-{i}\",\"starts_at\":\"{}\",\"contact\":{{\"phone\":\"+5198{i:07}\"}}}}\n",
                (first + chrono::Duration::days((i % 28) as i64)).format("%Y-%m-%dT10:00:00-05:00")
            )
        })
        .collect();
    std::fs::write(&f, text).unwrap();
    f
}

/// What the progress bar writes: carriage returns, cursor and erase
/// sequences, or its own words.
fn has_progress(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.contains('\r') || text.contains('\x1b') || text.contains("importing")
}

#[test]
fn piped_output_carries_no_progress() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let file = large_file(dir.path(), 1500);
    let o = run(&db, &["import", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(report_number(&stdout(&o), "stored"), 1500);
    assert!(!has_progress(&o.stdout), "{:?}", stdout(&o));
    assert!(!has_progress(&o.stderr), "{:?}", stderr(&o));
    // `--json` is one document, nothing else.
    let o = run(&db, &["import", file.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!has_progress(&o.stderr), "{:?}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["duplicates"], 1500);
}

/// Runs `unavez ARGS` in a pseudo-terminal (stdout and stderr are the
/// terminal) to the end and returns everything it wrote.
fn in_a_terminal(db: &Path, args: &[&str]) -> (bool, Vec<u8>) {
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols: 100,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_unavez"));
    cmd.args(["--db", db.to_str().unwrap()]);
    cmd.args(args);
    cmd.env("TERM", "xterm-256color");
    cmd.env_remove("UNAVEZ_CONFIG");
    cmd.env_remove("UNAVEZ_DB");
    let mut child = pair.slave.spawn_command(cmd).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let collector = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        // Ends when the child closes the terminal (EOF or EIO).
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "import did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(pair.master);
    (status.success(), collector.join().unwrap())
}

#[test]
fn a_terminal_sees_the_import_move_and_json_stays_clean() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let file = large_file(dir.path(), 3000);
    let (ok, out) = in_a_terminal(&db, &["import", file.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out);
    assert!(ok, "{text}");
    assert!(text.contains("importing large.jsonl"), "no progress shown: {text:?}");
    assert!(text.contains("/3000"), "no count shown: {text:?}");
    // The report follows, whole.
    assert!(text.contains("stored            3000"), "{text:?}");
    // `--json` on a terminal: the document only.
    let (ok, out) = in_a_terminal(&db, &["import", file.to_str().unwrap(), "--json"]);
    assert!(ok);
    let text = String::from_utf8_lossy(&out);
    assert!(!text.contains("importing"), "{text:?}");
    let report: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(report["duplicates"], 3000);
}
