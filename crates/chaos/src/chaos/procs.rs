//! Child processes of a chaos run: the simulator, the imports and the
//! dispatchers are the `unavez` command line (this binary re-executed with [`super::CHILD_ARG`]),
//! started, SIGKILLed and restarted like an operator's supervisor would.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::ChaosError;

/// Secrets the children share (test values, never real ones).
pub const API_KEY: &str = "chaos-api-key";
pub const WEBHOOK_SECRET: &str = "chaos-webhook-secret";

/// Paths and binary of one run.
#[derive(Debug, Clone)]
pub struct Env {
    pub bin: PathBuf,
    pub dir: PathBuf,
    /// The configuration of the simulator and the imports.
    pub config: PathBuf,
    /// The ledger as the imports get it (`--db`).
    pub db: String,
    /// Each dispatcher's configuration (its own HTTP port) and `--db` (its
    /// own `application_name` on PostgreSQL).
    pub dispatchers: Vec<(PathBuf, String)>,
    /// Imports run again after PostgreSQL refused their transaction.
    pub import_retries: std::cell::Cell<u32>,
}

/// Runs of one import file, at most (see [`Env::import`]).
pub const IMPORT_TRIES: u32 = 5;

impl Env {
    fn command(&self) -> Command {
        self.command_armed(&self.config, &self.db, None)
    }

    /// A child, with failpoints armed by `spec` if given.
    fn command_armed(&self, config: &Path, db: &str, failpoints: Option<&str>) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg(super::CHILD_ARG);
        if let Some(spec) = failpoints {
            c.arg(super::FAILPOINTS_ARG).arg(spec);
        }
        c.arg("--config")
            .arg(config)
            .arg("--db")
            .arg(db)
            .env("UNAVEZ_MOTOR_API_KEY", API_KEY)
            .env("UNAVEZ_MOTOR_WEBHOOK_SECRET", WEBHOOK_SECRET)
            .stdin(Stdio::null());
        c
    }

    fn log(&self, name: &str) -> Result<Stdio, ChaosError> {
        let path = self.dir.join(name);
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| ChaosError::Io(format!("opening {}: {e}", path.display())))?;
        Ok(Stdio::from(f))
    }

    /// `unavez import FILE`, waited for. A PostgreSQL ledger may refuse
    /// the import's transaction with a deadlock or a serialization failure
    /// (the dispatchers write the same rows); the file is then stored whole
    /// or not at all, so it is run again, as an operator would, up to
    /// [`IMPORT_TRIES`] times in all; each rerun is counted in
    /// [`Env::import_retries`].
    pub fn import(&self, file: &Path) -> Result<(), ChaosError> {
        for attempt in 1..=IMPORT_TRIES {
            let out = self
                .command()
                .arg("import")
                .arg(file)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
                .map_err(|e| ChaosError::Io(format!("running unavez import: {e}")))?;
            let log = self.dir.join("import.log");
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .and_then(|mut f| f.write_all(&out.stderr))
                .map_err(|e| ChaosError::Io(format!("writing {}: {e}", log.display())))?;
            if out.status.success() {
                return Ok(());
            }
            let said = String::from_utf8_lossy(&out.stderr);
            if attempt < IMPORT_TRIES && (said.contains("(40P01)") || said.contains("(40001)")) {
                self.import_retries.set(self.import_retries.get() + 1);
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            return Err(ChaosError::Child(format!(
                "unavez import {} failed ({}); see {}",
                file.display(),
                out.status,
                log.display()
            )));
        }
        Ok(())
    }

    /// Starts dispatcher `i` (`unavez serve`: dispatcher, reconciler,
    /// HTTP server), optionally with failpoints armed; its log is
    /// `dispatcher-<i>.log`.
    pub fn start_dispatcher(&self, i: usize, failpoint: Option<&str>) -> Result<Child, ChaosError> {
        let (config, db) = &self.dispatchers[i];
        let mut c = self.command_armed(config, db, failpoint);
        c.arg("serve")
            .stdout(Stdio::null())
            .stderr(self.log(&format!("dispatcher-{i}.log"))?);
        c.spawn()
            .map_err(|e| ChaosError::Io(format!("starting unavez serve: {e}")))
    }

    /// Starts `unavez sim` on `port` (0 = any) and waits for its address.
    pub fn start_sim(&self, port: u16, seed: u64, faults: &str, webhook: &str) -> Result<(Child, u16), ChaosError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut child = self
                .command()
                .arg("sim")
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--seed")
                .arg(seed.to_string())
                .arg("--faults")
                .arg(faults)
                .arg("--log")
                .arg(self.dir.join("sent.jsonl"))
                .arg("--state")
                .arg(self.dir.join("engine-state.jsonl"))
                .arg("--webhook")
                .arg(webhook)
                .stdout(Stdio::piped())
                .stderr(self.log("sim.log")?)
                .spawn()
                .map_err(|e| ChaosError::Io(format!("starting unavez sim: {e}")))?;
            let out = child.stdout.take().ok_or_else(|| ChaosError::Io("sim stdout".into()))?;
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                // Keep draining so the simulator never blocks on a full pipe.
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(line) => {
                    let bound = line
                        .rsplit(':')
                        .next()
                        .and_then(|p| p.trim().parse::<u16>().ok())
                        .ok_or_else(|| ChaosError::Child(format!("unexpected sim banner {line:?}")))?;
                    return Ok((child, bound));
                }
                Err(_) => {
                    // The port may still be held by the killed simulator.
                    let _ = child.kill();
                    let _ = child.wait();
                    if Instant::now() > deadline {
                        return Err(ChaosError::Child(format!(
                            "unavez sim did not start on port {port}; see {}",
                            self.dir.join("sim.log").display()
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
        }
    }
}

/// SIGKILL and reap.
pub fn kill(child: &mut Child) -> Option<ExitStatus> {
    let _ = child.kill();
    child.wait().ok()
}

/// Sends a signal by name with the system `kill` (`TERM`, `INT`, `STOP`,
/// `CONT`); whether it was delivered.
pub fn signal(child: &Child, signal: &str) -> bool {
    Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A graceful stop (SIGTERM/SIGINT), then up to `grace` before SIGKILL.
pub fn stop(child: &mut Child, sig: &str, grace: Duration) -> Option<ExitStatus> {
    signal(child, sig);
    wait_for(child, grace).or_else(|| kill(child))
}

/// Whether the child is still running.
pub fn alive(child: &mut Child) -> bool {
    matches!(child.try_wait(), Ok(None))
}

/// Waits up to `limit` for the child to exit.
pub fn wait_for(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to `limit` for the first of `children` to exit; its status.
pub fn wait_any(children: &mut [Child], limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = children.iter_mut().find_map(|c| c.try_wait().ok().flatten()) {
            return Some(s);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether an exit status is the abort a failpoint causes (SIGABRT).
pub fn aborted(s: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    s.signal() == Some(6)
}

/// A listener on a free loopback port, for a server of this process.
pub fn loopback_listener() -> Result<std::net::TcpListener, ChaosError> {
    std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| ChaosError::Io(format!("finding a free port: {e}")))
}

/// A free loopback port for a child process to bind (bound and released:
/// another bind may take it meanwhile, so only where the child binds it at
/// once).
pub fn free_port() -> Result<u16, ChaosError> {
    loopback_listener()?
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| ChaosError::Io(e.to_string()))
}
