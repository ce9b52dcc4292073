//! `unavez ledger backup` and `unavez ledger restore` with the real binary
//! while a real `serve` dispatches to the engine simulator over HTTP: the
//! copy opens, passes `quick_check` and holds every intention committed
//! before it began; retention, mode 0600; a restore refused while the
//! dispatcher lives and done after it stopped, with the replaced ledger's
//! `-wal`/`-shm` moved aside; the PostgreSQL advice; and `[backup]` inside
//! `serve`, with its metrics and alerts.

mod dispatch_support;

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dispatch_support::*;
use unavez::store::backup::inspect_file;
use unavez::store::{IntentFilter, OpenOptions, Store, files};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn backups_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            unavez::domain::backup::parse_name(name).is_some()
        })
        .collect();
    v.sort();
    v
}

fn keys_in(db: &Path) -> BTreeSet<String> {
    let mut s = Store::open_with(db, &OpenOptions::EXISTING).unwrap();
    s.read(|tx| {
        tx.list_intentions(&IntentFilter {
            limit: 1_000_000,
            ..Default::default()
        })
    })
    .unwrap()
    .into_iter()
    .map(|i| i.key)
    .collect()
}

fn run(env: &Env, args: &[&str]) -> (i32, String, String) {
    let out = env.run(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Appends `[backup]` (or anything) to the environment's configuration.
fn append_config(env: &Env, text: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(&env.config).unwrap();
    writeln!(f, "\n{text}").unwrap();
}

#[test]
fn a_backup_taken_while_serve_dispatches_holds_everything_committed_before_it() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    // Slow sends: serve is still dispatching while the backups are taken.
    let sim = start_sim(&rt, log.path(), "latency_ms=100..300", 7);
    let mut cfg = Cfg::motor(&sim.base_url()).with_motor_timeout(5_000);
    cfg.lease_seconds = 30;
    cfg.concurrency = 2;
    cfg.batch_size = 2;
    let env = Env::new(&cfg);
    let first: Vec<String> = (0..40).map(|n| scheduled(&format!("cita-a{n}"), n)).collect();
    env.import("a.jsonl", &first);
    let mut serve = env.spawn(&["serve"]);
    assert!(wait_until(Duration::from_secs(20), || env
        .intentions()
        .iter()
        .any(|i| i.state.has_channel_evidence())));

    let dir = env.path("copias");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notas.txt"), "not a backup").unwrap();
    std::fs::write(dir.join("unavez-backup-manual.db"), "a person's copy").unwrap();
    // More bookings arrive while the copy is made.
    let before: BTreeSet<String> = env.intentions().into_iter().map(|i| i.key).collect();
    let more: Vec<String> = (40..80).map(|n| scheduled(&format!("cita-b{n}"), n)).collect();
    let more_file = env.write_events("b.jsonl", &more);
    let mut importer = env.spawn(&["import", more_file.to_str().unwrap()]);
    let out = env.ok(&["ledger", "backup", dir.to_str().unwrap(), "--json"]);
    let taken: serde_json::Value = serde_json::from_str(&out).unwrap();
    let path = PathBuf::from(taken["path"].as_str().unwrap());
    assert_eq!(path.parent(), Some(dir.as_path()));
    assert_eq!(mode(&path), 0o600);
    let facts = inspect_file(&path).unwrap();
    assert_eq!(facts.quick_check, "ok");
    assert_eq!(taken["intentions"], facts.intentions);
    for c in files::companions(&path) {
        assert!(!c.exists(), "a backup is one file: {}", c.display());
    }
    // A scratch copy (opening migrates nothing, but writes -wal/-shm).
    let scratch = env.path("scratch.db");
    std::fs::copy(&path, &scratch).unwrap();
    let copied = keys_in(&scratch);
    let missing: Vec<&String> = before.difference(&copied).collect();
    assert!(
        missing.is_empty(),
        "committed before the backup, not in it: {missing:?}"
    );
    assert!(importer.0.take().unwrap().wait().unwrap().success());

    // Retention: three more with --keep 2 leave the two newest; files
    // that are not this command's are never touched.
    let mut made = vec![path.clone()];
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(5));
        let out = env.ok(&["ledger", "backup", dir.to_str().unwrap(), "--keep", "2", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        made.push(PathBuf::from(v["path"].as_str().unwrap()));
    }
    assert_eq!(backups_in(&dir), made[2..].to_vec());
    assert!(dir.join("notas.txt").exists() && dir.join("unavez-backup-manual.db").exists());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 4, "no partial file left behind: {left:?}");

    // Restore is refused while serve's dispatcher is alive; nothing moves.
    let newest = made.last().unwrap().clone();
    let (code, _, err) = run(&env, &["ledger", "restore", newest.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("hay un despachador en marcha"), "{err}");
    let siblings = |what: &str| -> Vec<PathBuf> {
        std::fs::read_dir(env.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_str().unwrap().contains(what))
            .collect()
    };
    assert!(siblings(".replaced-").is_empty());

    serve.terminate();
    rt.block_on(sim.shutdown());
    restore_after_stop(&env, &newest);
}

/// After a clean stop: the replaced ledger and its `-wal`/`-shm` are moved
/// aside (a connection holds them open, as a console would), the copy is
/// in place with mode 0600 and is what opens.
fn restore_after_stop(env: &Env, backup: &Path) {
    let wanted = keys_in(&{
        let p = env.path("expected.db");
        std::fs::copy(backup, &p).unwrap();
        p
    });
    // The ledger moves on after the backup.
    let later: Vec<String> = (80..85).map(|n| scheduled(&format!("cita-c{n}"), n)).collect();
    env.import("c.jsonl", &later);
    let mut holder = Store::open_with(&env.db, &OpenOptions::EXISTING).unwrap();
    holder.read(|tx| tx.heartbeats(chrono::Utc::now())).unwrap();
    let [wal, shm] = files::companions(&env.db);
    assert!(wal.exists() && shm.exists());
    let before = keys_in(&env.db);
    assert!(before.len() > wanted.len(), "the ledger moved on since the backup");

    let (code, out, err) = run(env, &["ledger", "restore", backup.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let done: serde_json::Value = serde_json::from_str(&out).unwrap();
    let aside: Vec<PathBuf> = done["moved_aside"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect();
    assert_eq!(aside.len(), 3, "{aside:?}");
    let main = aside.last().unwrap();
    assert!(main.to_str().unwrap().contains("unavez.db.replaced-"), "{main:?}");
    assert_eq!(aside[..2].to_vec(), files::companions(main).to_vec());
    assert!(aside.iter().all(|p| p.exists()));
    assert_eq!(mode(&env.db), 0o600);
    assert_eq!(done["migrated"], false);
    drop(holder);
    assert_eq!(keys_in(&env.db), wanted);
    // The set moved aside still opens whole.
    assert_eq!(keys_in(main), before);
    // The restored ledger serves commands.
    env.ok(&["intents", "list", "--limit", "1"]);
}

#[test]
fn a_restore_refuses_copies_it_cannot_trust() {
    let env = Env::new(&Cfg::motor("http://127.0.0.1:9"));
    let dir = env.path("copias");
    let out = env.ok(&["ledger", "backup", dir.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let good = PathBuf::from(v["path"].as_str().unwrap());
    assert_eq!(mode(&dir), 0o700, "the directory is created private");

    let newer = env.path("newer.db");
    std::fs::copy(&good, &newer).unwrap();
    rusqlite::Connection::open(&newer)
        .unwrap()
        .pragma_update(None, "user_version", 999)
        .unwrap();
    let junk = env.path("junk.db");
    std::fs::write(&junk, b"not a database at all ".repeat(300)).unwrap();
    let empty = env.path("empty.db");
    rusqlite::Connection::open(&empty)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    for (src, code, want) in [
        (newer.as_path(), 3, "más nueva que este unavez"),
        (junk.as_path(), 3, "junk.db"),
        (empty.as_path(), 3, "no es un registro de unavez"),
        (Path::new("/nonexistent/copy.db"), 2, "copy.db"),
    ] {
        let (got, _, err) = run(&env, &["ledger", "restore", src.to_str().unwrap()]);
        assert_eq!(got, code, "{src:?}: {err}");
        assert!(err.contains(want), "{src:?}: {err}");
        assert!(err.contains("no se cambió nada") || code == 2, "{err}");
    }
    let (code, out, _) = run(&env, &["ledger", "restore", newer.to_str().unwrap(), "--json"]);
    assert_eq!(code, 3);
    let e: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["error"]["code"], "backup_refused");
    // Nothing was moved aside by any of them.
    let replaced = std::fs::read_dir(env.dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_str().unwrap().contains(".replaced-"))
        .count();
    assert_eq!(replaced, 0);
    // The good one restores (no dispatcher ever ran here).
    env.ok(&["ledger", "restore", good.to_str().unwrap()]);
}

#[test]
fn a_postgresql_ledger_gets_the_pg_dump_command_and_nothing_pretended() {
    let schema = unavez_testkit::PgSchema::new();
    let env = Env::postgres(&Cfg::motor("http://127.0.0.1:9"), &schema.url);
    let dir = env.path("copias");
    let (code, out, err) = run(&env, &["ledger", "backup", dir.to_str().unwrap()]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("pg_dump --format=custom"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    // The command alone on stdout, never the password.
    assert!(out.starts_with("pg_dump --format=custom --host="), "{out}");
    assert!(!out.contains("password") && !out.contains('@'), "{out}");
    assert!(err.contains(&format!("--schema={}", schema.name)), "{err}");
    assert!(
        err.contains("--port=") && err.contains("--dbname=") && err.contains("--username="),
        "{err}"
    );
    assert!(!dir.exists(), "no directory, no file: nothing was backed up");
    let (code, out, _) = run(&env, &["ledger", "backup", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 3);
    let e: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["error"]["code"], "postgres_ledger");
    let (code, _, err) = run(&env, &["ledger", "restore", "/tmp/whatever.db"]);
    assert_eq!(code, 3);
    assert!(err.contains("pg_restore"), "{err}");
    // serve refuses [backup] on it, with the same advice.
    append_config(
        &env,
        &format!("[backup]\nevery = \"1h\"\ndir = \"{}\"\n", dir.display()),
    );
    let (code, _, err) = run(&env, &["serve"]);
    assert_eq!(code, 1);
    assert!(err.contains("[backup]") && err.contains("pg_dump"), "{err}");
}

/// `GET /metrics` over plain HTTP/1.0.
fn metrics(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

fn sample(metrics: &str, name: &str) -> Option<i64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn serve_takes_the_configured_backups_and_reports_them() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 3);
    let mut cfg = Cfg::motor(&sim.base_url());
    let port = free_port();
    cfg.server_listen = format!("127.0.0.1:{port}");
    let env = Env::new(&cfg);
    env.import("a.jsonl", &[scheduled("cita-1", 1)]);
    let dir = env.path("copias");
    append_config(
        &env,
        &format!("[backup]\nevery = \"1h\"\ndir = \"{}\"\nkeep = 2\n", dir.display()),
    );
    let mut serve = env.spawn(&["serve"]);
    // No backup yet: the first one is taken at the start.
    assert!(wait_until(Duration::from_secs(20), || dir.exists() && !backups_in(&dir).is_empty()));
    let copy = &backups_in(&dir)[0];
    assert_eq!(mode(copy), 0o600);
    assert_eq!(inspect_file(copy).unwrap().quick_check, "ok");
    let addr = format!("127.0.0.1:{port}");
    let mut m = String::new();
    assert!(wait_until(Duration::from_secs(10), || {
        m = std::net::TcpStream::connect(&addr)
            .map(|_| metrics(&addr))
            .unwrap_or_default();
        sample(&m, "unavez_backup_last_success_timestamp_seconds").is_some_and(|t| t > 0)
    }));
    assert_eq!(
        sample(&m, "unavez_backup_last_failure_timestamp_seconds"),
        Some(0),
        "{m}"
    );
    assert_eq!(sample(&m, "unavez_alert{kind=\"backup_failing\"}"), Some(0), "{m}");
    assert_eq!(sample(&m, "unavez_alert{kind=\"backup_stale\"}"), Some(0), "{m}");
    assert_eq!(
        sample(&m, "unavez_alert_threshold{kind=\"backup_stale\"}"),
        Some(7200),
        "{m}"
    );
    serve.terminate();
    // A restart within the hour takes no second backup.
    let mut again = env.spawn(&["serve"]);
    std::thread::sleep(Duration::from_secs(2));
    again.terminate();
    assert_eq!(backups_in(&dir).len(), 1);

    // A directory that cannot be made: the failure is on /metrics and
    // is an alert.
    let blocker = env.path("un-archivo");
    std::fs::write(&blocker, "x").unwrap();
    let broken = env.alt_config("broken.toml", &cfg);
    let mut f = std::fs::OpenOptions::new().append(true).open(&broken).unwrap();
    writeln!(
        f,
        "\n[backup]\nevery = \"1h\"\ndir = \"{}/copias\"\n",
        blocker.display()
    )
    .unwrap();
    let mut failing = dispatch_support::Proc(Some(
        env.command_with(&broken, &["serve"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    assert!(wait_until(Duration::from_secs(20), || {
        m = std::net::TcpStream::connect(&addr)
            .map(|_| metrics(&addr))
            .unwrap_or_default();
        sample(&m, "unavez_backup_last_failure_timestamp_seconds").is_some_and(|t| t > 0)
    }));
    assert_eq!(sample(&m, "unavez_alert{kind=\"backup_failing\"}"), Some(1), "{m}");
    failing.terminate();
    rt.block_on(sim.shutdown());
}
