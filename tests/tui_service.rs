//! The console tells the truth about the service (issue 10), end to end in
//! a real terminal against the built binary:
//! - a read-only console starts no dispatcher, and shows the one another
//!   process runs ("en marcha · host pid") until that process is killed;
//! - a ledger that does not exist is refused, in Spanish, and not created;
//! - a ledger another process holds write-locked opens at once, with the
//!   lock said in words and a spinner, instead of a blank screen.

mod dispatch_support;
mod tui_support;

use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chrono::Utc;
use dispatch_support::*;
use tui_support::pty::Console;
use unavez::store::{Store, StoreError};

fn heartbeat_rows(db: &Path) -> usize {
    let mut store = Store::open(db).unwrap();
    store
        .read(|tx| tx.heartbeats(Utc::now() - chrono::Duration::hours(1)))
        .unwrap()
        .len()
}

#[test]
fn a_read_only_console_starts_no_dispatcher_and_shows_the_one_running_elsewhere() {
    let env = Env::new(&Cfg::motor("http://127.0.0.1:9"));
    let text = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace("[dispatcher]\n", "[dispatcher]\nembedded = true\nheartbeat_ms = 500\n");
    std::fs::write(&env.config, text).unwrap();
    let config = env.config.to_str().unwrap().to_string();
    let args = ["--config", &config, "tui", "--read-only", "--operator", "tecnico"];
    let secrets = [(MOTOR_KEY_ENV, "clave-de-prueba")];

    // Nobody dispatches: the read-only console says so, and adds no
    // dispatcher of its own (every dispatcher writes a heartbeat row).
    let console = Console::spawn_with(&args, env.dir.path(), &secrets);
    console.wait_for("solo lectura");
    console.wait_for("■ despachador: detenido");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(heartbeat_rows(&env.db), 0, "a read-only console started a dispatcher");
    console.quit();

    // Another process dispatches: the same console shows it, by host and
    // pid, and stops showing it once it is killed.
    let mut serve = env.spawn(&["serve", "--no-server"]);
    let pid = serve.pid();
    let host = unavez::dispatch::heartbeat::host_name();
    let console = Console::spawn_with(&args, env.dir.path(), &secrets);
    console.wait_for(&format!("● despachador: en marcha · {host} {pid}"));
    serve.kill();
    console.wait_for("■ despachador: detenido");
    console.quit();
    assert_eq!(heartbeat_rows(&env.db), 1, "only serve's row");
}

#[test]
fn a_missing_ledger_is_refused_in_spanish_and_never_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("unavze.db");
    for args in [
        vec!["tui", "--operator", "recepcion"],
        vec!["tui", "--operator", "recepcion", "--read-only"],
        vec!["intents", "list"],
        vec!["intents", "show", "x"],
        vec!["commitments", "list"],
        vec!["dispatch"],
        vec!["intents", "resolve", "x", "--operator", "recepcion", "--reason", "r"],
    ] {
        let out = Command::new(BIN)
            .arg("--db")
            .arg(&db)
            .args(&args)
            .env("UNAVEZ_MOTOR_API_KEY", "clave")
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("no existe el registro {}; créelo con `unavez init`", db.display());
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} created {}", db.display());
    }
    // English with `language = "en"`.
    let config = dir.path().join("en.toml");
    std::fs::write(&config, "language = \"en\"\n").unwrap();
    let out = Command::new(BIN)
        .arg("--config")
        .arg(&config)
        .arg("--db")
        .arg(&db)
        .args(["intents", "list"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist; create it with `unavez init`"), "{err}");
}

/// Holds the ledger's write lock from another connection until told to
/// let go (a long import, a backup tool).
fn hold_write_lock(db: &Path) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (locked_tx, locked_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let db = db.to_path_buf();
    let holder = std::thread::spawn(move || {
        let mut store = Store::open(&db).unwrap();
        store
            .write(|_tx| {
                locked_tx.send(()).unwrap();
                let _ = release_rx.recv();
                Ok::<_, StoreError>(())
            })
            .unwrap();
    });
    locked_rx.recv().unwrap();
    (release_tx, holder)
}

#[test]
fn a_write_locked_ledger_opens_at_once_with_the_lock_said_and_a_spinner() {
    let fx = tui_support::clinic(40);
    let db = fx.db.clone();
    let dir = fx.dir.path().to_path_buf();
    drop(fx.store);
    let db_arg = db.to_str().unwrap().to_string();
    for embedded in [false, true] {
        let (release, holder) = hold_write_lock(&db);
        let mut args = vec!["--db", &db_arg, "tui", "--operator", "recepcion"];
        if !embedded {
            args.push("--no-dispatch");
        }
        let started = Instant::now();
        let console = Console::spawn_with(&args, &dir, &[("UNAVEZ_MOTOR_API_KEY", "clave")]);
        console.wait_for("registro bloqueado por otro proceso: las acciones esperan");
        // The cases are there, not a blank pane: reads go on under the lock.
        console.wait_for("cita-10");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "embedded {embedded}: {:?} to show the screen (a blocked open waits 30 s)",
            started.elapsed()
        );
        let text = console.text();
        let banner = text.lines().find(|l| l.contains("registro bloqueado")).unwrap();
        assert!(
            banner.chars().any(|c| ('\u{2800}'..='\u{28ff}').contains(&c)),
            "no spinner: {banner}"
        );
        release.send(()).unwrap();
        holder.join().unwrap();
        console.wait_gone("registro bloqueado");
        console.quit();
    }
}
