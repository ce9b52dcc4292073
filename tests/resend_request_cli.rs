//! Issue 25 §3: the front desk asks for a resend and a supervisor answers,
//! through the real binary on both backends (`intents request-resend`,
//! `intents decline-resend`): exit codes 0 done, 3 refused, 2 bad input,
//! the refusal's rule in `--json`, and every action in `operator_actions`
//! with who, which role and why.

mod dispatch_support;

use std::process::Output;
use std::time::Duration;

use dispatch_support::*;
use unavez_testkit::{Backend, on_both};

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

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

fn ask(env: &Env, cmd: &str, key: &str, operator: &str, reason: &str) -> Output {
    env.run(&[
        "intents",
        cmd,
        key,
        "--operator",
        operator,
        "--reason",
        reason,
        "--json",
    ])
}

fn the_front_desk_asks_and_a_supervisor_answers(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 25);
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()).with_lease(30));
    env.import("manana.jsonl", &[scheduled("cita-rq0", 0)]);
    env.ok(&["dispatch", "--until-idle"]);
    assert!(wait_until(Duration::from_secs(10), || !sent_keys(log.path()).is_empty()));
    let key = "cita-rq0:aviso-reserva:v1";
    env.ok(&[
        "intents",
        "verify",
        key,
        "--operator",
        "recepcion",
        "--reason",
        "llamé y no le llegó",
        "--outcome",
        "not_received",
    ]);

    // The desk asks (0); asking again before an answer is refused (3).
    let out = ask(&env, "request-resend", key, "recepcion", "la paciente no lo recibió");
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(json(&out)["result"].as_str(), Some("done"));
    let message = json(&out)["message"].as_str().unwrap_or_default().to_string();
    assert!(message.starts_with("Hecho: pedir reenvío"), "{message}");
    let out = ask(&env, "request-resend", key, "recepcion", "otra vez");
    assert_eq!(code(&out), 3, "{}", text(&out));
    assert_eq!(json(&out)["rule"].as_str(), Some("resend_requested"), "{}", text(&out));

    // A supervisor does not ask: they resend (3, the role); a blank reason
    // is bad input (2).
    let out = ask(&env, "request-resend", key, "supervisora", "x");
    assert_eq!(code(&out), 3, "{}", text(&out));
    assert_eq!(json(&out)["rule"].as_str(), Some("role"));
    let out = ask(&env, "request-resend", key, "recepcion", " ");
    assert_eq!(code(&out), 2, "{}", text(&out));

    // The supervisor declines (0); nothing is left to decline (3); the
    // desk may not decline (3).
    let out = ask(&env, "decline-resend", key, "recepcion", "x");
    assert_eq!(code(&out), 3, "{}", text(&out));
    let out = ask(&env, "decline-resend", key, "supervisora", "ya la llamamos");
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = ask(&env, "decline-resend", key, "supervisora", "otra vez");
    assert_eq!(code(&out), 3, "{}", text(&out));
    assert_eq!(json(&out)["rule"].as_str(), Some("no_resend_request"));

    // Asked again, the supervisor authorizes: the request is answered.
    let out = ask(&env, "request-resend", key, "recepcion", "número corregido");
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = ask(&env, "resend", key, "supervisora", "pedido de recepción");
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = ask(&env, "decline-resend", key, "supervisora", "tarde");
    assert_eq!(code(&out), 3, "{}", text(&out));

    // Every answer is in the audit trail, refusals too, with who and why.
    let actions = env.store().read(|tx| tx.operator_actions(30)).unwrap();
    let row = |action: &str, result: &str, reason: &str| {
        actions
            .iter()
            .any(|a| a.action == action && a.result == result && a.reason == reason)
    };
    assert!(
        row("request_resend", "done", "la paciente no lo recibió"),
        "{actions:?}"
    );
    assert!(row("request_resend", "refused", "otra vez"), "{actions:?}");
    assert!(row("decline_resend", "done", "ya la llamamos"), "{actions:?}");
    assert!(row("decline_resend", "refused", "otra vez"), "{actions:?}");
    assert!(row("authorize_resend", "done", "pedido de recepción"), "{actions:?}");
    let request = actions.iter().find(|a| a.action == "request_resend").unwrap();
    assert_eq!(
        (request.operator.as_str(), request.role.as_str()),
        ("recepcion", "front_desk")
    );
    assert_eq!(request.detail.as_deref(), Some("resend requested"));
    drop(sim);
}

on_both!(the_front_desk_asks_and_a_supervisor_answers);
