//! The real `unavez` binary on a real ledger, for the hardened-edges tests
//! (issue 11): a config with small limits, `serve` as a child process on
//! loopback, raw TCP clients for the attacks.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_unavez");
pub const MOTOR_SECRET: &str = "secreto-del-motor-de-prueba";

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A temp dir with a config (`extra` appended) and its ledger path.
pub struct Site {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub config: PathBuf,
    pub port: u16,
}

impl Site {
    pub fn new(server: &str, extra: &str) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("unavez.db");
        let config = dir.path().join("unavez.toml");
        let port = free_port();
        std::fs::write(
            &config,
            format!(
                r#"database = "{db}"
{extra}
[policy]
lease_seconds = 3

[dispatcher]
poll_ms = 200

[server]
listen = "127.0.0.1:{port}"
{server}

[channel]
kind = "motor"
[channel.motor]
base_url = "http://127.0.0.1:9"
instance_id = "clinica-test"
api_key_env = "UNAVEZ_TEST_MOTOR_KEY"
"#,
                db = db.display()
            ),
        )
        .unwrap();
        Site { dir, db, config, port }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--config")
            .arg(&self.config)
            .args(args)
            .env("UNAVEZ_TEST_MOTOR_KEY", "clave")
            .env("UNAVEZ_MOTOR_WEBHOOK_SECRET", MOTOR_SECRET)
            .env_remove("UNAVEZ_DB")
            .env_remove("UNAVEZ_CONFIG")
            .env_remove("RUST_LOG");
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "unavez {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `unavez serve`, waiting until it answers `/healthz`.
    pub fn serve(&self) -> Serve {
        self.serve_with(&[])
    }

    /// [`Site::serve`] with more environment variables.
    pub fn serve_with(&self, env: &[(&str, &str)]) -> Serve {
        let child = self
            .command(&["serve"])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let serve = Serve {
            child: Some(child),
            port: self.port,
        };
        let up = wait_until(Duration::from_secs(30), || {
            serve.get("/healthz").is_some_and(|(s, _)| s == 200)
        });
        assert!(up, "serve did not become healthy on port {}", self.port);
        serve
    }
}

pub struct Serve {
    pub child: Option<Child>,
    pub port: u16,
}

impl Serve {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// One HTTP/1.1 request on a new connection: (status, body).
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<(u16, String)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).ok()?;
        s.write_all(body).ok()?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).ok()?;
        parse_response(&out)
    }

    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        self.request("GET", path, &[], b"")
    }

    /// SIGTERM, then wait; returns stderr.
    pub fn stop(mut self) -> String {
        let mut child = self.child.take().unwrap();
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn parse_response(raw: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(raw);
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// This process's real uid (from /proc, no libc).
pub fn uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}
