//! `unavez intents cancel|verify|contact|resolve` against a real ledger file
//! and the real binary: exit codes (0 done, 3 refused, 2 unusable input),
//! the refusal in the configured language naming its rule, the JSON
//! document, and the same traces as the console (action log, history,
//! handled mark).

mod resend_support;

use resend_support::{Extra, FAILED, Ledger};
use unavez::domain::state::{IntentionState, Signal};
use unavez::store::{AttentionQuery, RowKind};
use unavez_testkit::{Backend, on_both};

const KEY: &str = "cita-r1:aviso-reserva:v1";

fn twin(l: &Ledger, cmd: &str, key: &str, operator: &str, extra: &[&str]) -> resend_support::Run {
    let mut args = vec![
        "intents",
        cmd,
        key,
        "--operator",
        operator,
        "--reason",
        "llamada de la paciente",
    ];
    args.extend_from_slice(extra);
    l.run(&args)
}

fn open_keys(l: &Ledger) -> Vec<String> {
    let q = AttentionQuery::new(chrono::Utc::now());
    l.store()
        .read(|tx| tx.attention(&q))
        .unwrap()
        .rows
        .into_iter()
        .filter_map(|r| r.key)
        .collect()
}

fn cancel_then_cancel_again_exits_0_then_3_with_the_rule_in_spanish(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    let r = twin(&l, "cancel", KEY, "recepcion", &["--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(
        (j["result"].as_str(), j["state"].as_str()),
        (Some("done"), Some("cancelled"))
    );
    assert_eq!(j["intention"]["key"], KEY);
    assert_eq!(l.intention(KEY).state, IntentionState::Cancelled);
    let actions = l.actions();
    assert_eq!(
        (actions[0].action.as_str(), actions[0].operator.as_str()),
        ("cancel", "recepcion")
    );
    let id = l.intention(KEY).id;
    let mark = l.store().read(|tx| tx.handled_mark(RowKind::Intention, id)).unwrap();
    assert_eq!(mark.map(|m| m.action_id), Some(actions[0].id));

    let r = twin(&l, "cancel", KEY, "recepcion", &[]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.starts_with("Rechazado: "), "{}", r.stderr);
    let r = twin(&l, "cancel", KEY, "recepcion", &["--json"]);
    assert_eq!(r.code, 3);
    assert_eq!(r.json()["rule"], "closed");
}

fn unknown_key_operator_or_blank_reason_exit_2_and_a_role_without_the_right_exits_3(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    for cmd in ["cancel", "contact", "resolve"] {
        let r = twin(&l, cmd, "cita-nada:aviso-reserva:v1", "recepcion", &[]);
        assert_eq!(r.code, 2, "{cmd}: {}", r.stderr);
        assert!(r.stderr.contains("cita-nada"), "{}", r.stderr);
        let r = twin(&l, cmd, KEY, "nadie", &[]);
        assert_eq!(r.code, 2, "{cmd}: {}", r.stderr);
        assert!(r.stderr.contains("--operator"), "{}", r.stderr);
        let r = l.run(&["intents", cmd, KEY, "--operator", "recepcion", "--reason", " "]);
        assert_eq!(r.code, 2, "{cmd}: {}", r.stderr);
        assert!(r.stderr.contains("--reason"), "{}", r.stderr);
    }
    // Technicians do not cancel sends: refused in the configured language.
    let r = twin(&l, "cancel", KEY, "tecnico", &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no puede cancelar envío"), "{}", r.stderr);
    let r = twin(&l, "cancel", KEY, "tecnico", &["--json"]);
    assert_eq!((r.code, r.json()["rule"].as_str()), (3, Some("role")));
    assert!(l.actions().is_empty(), "nothing is recorded for unusable input");
    assert_eq!(l.intention(KEY).state, IntentionState::Planned);
}

fn verify_records_what_the_customer_said(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    l.signals(KEY, &[Signal::Claim, Signal::Accepted]);
    let r = twin(&l, "verify", KEY, "recepcion", &["--outcome", "received", "--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["state"], "delivered");
    assert_eq!(l.intention(KEY).state, IntentionState::Delivered);
    let r = l.run(&["intents", "verify", KEY, "--operator", "recepcion", "--reason", "x"]);
    assert_eq!(r.code, 2, "--outcome is required: {}", r.stderr);
}

fn resolve_takes_a_failed_message_off_the_queue_and_contact_closes_reminders(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    l.signals(KEY, FAILED);
    assert!(open_keys(&l).contains(&KEY.to_string()));
    let r = twin(&l, "resolve", KEY, "recepcion", &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("marcado como atendido"), "{}", r.stdout);
    assert!(!open_keys(&l).contains(&KEY.to_string()));
    let history = l.detail(KEY).history;
    assert_eq!(history.last().unwrap().signal, "resolve");

    let r = twin(&l, "contact", KEY, "recepcion", &["--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["result"], "done");
    assert_eq!(l.actions()[0].action, "manual_contact");
}

on_both!(
    cancel_then_cancel_again_exits_0_then_3_with_the_rule_in_spanish,
    unknown_key_operator_or_blank_reason_exit_2_and_a_role_without_the_right_exits_3,
    verify_records_what_the_customer_said,
    resolve_takes_a_failed_message_off_the_queue_and_contact_closes_reminders,
);
