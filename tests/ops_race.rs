//! Two supervisors at once must not send twice (issue 24, section 1): real
//! `unavez intents resend|contact` processes race on the same cases, on a
//! SQLite file and on PostgreSQL, against each other, against the daily
//! cap and against a cancellation import. The engine simulator's log
//! (`sent.jsonl`) after dispatch is the ground truth of what reached the
//! patients; `operator_actions` must hold every attempt, refusals included.
//!
//! Before per-case serialization, on PostgreSQL, racing supervisors read
//! the guard's facts under READ COMMITTED without a lock: two resends of
//! one message were created (and both went out), the daily cap was
//! exceeded, `--acknowledge-delivered` losers died with a raw `23505`, and
//! a resend authorized after a cancellation had committed was created.

mod dispatch_support;

use std::collections::HashMap;
use std::process::{Command, Output};
use std::time::Duration;

use chrono::Utc;
use dispatch_support::*;
use unavez::domain::state::{IntentionState, Signal};
use unavez::store::{Cause, Entry};
use unavez_testkit::{Backend, on_both};

/// Processes racing on each case.
const RACERS: usize = 8;
const REASON: &str = "la paciente dice que no lo encuentra";

fn notice(n: usize) -> String {
    format!("cita-{n}:aviso-reserva:v1")
}

fn resend_of(n: usize, k: u32) -> String {
    format!("{}:reenvio:{k}", notice(n))
}

/// Two supervisors and the front desk; `os` maps `supervisora` to the OS
/// account running the test (the account then decides who acts).
fn operators(os: Option<&str>) -> String {
    let os_user = |name: &str| match os {
        Some(me) if name == "supervisora" => format!("os_user = \"{me}\"\n"),
        Some(_) => format!("os_user = \"unavez-nadie-{name}\"\n"),
        None => String::new(),
    };
    [
        "recepcion:front_desk",
        "supervisora:supervisor",
        "supervisor2:supervisor",
    ]
    .iter()
    .map(|o| {
        let (name, role) = o.split_once(':').unwrap();
        format!(
            "\n[[operator]]\nname = \"{name}\"\nrole = \"{role}\"\n{}",
            os_user(name)
        )
    })
    .collect()
}

/// What one racing process did.
struct Attempt {
    key: String,
    code: i32,
    json: Option<serde_json::Value>,
    stderr: String,
}

impl Attempt {
    fn from(key: &str, json: bool, out: Output) -> Attempt {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let code = out.status.code().unwrap_or(-1);
        // Judged later, after the ground truth: a raw database error
        // prints no document, and the test says so then.
        let json = if json { serde_json::from_str(&stdout).ok() } else { None };
        Attempt {
            key: key.to_string(),
            code,
            json,
            stderr,
        }
    }

    fn rule(&self) -> Option<&str> {
        self.json.as_ref().and_then(|j| j["rule"].as_str())
    }
}

/// A ledger beside the engine simulator with `count` appointments whose
/// booking notices the channel accepted. Fields drop in order: the ledger
/// (and its schema) before the simulator and its runtime.
struct Race {
    env: Env,
    os_config: std::path::PathBuf,
    log: tempfile::NamedTempFile,
    _sim: unavez::sim::SimHandle,
    _rt: tokio::runtime::Runtime,
}

impl Race {
    fn new(backend: Backend, count: usize, policy: &str) -> Race {
        let rt = runtime();
        let log = tempfile::NamedTempFile::new().unwrap();
        let sim = start_sim(&rt, log.path(), "", 24);
        let env = Env::with(backend, &Cfg::motor(&sim.base_url()).with_lease(30));
        let base = std::fs::read_to_string(&env.config).unwrap();
        let base = base.replacen("[policy]\n", &format!("[policy]\n{policy}\n"), 1);
        std::fs::write(&env.config, format!("{base}{}", operators(None))).unwrap();
        let me = unavez::ops::identity::current_account().unwrap();
        let os_config = env.path("os.toml");
        std::fs::write(&os_config, format!("{base}{}", operators(Some(&me)))).unwrap();
        let events: Vec<String> = (0..count).map(|n| scheduled(&format!("cita-{n}"), n)).collect();
        env.import("agenda.jsonl", &events);
        env.ok(&["dispatch", "--until-idle"]);
        assert!(wait_until(Duration::from_secs(20), || sent_keys(log.path()).len() >= count));
        Race {
            env,
            os_config,
            log,
            _sim: sim,
            _rt: rt,
        }
    }

    /// Feeds channel evidence through the ledger's state machine, as the
    /// engine's webhooks would.
    fn evidence(&self, key: &str, signals: &[Signal]) {
        let mut store = self.env.store();
        let id = store.read(|tx| tx.find_intention(key)).unwrap().id;
        for s in signals {
            let entry = Entry {
                signal: s.name(),
                cause: Cause::Webhook,
                evidence: Some("test"),
                note: None,
                commitment_version: Some(1),
            };
            store.write(|tx| tx.signal(id, *s, &entry, Utc::now())).unwrap();
        }
    }

    /// `unavez intents resend KEY` by racer `i`: every other racer asks for
    /// `--json`, the rest read the Spanish text.
    fn resend(&self, key: &str, i: usize, os: bool, extra: &[&str]) -> (Command, bool) {
        let json = i.is_multiple_of(2);
        let who = if i % 4 < 2 { "supervisora" } else { "supervisor2" };
        let mut args = vec!["intents", "resend", key, "--reason", REASON];
        if !os {
            args.extend(["--operator", who]);
        }
        if json {
            args.push("--json");
        }
        args.extend_from_slice(extra);
        let config = if os { &self.os_config } else { &self.env.config };
        (self.env.command_with(config, &args), json)
    }

    /// Starts every command of one round at once and waits for them all.
    fn round(&self, key: &str, commands: Vec<(Command, bool)>) -> Vec<Attempt> {
        let children: Vec<_> = commands
            .into_iter()
            .map(|(mut c, json)| {
                (
                    c.stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .unwrap(),
                    json,
                )
            })
            .collect();
        children
            .into_iter()
            .map(|(child, json)| Attempt::from(key, json, child.wait_with_output().unwrap()))
            .collect()
    }

    fn dispatch_all(&self, expected: usize) {
        self.env.ok(&["dispatch", "--until-idle"]);
        let log = self.log.path();
        assert!(
            wait_until(Duration::from_secs(20), || sent_keys(log).len() >= expected),
            "{} sent, {expected} expected",
            sent_keys(log).len()
        );
    }

    fn exists(&self, key: &str) -> bool {
        self.env.store().read(|tx| tx.find_intention(key)).is_ok()
    }

    fn actions(&self) -> Vec<unavez::store::OperatorActionRow> {
        self.env.store().read(|tx| tx.operator_actions(100_000)).unwrap()
    }
}

/// A refusal because another supervisor's resend is pending: exit 3, the
/// rule, who authorized it and when, in Spanish.
fn assert_lost_to(a: &Attempt, winner: &str) {
    assert_eq!(a.code, 3, "{}: {:?} {}", a.key, a.json, a.stderr);
    assert!(
        !a.stderr.contains("23505") && !a.stderr.contains("duplicate key"),
        "{}",
        a.stderr
    );
    match &a.json {
        Some(j) => {
            assert_eq!(j["result"], "refused", "{j}");
            assert_eq!(j["rule"], "resend_pending", "{j}");
            assert_eq!(j["refusal"]["authorized_by"], winner, "{j}");
            assert!(j["refusal"]["authorized_at"].is_string(), "{j}");
            let message = j["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("{winner} ya autorizó un reenvío ")),
                "{message}"
            );
            assert!(j["action_id"].is_i64(), "{j}");
        }
        None => {
            assert!(a.stderr.contains("[resend_pending]"), "{}", a.stderr);
            assert!(
                a.stderr.contains(&format!("{winner} ya autorizó un reenvío ")),
                "{}",
                a.stderr
            );
        }
    }
    assert!(
        !a.stderr.contains("23505") && !a.stderr.contains("duplicate key"),
        "{}",
        a.stderr
    );
}

/// Thirty cases, eight supervisors each, all at once: ten plain, ten whose
/// notice was already delivered (`--acknowledge-delivered`), ten with the
/// operator taken from the OS account. Exactly one resend per case, in the
/// ledger and in what the engine sent; every loser refused and audited.
fn eight_supervisors_racing_on_thirty_cases_authorize_one_resend_each(backend: Backend) {
    const CASES: usize = 30;
    let race = Race::new(backend, CASES, "");
    for n in 10..20 {
        race.evidence(&notice(n), &[Signal::Delivered]);
    }
    let mut attempts = Vec::new();
    for n in 0..CASES {
        let key = notice(n);
        let commands = (0..RACERS)
            .map(|i| match n {
                0..10 => race.resend(&key, i, false, &[]),
                10..20 => race.resend(&key, i, false, &["--acknowledge-delivered"]),
                _ => race.resend(&key, i, true, &[]),
            })
            .collect();
        attempts.push(race.round(&key, commands));
    }
    race.dispatch_all(2 * CASES);

    // Ground truth: each notice and its one resend reached the engine once.
    std::thread::sleep(Duration::from_millis(300));
    let sent = sent_counts(race.log.path());
    let twice: Vec<_> = (0..CASES).filter(|n| sent.contains_key(&resend_of(*n, 2))).collect();
    assert!(twice.is_empty(), "cases whose patient got two resends: {twice:?}");
    for n in 0..CASES {
        assert_eq!(sent.get(&notice(n)), Some(&1), "{n}: {sent:?}");
        assert_eq!(sent.get(&resend_of(n, 1)), Some(&1), "{n}: {sent:?}");
        assert!(!race.exists(&resend_of(n, 2)), "two resends of case {n}");
    }
    assert_eq!(sent.values().sum::<usize>(), 2 * CASES, "{sent:?}");

    // One winner per case; the others were told who won and when.
    for (n, round) in attempts.iter().enumerate() {
        let (won, lost): (Vec<_>, Vec<_>) = round.iter().partition(|a| a.code == 0);
        assert_eq!(
            won.len(),
            1,
            "case {n}: {:?}",
            round.iter().map(|a| (a.code, a.rule())).collect::<Vec<_>>()
        );
        let winner = race.env.store().read(|tx| tx.find_intention(&resend_of(n, 1))).unwrap();
        let winner = winner.authorized_by.unwrap();
        if n >= 20 {
            assert_eq!(winner, "supervisora", "the OS account decides who acts");
        }
        for a in lost {
            assert_lost_to(a, &winner);
        }
        let ack = race.env.store().read(|tx| {
            let id = tx.find_intention(&resend_of(n, 1))?.id;
            tx.resend_acknowledgement(id)
        });
        assert_eq!(ack.unwrap().is_some(), (10..20).contains(&n), "case {n}");
    }

    // Every attempt is in the audit log, refusals included.
    let actions = race.actions();
    let resends: Vec<_> = actions.iter().filter(|a| a.action == "authorize_resend").collect();
    assert_eq!(resends.len(), CASES * RACERS);
    assert_eq!(resends.iter().filter(|a| a.result == "done").count(), CASES);
    assert_eq!(
        resends.iter().filter(|a| a.result == "refused").count(),
        CASES * (RACERS - 1)
    );
}

/// The cap counts inside the locked transaction: with one resend a day,
/// eight racers create one, and once it left, eight more are all refused
/// by the cap.
fn racing_supervisors_never_exceed_the_daily_cap(backend: Backend) {
    const CASES: usize = 8;
    let race = Race::new(backend, CASES, "max_resends_per_day = 1");
    for phase in 0..2 {
        for n in 0..CASES {
            let key = notice(n);
            let round = race.round(&key, (0..RACERS).map(|i| race.resend(&key, i, false, &[])).collect());
            let done = round.iter().filter(|a| a.code == 0).count();
            assert_eq!(done, 1 - phase, "case {n}, phase {phase}");
            for a in round.iter().filter(|a| a.code != 0) {
                assert_eq!(a.code, 3, "{}", a.stderr);
                match (phase, &a.json) {
                    (0, _) => assert_eq!(a.rule().unwrap_or("resend_pending"), "resend_pending"),
                    (_, Some(j)) => {
                        assert_eq!(j["rule"], "daily_cap", "{j}");
                        assert_eq!(j["refusal"]["limit"], 1, "{j}");
                    }
                    (_, None) => assert!(a.stderr.contains("regla de tope diario"), "{}", a.stderr),
                }
            }
        }
        race.dispatch_all(2 * CASES);
    }
    std::thread::sleep(Duration::from_millis(300));
    let sent = sent_counts(race.log.path());
    for n in 0..CASES {
        assert_eq!(sent.get(&resend_of(n, 1)), Some(&1), "{n}: {sent:?}");
        assert!(!race.exists(&resend_of(n, 2)), "case {n} over the cap");
    }
    assert_eq!(sent.values().sum::<usize>(), 2 * CASES, "{sent:?}");
    let refused = race
        .actions()
        .into_iter()
        .filter(|a| a.action == "authorize_resend" && a.result == "refused")
        .count();
    assert_eq!(refused, 2 * CASES * RACERS - CASES);
}

/// Resends and manual contacts racing the booking system's cancellation:
/// whichever commits first, the other sees it. A resend or contact after
/// the cancellation is refused; a resend before it is closed by it; the
/// cancellation is never undone; nothing but the original notices goes
/// out.
fn resends_and_contacts_racing_a_cancellation_import_never_outlive_it(backend: Backend) {
    const CASES: usize = 12;
    let race = Race::new(backend, CASES, "");
    let mut attempts = Vec::new();
    for n in 0..CASES {
        let key = notice(n);
        let file = race
            .env
            .write_events(&format!("cancel-{n}.jsonl"), &[cancelled(&format!("cita-{n}"))]);
        let mut commands: Vec<(Command, bool)> = (0..4).map(|i| race.resend(&key, i, false, &[])).collect();
        for json in [true, false] {
            let mut args = vec![
                "intents",
                "contact",
                &key,
                "--operator",
                "recepcion",
                "--reason",
                "la llamé",
            ];
            if json {
                args.push("--json");
            }
            commands.push((race.env.command(&args), json));
        }
        commands.insert(2, (race.env.command(&["import", file.to_str().unwrap()]), false));
        let round = race.round(&key, commands);
        let (import, ops): (Vec<_>, Vec<_>) = round.into_iter().enumerate().partition(|(i, _)| *i == 2);
        assert_eq!(import[0].1.code, 0, "import: {}", import[0].1.stderr);
        attempts.extend(ops.into_iter().map(|(_, a)| a));
    }

    // Nothing outlives the cancellation: no message waits to be sent, and
    // every commitment stays cancelled.
    let mut store = race.env.store();
    for n in 0..CASES {
        let c = store.read(|tx| tx.commitment(&format!("cita-{n}"))).unwrap().unwrap();
        assert!(
            c.commitment.is_cancelled(),
            "case {n} was un-cancelled: {:?}",
            c.commitment.status
        );
    }
    let planned: Vec<String> = race
        .env
        .intentions()
        .into_iter()
        .filter(|i| i.state == IntentionState::Planned && i.key.contains(":reenvio:"))
        .map(|i| i.key)
        .collect();
    assert!(planned.is_empty(), "authorized after the cancellation: {planned:?}");
    // The booking notices, then the cancellation notices; no resend.
    race.dispatch_all(2 * CASES);
    std::thread::sleep(Duration::from_millis(300));
    let sent = sent_counts(race.log.path());
    let resent: Vec<_> = sent.keys().filter(|k| k.contains(":reenvio:")).collect();
    assert!(resent.is_empty(), "a resend outlived the cancellation: {resent:?}");
    assert_eq!(sent.len(), 2 * CASES, "{sent:?}");
    assert!(sent.values().all(|n| *n == 1), "{sent:?}");

    // Each attempt was done before the cancellation or refused after it.
    let mut rules: HashMap<String, usize> = HashMap::new();
    for a in &attempts {
        assert!(a.code == 0 || a.code == 3, "{}: exit {} {}", a.key, a.code, a.stderr);
        if a.code == 3
            && let Some(rule) = a.rule()
        {
            *rules.entry(rule.to_string()).or_default() += 1;
            assert!(
                ["commitment_cancelled", "resend_pending", "closed"].contains(&rule),
                "{:?}",
                a.json
            );
        }
    }
    let done = attempts.iter().filter(|a| a.code == 0).count();
    eprintln!("{done} done before the cancellation; refused (JSON ones): {rules:?}");
    let audited = race
        .actions()
        .into_iter()
        .filter(|a| a.action == "authorize_resend" || a.action == "manual_contact")
        .count();
    assert_eq!(audited, CASES * 6, "{rules:?}");
}

on_both!(
    eight_supervisors_racing_on_thirty_cases_authorize_one_resend_each,
    racing_supervisors_never_exceed_the_daily_cap,
    resends_and_contacts_racing_a_cancellation_import_never_outlive_it,
);
