//! # unavez-testkit — what the tests of several crates share
//!
//! A dev crate (`publish = false`): nothing here ships in the product.
//!
//! | item | job |
//! |---|---|
//! | [`PgSchema`] | a PostgreSQL schema of its own for one test, dropped afterwards, addressed by a `postgres://` URL that any unavez command or ledger call accepts |
//! | [`Backend`], [`TestLedger`], [`on_both!`] | the conformance suite: one test body, run once per backend (`NAME::sqlite`, `NAME::postgres`) |
//! | [`PrivatePg`] | a PostgreSQL cluster of the test's own (initdb into a temporary directory, its own port), for tests that restart or stop the server |
//! | [`sent_keys`] | the keys in the engine simulator's ground-truth log (`sent.jsonl`), the independent record the tests judge sends by |
//!
//! **Where the server is:** `UNAVEZ_TEST_PG` (`.ci/run` creates one
//! database per run and drops it afterwards), or the local server's
//! `postgres` database. An unreachable server fails the test: the
//! PostgreSQL suite is never skipped.
//!
//! **Layering:** depends on nothing of unavez (URLs are plain strings), so
//! every crate's tests can use it, the ledger's included.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Keys in a ground-truth log (one JSON line per message that went out),
/// in order; none when the log does not exist yet.
pub fn sent_keys(log: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(log) else {
        return Vec::new();
    };
    // The simulator may be appending while this reads: a last line without
    // its newline is still being written, and is counted on the next read.
    let complete = text.rfind('\n').map_or("", |end| &text[..=end]);
    complete
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["key"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Which ledger a conformance test runs on; [`on_both!`] runs each body on
/// both, so the two backends pass one suite, not two copies of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A ledger file in the test's temporary directory.
    Sqlite,
    /// A scratch schema of its own ([`PgSchema`]).
    Postgres,
}

impl Backend {
    /// A fresh, empty ledger location for one test: `ledger.db` in a
    /// temporary directory, or a schema of its own. Either goes wherever
    /// unavez takes a ledger (`--db`, `database =`, `Location::parse`).
    pub fn ledger(self) -> TestLedger {
        let dir = tempfile::tempdir().expect("temporary directory");
        self.ledger_in(dir)
    }

    /// The same, keeping the test's own directory (config files, agendas)
    /// beside it; the ledger file, for SQLite, is `DIR/ledger.db`.
    pub fn ledger_in(self, dir: tempfile::TempDir) -> TestLedger {
        match self {
            Backend::Sqlite => TestLedger {
                db: dir.path().join("ledger.db"),
                dir,
                _schema: None,
            },
            Backend::Postgres => {
                let schema = PgSchema::new();
                TestLedger {
                    db: PathBuf::from(&schema.url),
                    dir,
                    _schema: Some(schema),
                }
            }
        }
    }
}

/// A test's ledger and its directory, both removed when this drops.
pub struct TestLedger {
    /// The ledger's location as unavez takes it: a file path or a URL.
    pub db: PathBuf,
    /// Scratch space for the test's other files.
    pub dir: tempfile::TempDir,
    _schema: Option<PgSchema>,
}

impl TestLedger {
    pub fn db(&self) -> &Path {
        &self.db
    }
}

/// Defines, for each named body `fn NAME(backend: Backend)`, a module
/// `NAME` with one test per backend (`NAME::sqlite`, `NAME::postgres`).
/// `async:` before the names runs `async fn NAME(backend: Backend)` bodies
/// on a two-thread tokio runtime, as the server's tests need.
#[macro_export]
macro_rules! on_both {
    (async: $($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::Backend::Sqlite).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::Backend::Postgres).await
                }
            }
        )+
    };
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[test]
                fn sqlite() {
                    super::$name($crate::Backend::Sqlite)
                }
                #[test]
                fn postgres() {
                    super::$name($crate::Backend::Postgres)
                }
            }
        )+
    };
}

/// The local server's maintenance database, when `UNAVEZ_TEST_PG` is unset.
pub const DEFAULT_PG: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A schema that is dropped, with everything in it, when this is dropped.
pub struct PgSchema {
    base: String,
    pub name: String,
    /// The base URL with `search_path` set to this schema (and `public`,
    /// where the `pg_trgm` extension lives).
    pub url: String,
}

impl PgSchema {
    /// Creates a fresh schema; panics, saying how to fix it, when the
    /// server cannot be reached.
    pub fn new() -> PgSchema {
        let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| DEFAULT_PG.to_string());
        PgSchema::in_database(&base)
    }

    /// The same in the database `base` names (the bench's `--pg`).
    pub fn in_database(base: &str) -> PgSchema {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = base.to_string();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "unavez_t{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        on_own_thread(|| {
            let mut c = connect(&base);
            c.batch_execute(&format!("CREATE SCHEMA {name}"))
                .unwrap_or_else(|e| panic!("cannot create schema {name} at {}: {e}", shown(&base)));
        });
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{name}%2Cpublic");
        PgSchema { base, name, url }
    }
}

impl Default for PgSchema {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        on_own_thread(|| {
            if let Ok(mut c) = postgres::Client::connect(&self.base, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
            }
        });
    }
}

/// Runs `f` on a thread of its own: the synchronous client blocks on a
/// runtime of its own, which tokio refuses inside an async test.
fn on_own_thread(f: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        if let Err(panic) = s.spawn(f).join() {
            std::panic::resume_unwind(panic);
        }
    });
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL at {} is unreachable ({e}): start it (`pg_ctlcluster --skip-systemctl-redirect 15 main start`) or set UNAVEZ_TEST_PG",
            shown(url)
        )
    })
}

/// The URL without a password, for messages.
fn shown(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s && url[s + 3..at].contains(':') => {
            let user = &url[s + 3..at];
            format!(
                "{}{}:***{}",
                &url[..s + 3],
                &user[..user.find(':').unwrap_or(0)],
                &url[at..]
            )
        }
        _ => url.to_string(),
    }
}

/// A PostgreSQL cluster of the test's own: `initdb` into a temporary
/// directory, its own port and socket directory, stopped (immediately)
/// and removed when this drops. For tests that restart or stop the server:
/// the shared server on 5432 serves every other test at the same time and
/// must never be stopped (docs/testing.md).
///
/// The binaries are PostgreSQL 15's (`/usr/lib/postgresql/15/bin`, or
/// `UNAVEZ_PG_BIN`). PostgreSQL refuses to run as root, so under root they
/// run as the `postgres` OS user (`runuser -u postgres --`), which then
/// owns the directory.
pub struct PrivatePg {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    /// `postgres://postgres@127.0.0.1:PORT/postgres`: the cluster's own
    /// maintenance database, trusted, no password.
    pub url: String,
}

impl PrivatePg {
    /// Creates and starts a cluster; panics, with the tool's output, when
    /// it cannot.
    pub fn start() -> PrivatePg {
        let bin = PathBuf::from(std::env::var("UNAVEZ_PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into()));
        let dir = tempfile::Builder::new()
            .prefix("unavez-pg-")
            .tempdir()
            .expect("temporary directory");
        std::fs::create_dir(dir.path().join("sock")).expect("socket directory");
        if is_root() {
            run_ok(
                std::process::Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(dir.path()),
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let pg = PrivatePg {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            bin,
            port,
        };
        run_ok(&mut pg.tool(
            "initdb",
            &[
                "-D",
                &pg.data(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        ));
        pg.start_server();
        pg
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// `bin/NAME ARGS`, as the `postgres` user when we are root.
    fn tool(&self, name: &str, args: &[&str]) -> std::process::Command {
        let exe = self.bin.join(name);
        let mut c = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            std::process::Command::new(exe)
        };
        c.args(args).current_dir(self.dir.path());
        c
    }

    /// The server's options: its port, its own socket directory, loopback
    /// only, no fsync (a test's data need not survive a power cut).
    fn options(&self) -> String {
        format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60",
            self.port,
            self.dir.path().join("sock").display()
        )
    }

    fn log_path(&self) -> String {
        self.dir.path().join("server.log").display().to_string()
    }

    fn start_server(&self) {
        let (opts, log) = (self.options(), self.log_path());
        run_ok(&mut self.tool(
            "pg_ctl",
            &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "-t", "30", "start"],
        ));
    }

    /// Starts the server again after [`PrivatePg::stop`].
    pub fn resume(&self) {
        self.start_server();
    }

    /// Stops the server at once (`-m immediate`: no shutdown checkpoint,
    /// every connection cut, as a crash would).
    pub fn stop(&self) {
        run_ok(&mut self.tool("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"]));
    }

    /// `pg_ctl restart -m immediate`: every connection cut, crash recovery
    /// on start, the same port.
    pub fn restart_immediate(&self) {
        let (opts, log) = (self.options(), self.log_path());
        run_ok(&mut self.tool(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &opts,
                "-l",
                &log,
                "-m",
                "immediate",
                "-w",
                "-t",
                "30",
                "restart",
            ],
        ));
    }

    /// The server's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let _ = self
            .tool("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// Whether this process runs as root (the owner of `/proc/self`).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn run_ok(c: &mut std::process::Command) {
    let out = c.output().unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
