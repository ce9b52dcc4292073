//! The operator commands and `reprocess` on a PostgreSQL ledger, through
//! the real binary and the engine simulator over loopback HTTP: the same
//! exit codes, refusals, audit rows and outcomes as on a SQLite file, and
//! what goes out judged by the simulator's log (a cancelled notice never
//! leaves, an authorized resend leaves once, a reprocessed day sends what
//! was planned and nothing that was already accepted).

mod dispatch_support;

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez_testkit::PgSchema;

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn notice(reference: &str) -> String {
    format!("{reference}:aviso-reserva:v1")
}

fn state(env: &Env, key: &str) -> IntentionState {
    env.store().read(|tx| tx.find_intention(key)).unwrap().state
}

/// A PostgreSQL ledger (a scratch schema) beside the engine simulator,
/// with `count` appointments `cita-{tag}N` booked and their notices sent.
/// Fields drop in order: the binary's environment before the schema it
/// uses, the simulator before its runtime.
struct Sent {
    env: Env,
    log: tempfile::NamedTempFile,
    _sim: unavez::sim::SimHandle,
    _schema: PgSchema,
    _rt: tokio::runtime::Runtime,
}

fn booked_and_sent(tag: &str, seed: u64, count: usize) -> Sent {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", seed);
    let schema = PgSchema::new();
    let env = Env::postgres(&Cfg::motor(&sim.base_url()).with_lease(30), &schema.url);
    let keys: Vec<String> = (0..count).map(|n| scheduled(&format!("cita-{tag}{n}"), n)).collect();
    env.import("manana.jsonl", &keys);
    env.ok(&["dispatch", "--until-idle"]);
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= count));
    Sent {
        env,
        log,
        _sim: sim,
        _schema: schema,
        _rt: rt,
    }
}

#[test]
fn operator_commands_on_a_postgresql_ledger_act_with_reason_and_responsible() {
    // Bound whole: the simulator and the schema live until the test ends.
    let run = booked_and_sent("op", 21, 3);
    let (env, log) = (&run.env, &run.log);
    // Booked after the run: its notice is planned, not yet sent.
    env.import("tarde.jsonl", &[scheduled("cita-op3", 3)]);

    // The desk cancels the planned notice (the send, not the appointment).
    let out = env.run(&[
        "intents",
        "cancel",
        &notice("cita-op3"),
        "--operator",
        "recepcion",
        "--reason",
        "la paciente anuló el aviso",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (doc["result"].as_str(), doc["state"].as_str()),
        (Some("done"), Some("cancelled"))
    );
    assert_eq!(state(env, &notice("cita-op3")), IntentionState::Cancelled);

    // The patient says the first message never arrived.
    let out = env.run(&[
        "intents",
        "verify",
        &notice("cita-op0"),
        "--operator",
        "recepcion",
        "--reason",
        "llamé y no le llegó",
        "--outcome",
        "not_received",
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(state(env, &notice("cita-op0")), IntentionState::Failed);

    // The desk may not authorize the resend (3, said in Spanish); the
    // supervisor does (0), and the new intention goes out once below.
    let refused = env.run(&[
        "intents",
        "resend",
        &notice("cita-op0"),
        "--operator",
        "recepcion",
        "--reason",
        "x",
    ]);
    assert_eq!(code(&refused), 3, "{}", text(&refused));
    assert!(
        text(&refused).contains("no puede autorizar reenvío"),
        "{}",
        text(&refused)
    );
    let out = env.run(&[
        "intents",
        "resend",
        &notice("cita-op0"),
        "--operator",
        "supervisora",
        "--reason",
        "pidió el mensaje otra vez",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let resend_key = format!("{}:reenvio:1", notice("cita-op0"));
    assert_eq!(doc["new_intention"]["key"].as_str(), Some(resend_key.as_str()), "{doc}");

    // A manual contact and a case marked handled.
    let out = env.run(&[
        "intents",
        "contact",
        &notice("cita-op1"),
        "--operator",
        "recepcion",
        "--reason",
        "la llamé y confirmó",
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = env.run(&[
        "intents",
        "resolve",
        &notice("cita-op2"),
        "--operator",
        "recepcion",
        "--reason",
        "nada más que hacer",
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));

    // Unknown keys and blank reasons are bad input (2), nothing recorded.
    let out = env.run(&[
        "intents",
        "resolve",
        "cita-nada",
        "--operator",
        "recepcion",
        "--reason",
        "x",
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    let out = env.run(&[
        "intents",
        "contact",
        &notice("cita-op1"),
        "--operator",
        "recepcion",
        "--reason",
        " ",
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));

    // Every action is in the ledger with who, which role and why.
    let actions = env.store().read(|tx| tx.operator_actions(20)).unwrap();
    let got: BTreeSet<(String, String, String, String)> = actions
        .iter()
        .map(|a| (a.action.clone(), a.operator.clone(), a.role.clone(), a.reason.clone()))
        .collect();
    let want: BTreeSet<(String, String, String, String)> = [
        ("cancel", "recepcion", "front_desk", "la paciente anuló el aviso"),
        ("verify", "recepcion", "front_desk", "llamé y no le llegó"),
        (
            "authorize_resend",
            "supervisora",
            "supervisor",
            "pidió el mensaje otra vez",
        ),
        ("manual_contact", "recepcion", "front_desk", "la llamé y confirmó"),
        ("resolve", "recepcion", "front_desk", "nada más que hacer"),
    ]
    .into_iter()
    .map(|(a, o, r, w)| (a.into(), o.into(), r.into(), w.into()))
    .collect();
    assert_eq!(got, want);

    // The engine's log is the judge: the resend left once, the cancelled
    // notice never, nothing twice.
    env.ok(&["dispatch", "--until-idle"]);
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 4));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    let keys: BTreeSet<String> = sent_keys(log.path()).into_iter().collect();
    let want: BTreeSet<String> = [
        notice("cita-op0"),
        notice("cita-op1"),
        notice("cita-op2"),
        resend_key.clone(),
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, want);
}

#[test]
fn reprocess_on_a_postgresql_ledger_changes_nothing_dry_and_never_resends_accepted_ones() {
    let run = booked_and_sent("rp", 22, 6);
    let (env, log) = (&run.env, &run.log);
    // Booked during an outage: planned and due; one is cancelled.
    let second: Vec<String> = (6..10).map(|n| scheduled(&format!("cita-rp{n}"), n)).collect();
    env.import("tarde.jsonl", &second);
    env.import("cancel.jsonl", &[cancelled("cita-rp9")]);
    let day = env.intentions()[0].day.to_string();
    assert!(
        env.intentions().iter().all(|i| i.day.to_string() == day),
        "test ran across midnight in Lima"
    );
    let snapshot = || {
        let store = &mut env.store();
        let rows: Vec<String> = env
            .intentions()
            .iter()
            .map(|i| {
                let h = store.read(|tx| tx.history(i.id)).unwrap().len();
                let a = store.read(|tx| tx.attempts(i.id)).unwrap().len();
                format!("{} {} {} {h} {a}", i.key, i.state, i.attempt_count)
            })
            .collect();
        let actions = store.read(|tx| tx.operator_actions(100)).unwrap().len();
        format!("{}\nactions {actions}", rows.join("\n"))
    };
    let before = snapshot();
    let args = |dry: bool| {
        let mut a = vec![
            "reprocess",
            "--day",
            &day,
            "--operator",
            "tecnico",
            "--reason",
            "caída del motor",
            "--json",
        ];
        if dry {
            a.push("--dry-run");
        }
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        env.ok(&a)
    };
    let plan: serde_json::Value = serde_json::from_str(&run(args(true))).unwrap();
    assert_eq!(snapshot(), before, "the dry run changed the ledger");
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["summary"]["keep_evidence"], 6, "{}", plan["summary"]);
    assert_eq!(plan["summary"]["dispatch"], 4, "{}", plan["summary"]);

    // A blank reason is refused before anything runs.
    let bad = env.run(&["reprocess", "--day", &day, "--operator", "tecnico", "--reason", " "]);
    assert!(!bad.status.success());
    assert_eq!(snapshot(), before);

    let report: serde_json::Value = serde_json::from_str(&run(args(false))).unwrap();
    assert!(report["operator_action_id"].as_i64().is_some(), "{report}");
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 10));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    let keys: BTreeSet<String> = sent_keys(log.path()).into_iter().collect();
    let mut want: BTreeSet<String> = (0..9).map(|n| notice(&format!("cita-rp{n}"))).collect();
    want.insert("cita-rp9:aviso-cancelacion:v2".into());
    assert_eq!(
        keys, want,
        "the planned ones went out once, the cancelled booking notice never"
    );
    let actions = env.store().read(|tx| tx.operator_actions(10)).unwrap();
    assert_eq!(actions.len(), 1);
    assert_eq!(
        (
            actions[0].action.as_str(),
            actions[0].operator.as_str(),
            actions[0].reason.as_str()
        ),
        ("reprocess", "tecnico", "caída del motor")
    );
}
