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

// --- issue 25 §8 (words): the command line speaks like the console ---

/// An unknown key is said in Spanish by default, in English by config;
/// never the old `no intention with key or id "…"`.
fn errors_are_in_the_configured_language(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    for args in [
        vec!["intents", "show", "99999"],
        vec!["intents", "cancel", "99999", "--operator", "recepcion", "--reason", "x"],
        vec![
            "intents",
            "resend",
            "99999",
            "--operator",
            "supervisora",
            "--reason",
            "x",
        ],
    ] {
        let r = l.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert_eq!(
            r.stderr.trim(),
            "error: no existe un aviso con clave o id «99999»",
            "{args:?}"
        );
    }
    let r = twin(&l, "cancel", KEY, "nadie", &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no existe el operador «nadie»"), "{}", r.stderr);
    let r = l.run(&["intents", "cancel", KEY, "--operator", "recepcion", "--reason", " "]);
    assert!(
        r.stderr.contains("hace falta un motivo para cancelar envío"),
        "{}",
        r.stderr
    );
    let en = l.dir.path().join("en.toml");
    let text = std::fs::read_to_string(&l.config)
        .unwrap()
        .replacen("\n", "\nlanguage = \"en\"\n", 1);
    std::fs::write(&en, text).unwrap();
    let r = l.run_with(&en, &["intents", "show", "99999"]);
    assert_eq!(r.stderr.trim(), "error: no message with key or id «99999»");
}

/// With `--json`, every error and refusal is one JSON document on stdout
/// with an `error` object, and the exit code is the same as without.
fn json_errors_are_json_on_stdout_with_the_same_exit_codes(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["intents", "show", "99999", "--json"], 2, "no_intention"),
        (
            vec![
                "intents",
                "cancel",
                "99999",
                "--operator",
                "recepcion",
                "--reason",
                "x",
                "--json",
            ],
            2,
            "no_intention",
        ),
        (
            vec![
                "intents",
                "cancel",
                KEY,
                "--operator",
                "nadie",
                "--reason",
                "x",
                "--json",
            ],
            2,
            "unknown_operator",
        ),
        (
            vec![
                "intents",
                "cancel",
                KEY,
                "--operator",
                "recepcion",
                "--reason",
                " ",
                "--json",
            ],
            2,
            "reason_required",
        ),
        (
            vec![
                "intents",
                "cancel",
                KEY,
                "--operator",
                "tecnico",
                "--reason",
                "x",
                "--json",
            ],
            3,
            "role",
        ),
        (
            vec![
                "intents",
                "verify",
                KEY,
                "--operator",
                "recepcion",
                "--reason",
                "x",
                "--outcome",
                "quizas",
                "--json",
            ],
            2,
            "usage",
        ),
        (
            vec![
                "reprocess",
                "--day",
                "2026-12-01",
                "--operator",
                "tecnico",
                "--reason",
                " ",
                "--json",
            ],
            2,
            "reason_required",
        ),
        (
            vec![
                "reprocess",
                "--day",
                "2026-12-01",
                "--operator",
                "nadie",
                "--reason",
                "x",
                "--json",
            ],
            2,
            "unknown_operator",
        ),
    ];
    for (args, code, error) in cases {
        let r = l.run(&args);
        assert_eq!(r.code, code, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.is_empty(), "{args:?} wrote to stderr: {}", r.stderr);
        let j = r.json();
        assert_eq!(j["error"]["code"], error, "{args:?}: {j}");
        assert!(!j["error"]["message"].as_str().unwrap_or("").is_empty(), "{j}");
    }
    let r = l.run(&["intents", "show", "99999", "--json"]);
    assert_eq!(
        r.json()["error"]["message"],
        "no existe un aviso con clave o id «99999»"
    );
    let r = l.run(&["commitments", "show", "cita-nada", "--json"]);
    assert_eq!((r.code, r.json()["error"]["code"].as_str()), (2, Some("no_commitment")));
    let r = l.run(&["commitments", "show", "cita-nada"]);
    assert_eq!(
        (r.code, r.stderr.trim()),
        (2, "error: no existe una cita ni un pedido con referencia «cita-nada»")
    );
    // A refusal of the ledger keeps its fields and gains the error object.
    twin(&l, "cancel", KEY, "recepcion", &[]);
    let r = twin(&l, "cancel", KEY, "recepcion", &["--json"]);
    let j = r.json();
    assert_eq!((r.code, j["rule"].as_str()), (3, Some("closed")));
    assert_eq!(j["error"]["code"], "closed");
    assert_eq!(j["error"]["message"], j["message"]);
}

/// `--operator` as a person types it: accents and capitals do not matter.
fn operator_names_are_found_as_typed(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    for name in ["recepción", "RECEPCIÓN", "Recepcion"] {
        let r = twin(&l, "resolve", KEY, name, &["--json"]);
        assert_eq!(r.code, 0, "{name}: {}{}", r.stdout, r.stderr);
    }
    assert!(l.actions().iter().all(|a| a.operator == "recepcion"));
}

/// `--outcome recibido|no_recibido` beside `received|not_received`.
fn outcome_words_in_spanish_work_too(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1", "cita-r2"], "Ana");
    for (key, word, state) in [
        (KEY, "recibido", "delivered"),
        ("cita-r2:aviso-reserva:v1", "NO_RECIBIDO", "failed"),
    ] {
        l.signals(key, &[Signal::Claim, Signal::Accepted]);
        let r = twin(&l, "verify", key, "recepcion", &["--outcome", word, "--json"]);
        assert_eq!(r.code, 0, "{word}: {}{}", r.stdout, r.stderr);
        assert_eq!(r.json()["state"], state, "{word}");
    }
}

/// `intents show` opens with the verdict and speaks Spanish.
fn show_speaks_spanish(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    l.signals(KEY, FAILED);
    let r = l.run(&["intents", "show", KEY]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let first = r.stdout.lines().next().unwrap();
    assert!(first.starts_with("No le llegó el aviso de reserva"), "{}", r.stdout);
    assert!(
        r.stdout.contains("historia:") && r.stdout.contains("registrada"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("history:"), "{}", r.stdout);
}

on_both!(
    errors_are_in_the_configured_language,
    json_errors_are_json_on_stdout_with_the_same_exit_codes,
    operator_names_are_found_as_typed,
    outcome_words_in_spanish_work_too,
    show_speaks_spanish,
);
