//! `unavez demo --db postgres://…` on an empty, uninitialised database, in
//! a real pseudo-terminal: the demo clinic is seeded into it, the built-in
//! engine simulator and the dispatcher run, the console opens as the
//! supervisor, who pauses and resumes sending. What went out is judged by the simulator's own record (its
//! `GET /sim/sent`, on the address the demo prints): no key twice, every
//! key an intention of the ledger, none the ledger says failed or
//! cancelled. A database that already holds a ledger is refused.

mod tui_support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use tui_support::pty::{TIMEOUT, screen};
use unavez::domain::state::IntentionState;
use unavez::store::{IntentFilter, IntentionRow, Store};
use unavez_ledger::location::Location;
use unavez_testkit::PgSchema;

const BIN: &str = env!("CARGO_BIN_EXE_unavez");

/// The binary in a pseudo-terminal, keeping every byte it wrote: what it
/// said before the console took the screen included.
struct Pty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    fn spawn(args: &[&str], dir: &std::path::Path) -> Pty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 30,
                cols: 100,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(BIN);
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("UNAVEZ_DB");
        cmd.env_remove("UNAVEZ_CONFIG");
        cmd.cwd(dir);
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let sink = raw.clone();
        std::thread::spawn(move || {
            let _master = pair.master;
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty { child, writer, raw }
    }

    fn raw(&self) -> String {
        String::from_utf8_lossy(&self.raw.lock().unwrap()).into_owned()
    }

    fn wait_for(&self, needle: &str) {
        let start = Instant::now();
        while start.elapsed() < TIMEOUT {
            let text = screen(&self.raw.lock().unwrap(), 30, 100).join("\n");
            if text.contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "screen never showed {needle:?}:\n{}",
            screen(&self.raw.lock().unwrap(), 30, 100).join("\n")
        );
    }

    fn keys(&mut self, s: &str) {
        self.writer.write_all(s.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// `q`, then the whole output once the process has exited cleanly.
    fn quit(mut self) -> String {
        self.keys("q");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "demo exited with {status:?}:\n{}", self.raw());
                break;
            }
            assert!(start.elapsed() < TIMEOUT, "demo did not quit");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(200));
        self.raw()
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// The engine simulator's address, from the demo's first line.
fn engine_url(raw: &str) -> Option<String> {
    let rest = &raw[raw.find("engine simulator at ")? + "engine simulator at ".len()..];
    Some(rest.split_whitespace().next()?.to_string())
}

/// The simulator's record of every message that went out, by key.
fn sent_by_engine(rt: &tokio::runtime::Runtime, base: &str) -> HashMap<String, usize> {
    let lines: Vec<serde_json::Value> = rt.block_on(async {
        reqwest::get(format!("{base}/sim/sent"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let mut m = HashMap::new();
    for l in lines {
        *m.entry(l["key"].as_str().unwrap().to_string()).or_insert(0) += 1;
    }
    m
}

fn intentions(url: &str) -> HashMap<String, IntentionRow> {
    let location = Location::parse(std::path::Path::new(url)).unwrap();
    Store::attach_location(&location)
        .unwrap()
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                limit: 100_000,
                ..Default::default()
            })
        })
        .unwrap()
        .into_iter()
        .map(|i| (i.key.clone(), i))
        .collect()
}

#[test]
fn the_demo_runs_on_an_empty_postgresql_database_and_sends_each_message_once() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let schema = PgSchema::new();
    let dir = tempfile::tempdir().unwrap();
    let mut demo = Pty::spawn(&["--db", &schema.url, "demo", "--appointments", "60"], dir.path());
    demo.wait_for("supervisora (supervisión)");
    demo.wait_for("despachador: en marcha");
    let base = engine_url(&demo.raw()).expect("the demo says where its engine listens");
    assert!(demo.raw().contains("demo clinic at postgres://"), "{}", demo.raw());
    demo.keys("2");
    demo.wait_for("cita-10");

    // Let the dispatcher work against the faulty engine for a while.
    let start = Instant::now();
    while sent_by_engine(&rt, &base).len() < 25 {
        assert!(
            start.elapsed() < TIMEOUT,
            "the demo sent {:?}",
            sent_by_engine(&rt, &base)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The supervisor pauses sending and resumes it: the console's own
    // writes, on the shared ledger.
    demo.keys("p");
    demo.wait_for("pausar envíos");
    demo.keys("el motor va lento\r");
    demo.wait_for("Pausar los envíos");
    demo.keys("s");
    demo.wait_for("despachador: en pausa");
    demo.keys("p");
    demo.wait_for("reanudar envíos");
    demo.keys("ya responde\r");
    demo.wait_for("Reanudar los envíos");
    demo.keys("s");
    demo.wait_for("despachador: en marcha");
    let sent = sent_by_engine(&rt, &base);
    let output = demo.quit();
    assert!(output.contains("STATE") && output.contains("engine: "), "{output}");
    // A graceful stop leaves nothing claimed: sends in flight were
    // answered or recorded as uncertain, and answers that met the engine's
    // webhook for the same message were recorded all the same.
    let dispatching = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("dispatching"))
        .and_then(|n| n.trim().parse::<i64>().ok());
    assert_eq!(dispatching, Some(0), "{output}");

    let twice: Vec<_> = sent.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "the engine sent these more than once: {twice:?}");
    let ledger = intentions(&schema.url);
    assert!(ledger.len() > 100, "{} intentions", ledger.len());
    for key in sent.keys() {
        let row = ledger
            .get(key)
            .unwrap_or_else(|| panic!("the engine sent {key}, which the ledger does not know"));
        assert!(
            !matches!(row.state, IntentionState::Failed | IntentionState::Cancelled),
            "the engine sent {key}, the ledger says {}",
            row.state
        );
    }

    let location = Location::parse(std::path::Path::new(&schema.url)).unwrap();
    let actions = Store::attach_location(&location)
        .unwrap()
        .read(|tx| tx.operator_actions(10))
        .unwrap();
    let got: Vec<(&str, &str, &str)> = actions
        .iter()
        .map(|a| (a.action.as_str(), a.operator.as_str(), a.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("resume_dispatch", "supervisora", "ya responde"),
            ("pause_dispatch", "supervisora", "el motor va lento"),
        ]
    );

    // The same database again: it holds a ledger now, and is never seeded
    // over.
    let out = std::process::Command::new(BIN)
        .args(["--db", &schema.url, "demo", "--headless", "--seconds", "1"])
        .env_remove("UNAVEZ_DB")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already holds a ledger"), "{err}");
    assert_eq!(intentions(&schema.url).len(), ledger.len());
}
