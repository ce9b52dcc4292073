//! The reproduction with real processes: the engine simulator
//! (`unavez sim`) sends the messages and posts its signed webhooks to
//! `unavez serve` (dispatcher and webhook server), and a supervisor
//! authorizes resends with `unavez intents resend`. The simulator's log is
//! the ground truth of what reached the patient.
//!
//! Before the guard, a resend authorized after an earlier resend had been
//! read went out with no warning (`…:reenvio:2`, read again). Now it is
//! refused without the acknowledgement; with it, it is created and the
//! acknowledgement is recorded; the daily cap refuses a third.

mod resend_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use resend_support::{BIN, Extra, Ledger};
use unavez::domain::state::IntentionState;
use unavez_testkit::{Backend, on_both};

const KEY: &str = "cita-rep:aviso-reserva:v1";
const SECRET_ENV: &str = "UNAVEZ_MOTOR_WEBHOOK_SECRET";
const SECRET: &str = "secreto-del-motor-de-prueba";
const API_KEY_ENV: &str = "UNAVEZ_MOTOR_API_KEY";
const API_KEY: &str = "clave-de-prueba";

/// A child process this test started, killed if the test ends early.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `unavez sim` with fast delivery and reading; returns it and its address.
fn start_sim(log: &std::path::Path, webhook: &str) -> (Proc, String) {
    let mut child = Command::new(BIN)
        .args(["sim", "--listen", "127.0.0.1:0", "--webhook", webhook])
        .args(["--send-ms", "30", "--deliver-ms", "30", "--read-ms", "30"])
        .arg("--log")
        .arg(log)
        .env(SECRET_ENV, SECRET)
        .env(API_KEY_ENV, API_KEY)
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
        .unwrap_or_else(|| panic!("unexpected first line of sim: {line:?}"))
        .to_string();
    (Proc(child), addr)
}

fn wait_for_state(l: &Ledger, key: &str, state: IntentionState) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let now = l.store().read(|tx| tx.find_intention(key)).ok().map(|r| r.state);
        if now == Some(state) {
            return;
        }
        assert!(Instant::now() < deadline, "{key} never reached {state} (now {now:?})");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn resend(l: &Ledger, key: &str, acknowledge: bool) -> resend_support::Run {
    let mut args = vec![
        "intents",
        "resend",
        key,
        "--operator",
        "supervisora",
        "--reason",
        "la paciente dice que no lo encuentra",
        "--json",
    ];
    if acknowledge {
        args.push("--acknowledge-delivered");
    }
    l.run(&args)
}

fn a_resend_after_an_earlier_resend_was_read_needs_the_acknowledgement(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sent.jsonl");
    let port = free_port();
    let (_sim, addr) = start_sim(&log, &format!("http://127.0.0.1:{port}/webhooks/motor"));
    let tables = format!(
        "[dispatcher]\npoll_ms = 100\n\n[server]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [channel]\nkind = \"motor\"\n[channel.motor]\nbase_url = \"http://{addr}\"\ninstance_id = \"clinica-test\"\n"
    );
    let l = Ledger::new(
        backend,
        Extra {
            tables: &tables,
            ..Extra::default()
        },
    );
    l.book(&["cita-rep"], "Ana");
    let _serve = Proc(
        Command::new(BIN)
            .arg("--config")
            .arg(&l.config)
            .arg("serve")
            .env(SECRET_ENV, SECRET)
            .env(API_KEY_ENV, API_KEY)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // The booking notice goes out and the patient reads it.
    wait_for_state(&l, KEY, IntentionState::Read);
    // She says she cannot find it: the first resend already needs the
    // acknowledgement, since the engine reported it read.
    let r = resend(&l, KEY, false);
    assert_eq!(
        (r.code, r.json()["rule"].as_str()),
        (3, Some("acknowledge_delivery")),
        "{}",
        r.stdout
    );
    let r = resend(&l, KEY, true);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let first = format!("{KEY}:reenvio:1");
    wait_for_state(&l, &first, IntentionState::Read);

    // The reproduction: the earlier resend was read. Without the
    // acknowledgement nothing is created, and the refusal names the rule
    // and the message the patient already has.
    let r = resend(&l, KEY, false);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["rule"], "acknowledge_delivery");
    assert_eq!(j["refusal"]["key"], first.as_str());
    assert_eq!(j["refusal"]["state"], "read");
    assert!(
        j["message"].as_str().unwrap().contains("regla de entrega reconocida"),
        "{j}"
    );
    let messages = j["evidence"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert!(messages.iter().all(|m| m["read_at"].is_string()), "{j}");
    assert_eq!(messages[1]["authorized_by"], "supervisora");
    assert!(!l.exists(&format!("{KEY}:reenvio:2")));

    // With it: created, and the acknowledgement recorded with the action.
    let r = resend(&l, KEY, true);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    let second = format!("{KEY}:reenvio:2");
    assert_eq!(j["new_intention"]["key"], second.as_str());
    assert_eq!(j["acknowledged_delivery"], true);
    let show = l.run(&["intents", "show", &second, "--json"]);
    assert_eq!(show.json()["acknowledged_delivery"], true);
    assert_eq!(show.json()["acknowledgement"]["action_id"], j["action_id"]);
    wait_for_state(&l, &second, IntentionState::Read);

    // Two resends today: the cap refuses a third even when acknowledged.
    let r = resend(&l, KEY, true);
    assert_eq!(
        (r.code, r.json()["rule"].as_str()),
        (3, Some("daily_cap")),
        "{}",
        r.stdout
    );

    // Ground truth: each authorized message reached the engine once, and
    // nothing that was refused did.
    let keys = unavez_testkit::sent_keys(&log);
    for k in [KEY, first.as_str(), second.as_str()] {
        assert_eq!(keys.iter().filter(|s| s.as_str() == k).count(), 1, "{k} in {keys:?}");
    }
    assert_eq!(keys.len(), 3, "{keys:?}");
    let actions = l.actions();
    assert_eq!(
        actions.iter().map(|a| a.result.as_str()).collect::<Vec<_>>(),
        ["refused", "done", "refused", "done", "refused"],
        "{actions:?}"
    );
}

on_both!(a_resend_after_an_earlier_resend_was_read_needs_the_acknowledgement,);
