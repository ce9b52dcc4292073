//! Issue 3, test 8: reprocessing a day. The dry run changes nothing; the
//! real run dispatches what is planned and due, and never sends an
//! intention that already has an accepted attempt.

mod dispatch_support;

use std::time::Duration;

use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez_testkit::{Backend, on_both};

/// Everything a reprocess could touch, as one comparable snapshot.
fn snapshot(env: &Env) -> String {
    let mut s = String::new();
    for i in env.intentions() {
        let h = env.history(i.id);
        let a = env.store().read(|tx| tx.attempts(i.id)).unwrap();
        s.push_str(&format!(
            "{} {} {:?} {:?} {} {} {}\n",
            i.key,
            i.state,
            i.next_attempt_at,
            i.lease_owner,
            i.attempt_count,
            h.len(),
            a.len()
        ));
    }
    let actions = env.store().read(|tx| tx.operator_actions(100)).unwrap();
    s.push_str(&format!("operator actions: {}\n", actions.len()));
    s
}

fn reprocess_dry_run_changes_nothing_and_the_real_run_never_resends_accepted_ones(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 8);
    // A long lease: these tests are about claims, not about crash recovery.
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()).with_lease(30));
    // A morning that went out…
    let first: Vec<String> = (0..10).map(|n| scheduled(&format!("cita-r{n}"), n)).collect();
    env.import("manana.jsonl", &first);
    env.ok(&["dispatch", "--until-idle"]);
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 10));
    // …and bookings that arrived during an outage, still planned and due.
    let second: Vec<String> = (10..16).map(|n| scheduled(&format!("cita-r{n}"), n)).collect();
    env.import("tarde.jsonl", &second);
    // One of them is cancelled before anyone reprocesses.
    env.import("cancel.jsonl", &[cancelled("cita-r15")]);
    let day = env.intentions()[0].day.to_string();
    assert!(
        env.intentions().iter().all(|i| i.day.to_string() == day),
        "test ran across midnight in Lima"
    );

    let before = snapshot(&env);
    let out = env.ok(&[
        "reprocess",
        "--day",
        &day,
        "--dry-run",
        "--operator",
        "tecnico",
        "--reason",
        "caída del motor",
        "--json",
    ]);
    assert_eq!(snapshot(&env), before, "the dry run changed the ledger");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    let action = |key: &str| {
        plan["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["key"] == key)
            .map(|i| i["action"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(action("cita-r0:aviso-reserva:v1"), "keep_evidence");
    assert_eq!(action("cita-r10:aviso-reserva:v1"), "dispatch");
    assert_eq!(action("cita-r15:aviso-reserva:v1"), "stay_cancelled");
    assert_eq!(action("cita-r15:aviso-cancelacion:v2"), "dispatch");
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["summary"]["keep_evidence"], 10, "{}", plan["summary"]);
    assert!(plan.get("operator_action_id").is_none());

    // Text output of the dry run, as an operator reads it.
    let text = env.ok(&[
        "reprocess",
        "--day",
        &day,
        "--dry-run",
        "--operator",
        "tecnico",
        "--reason",
        "caída del motor",
    ]);
    assert!(text.contains("no se cambió nada (simulación)"), "{text}");
    assert_eq!(snapshot(&env), before);

    // An unknown operator or a blank reason is refused before anything runs.
    let bad = env.run(&["reprocess", "--day", &day, "--operator", "nadie", "--reason", "x"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no existe el operador"));
    let bad = env.run(&["reprocess", "--day", &day, "--operator", "tecnico", "--reason", "  "]);
    assert!(!bad.status.success());
    assert_eq!(snapshot(&env), before);

    // The real run, every state of the day.
    let out = env.ok(&[
        "reprocess",
        "--day",
        &day,
        "--operator",
        "tecnico",
        "--reason",
        "caída del motor",
        "--json",
    ]);
    let done: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(done["operator_action_id"].as_i64().is_some());
    let rows = env.by_key();
    for n in 10..15 {
        let k = format!("cita-r{n}:aviso-reserva:v1");
        assert!(rows[&k].state.has_channel_evidence(), "{k} is {}", rows[&k].state);
    }
    assert_eq!(rows["cita-r15:aviso-reserva:v1"].state, IntentionState::Cancelled);
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 16));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    let sent = sent_counts(log.path());
    assert!(!sent.contains_key("cita-r15:aviso-reserva:v1"));
    for n in 0..10 {
        let k = format!("cita-r{n}:aviso-reserva:v1");
        assert_eq!(sent.get(&k), Some(&1), "{k}");
        let attempts = env.store().read(|tx| tx.attempts(rows[&k].id)).unwrap();
        assert_eq!(attempts.len(), 1, "{k} was attempted again by the reprocess");
    }
    let actions = env.store().read(|tx| tx.operator_actions(10)).unwrap();
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].action, "reprocess");
    assert_eq!(actions[0].operator, "tecnico");
    assert_eq!(actions[0].reason, "caída del motor");
    assert!(actions[0].scope.as_deref().unwrap().contains(&day));

    // Running it again is harmless: everything keeps its evidence.
    env.ok(&[
        "reprocess",
        "--day",
        &day,
        "--operator",
        "tecnico",
        "--reason",
        "otra vez",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), 16);
    rt.block_on(sim.shutdown());
}

on_both!(reprocess_dry_run_changes_nothing_and_the_real_run_never_resends_accepted_ones,);
