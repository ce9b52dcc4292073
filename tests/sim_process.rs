//! `unavez sim` as a real OS process: listens, logs the ground truth,
//! keeps its memory across a SIGKILL with `--state`, rejects bad `--faults`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Sim {
    child: Child,
    base: String,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(args: &[&str]) -> Sim {
    let mut child = Command::new(env!("CARGO_BIN_EXE_unavez"))
        .args(["sim", "--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("UNAVEZ_MOTOR_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    Sim {
        child,
        base: format!("http://{addr}"),
    }
}

async fn post(sim: &Sim, key: &str, text: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/v1/instances/i1/messages", sim.base))
        .bearer_auth("k")
        .header("Idempotency-Key", key)
        .json(&serde_json::json!({"destino": {"telefono": "+51987654321"}, "texto": text}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn lines(p: &std::path::Path) -> usize {
    std::fs::read_to_string(p).map(|s| s.lines().count()).unwrap_or(0)
}

async fn until<F: FnMut() -> bool>(what: &str, mut f: F) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_sim_process_keeps_its_keys_across_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sent.jsonl");
    let state = dir.path().join("state.jsonl");
    let args = [
        "--log",
        log.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--seed",
        "7",
    ];
    let mut sim = start(&args);
    let (s, first) = post(&sim, "pedido-1", "Hola").await;
    assert_eq!(s, 202);
    until("the message goes out", || lines(&log) == 1).await;
    // SIGKILL, then a new process on the same files.
    sim.child.kill().unwrap();
    sim.child.wait().unwrap();
    let sim = start(&args);
    let (s, again) = post(&sim, "pedido-1", "Hola").await;
    assert_eq!(s, 202);
    assert_eq!(again["command_id"], first["command_id"]);
    assert_eq!(post(&sim, "pedido-1", "Otro").await.0, 409);
    let stats: Value = reqwest::get(format!("{}/sim/stats", sim.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["commands"], 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(lines(&log), 1, "never a second send for a known key");
}

#[tokio::test]
async fn runtime_pause_and_faults_over_http() {
    let sim = start(&["--faults", "error5xx=1.0"]);
    assert_eq!(post(&sim, "a", "Hola").await.0, 503);
    let c = reqwest::Client::new();
    let r = c
        .post(format!("{}/sim/faults", sim.base))
        .body("")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(post(&sim, "a", "Hola").await.0, 202);
    let r = c
        .post(format!("{}/sim/faults", sim.base))
        .body("bogus=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    // Down for a while (503), then back by itself.
    let r = c
        .post(format!("{}/sim/pause", sim.base))
        .json(&serde_json::json!({"mode": "unavailable", "for_ms": 300}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(post(&sim, "a", "Hola").await.0, 503);
    let start = Instant::now();
    while post(&sim, "a", "Hola").await.0 != 202 {
        assert!(start.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn bad_fault_spec_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_unavez"))
        .args(["sim", "--listen", "127.0.0.1:0", "--faults", "error5xx=2"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--faults") && err.contains("error5xx=2"), "{err}");
}

#[test]
fn sigterm_stops_the_sim_cleanly() {
    let mut sim = start(&[]);
    let pid = sim.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let start = Instant::now();
    loop {
        if let Some(status) = sim.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "sim did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn refuse_pause_over_http_comes_back_by_itself_with_its_memory() {
    let sim = start(&[]);
    let (_, first) = post(&sim, "down-1", "Hola").await;
    let c = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let r = c
        .post(format!("{}/sim/pause", sim.base))
        .json(&serde_json::json!({"mode": "refuse", "for_ms": 1500}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // Down: connections are refused (poll: the listener closes asynchronously).
    let start = Instant::now();
    loop {
        match c.get(format!("{}/sim/stats", sim.base)).send().await {
            Err(e) if e.is_connect() => break,
            _ => assert!(start.elapsed() < Duration::from_secs(20), "never refused"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Back by itself, remembering the key.
    let start = Instant::now();
    loop {
        if let Ok(r) = c
            .post(format!("{}/v1/instances/i1/messages", sim.base))
            .bearer_auth("k")
            .header("Idempotency-Key", "down-1")
            .json(&serde_json::json!({"destino": {"telefono": "+51987654321"}, "texto": "Hola"}))
            .send()
            .await
        {
            let v: Value = r.json().await.unwrap();
            assert_eq!(v["command_id"], first["command_id"]);
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
