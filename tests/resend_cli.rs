//! `unavez intents resend` against a real ledger file and the real binary:
//! exit codes (0 created, 3 refused, 2 unknown), JSON fields, refusals in
//! the configured language naming their rule, the acknowledgement a
//! delivered or read message needs, the pending-resend refusal and the
//! daily cap.

mod resend_support;

use resend_support::{EVIL, EVIL_SHOWN, Extra, FAILED, Ledger, READ, has_controls};
use unavez::domain::state::{IntentionState, Signal};
use unavez_testkit::{Backend, on_both};

const KEY: &str = "cita-r1:aviso-reserva:v1";

fn resend(l: &Ledger, key: &str, extra: &[&str]) -> resend_support::Run {
    let mut args = vec![
        "intents",
        "resend",
        key,
        "--operator",
        "supervisora",
        "--reason",
        "la paciente pidió el mensaje otra vez",
    ];
    args.extend_from_slice(extra);
    l.run(&args)
}

fn unknown_key_operator_or_blank_reason_exit_2_and_front_desk_is_refused_with_3(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    l.signals(KEY, FAILED);

    let r = resend(&l, "cita-nada:aviso-reserva:v1", &[]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("cita-nada:aviso-reserva:v1"), "{}", r.stderr);

    let r = l.run(&["intents", "resend", KEY, "--operator", "nadie", "--reason", "x"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--operator") && r.stderr.contains("supervisora"),
        "{}",
        r.stderr
    );

    let r = l.run(&["intents", "resend", KEY, "--operator", "supervisora", "--reason", "  "]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--reason"), "{}", r.stderr);

    // Role rules as in the console: the desk may not authorize resends.
    let r = l.run(&["intents", "resend", KEY, "--operator", "recepcion", "--reason", "x"]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no puede autorizar reenvío"), "{}", r.stderr);
    let r = l.run(&[
        "intents",
        "resend",
        KEY,
        "--operator",
        "recepcion",
        "--reason",
        "x",
        "--json",
    ]);
    assert_eq!(r.code, 3);
    assert_eq!(r.json()["rule"], "role");

    assert!(l.actions().is_empty(), "nothing is recorded for unusable input");
    assert!(!l.exists(&format!("{KEY}:reenvio:1")));
}

fn a_resend_is_created_and_a_second_one_is_refused_while_the_first_is_pending(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1", "cita-r2"], "Ana");
    l.signals(KEY, FAILED);

    let r = resend(&l, KEY, &["--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    let new_key = format!("{KEY}:reenvio:1");
    assert_eq!(j["result"], "done");
    assert_eq!(j["rule"], serde_json::Value::Null);
    assert_eq!(j["new_intention"]["key"], new_key.as_str());
    assert_eq!(j["original"]["key"], KEY);
    assert_eq!(j["acknowledged_delivery"], false);
    assert_eq!(j["evidence"]["messages"].as_array().unwrap().len(), 1);
    assert_eq!(j["evidence"]["messages"][0]["state"], "failed");
    assert_eq!(j["evidence"]["authorized_today"], 0);
    assert_eq!(j["evidence"]["max_per_day"], 2);
    let created = l.intention(&new_key);
    assert_eq!(created.state, IntentionState::Planned);
    assert_eq!(created.related_id, Some(l.intention(KEY).id));
    assert_eq!(created.authorized_by.as_deref(), Some("supervisora"));
    assert!(!l.detail(&new_key).acknowledged_delivery);

    // The first resend has not left: a second one is refused, whether asked
    // on the original or on the resend itself.
    for key in [KEY, new_key.as_str()] {
        let r = resend(&l, key, &[]);
        assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("[resend_pending]"), "{}", r.stderr);
        assert!(r.stderr.contains("regla de reenvío pendiente"), "{}", r.stderr);
        assert!(r.stderr.contains(&new_key), "{}", r.stderr);
        // The evidence was printed for the person who asked.
        assert!(r.stdout.contains("Lo que ya existe de este mensaje"), "{}", r.stdout);
    }
    assert!(!l.exists(&format!("{KEY}:reenvio:2")));
    // Dispatching and uncertain are pending too.
    for signal in [Signal::Claim, Signal::Unknown] {
        l.signals(&new_key, &[signal]);
        let r = resend(&l, KEY, &["--json"]);
        assert_eq!((r.code, r.json()["rule"].as_str()), (3, Some("resend_pending")));
    }

    // An original whose outcome is unknown is verified, never resent blind.
    l.signals("cita-r2:aviso-reserva:v1", &[Signal::Claim, Signal::Unknown]);
    let r = resend(&l, "cita-r2:aviso-reserva:v1", &["--json"]);
    assert_eq!(r.code, 3);
    assert_eq!(r.json()["rule"], "uncertain");

    // Every authorization, done or refused, is an operator action.
    let actions = l.actions();
    assert_eq!(actions.len(), 6, "{actions:?}");
    assert!(
        actions
            .iter()
            .all(|a| a.action == "authorize_resend" && a.operator == "supervisora")
    );
    assert_eq!(actions.iter().filter(|a| a.result == "done").count(), 1);
}

fn a_delivered_or_read_message_needs_the_acknowledgement_and_it_is_recorded(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    // The original was delivered: even the first resend needs it.
    l.signals(KEY, &[Signal::Claim, Signal::Accepted, Signal::Delivered]);
    let r = resend(&l, KEY, &[]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("[acknowledge_delivery]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("REENVIAR") && r.stderr.contains("--acknowledge-delivered"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("entregada") && r.stdout.contains("entregado "),
        "{}",
        r.stdout
    );
    assert!(!l.exists(&format!("{KEY}:reenvio:1")));

    let r = resend(&l, KEY, &["--acknowledge-delivered", "--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["acknowledged_delivery"], true);
    let first = format!("{KEY}:reenvio:1");
    assert_eq!(j["new_intention"]["key"], first.as_str());
    let d = l.detail(&first);
    assert!(d.acknowledged_delivery);
    let ack = d.acknowledgement.as_ref().unwrap();
    assert_eq!(ack.operator, "supervisora");
    assert_eq!(ack.action_id, j["action_id"].as_i64().unwrap());
    assert_eq!(ack.evidence[0]["key"], KEY);
    assert_eq!(ack.evidence[0]["state"], "delivered");
    assert!(
        d.history.iter().any(|h| h.signal == "acknowledged_delivery"),
        "{:?}",
        d.history
    );
    let action = &l.actions()[0];
    assert_eq!(action.result, "done");
    assert!(
        action.detail.as_deref().unwrap().contains("delivery acknowledged"),
        "{action:?}"
    );
    // `intents show --json` of the new resend says so too.
    let r = l.run(&["intents", "show", &first, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["acknowledged_delivery"], true);
    assert_eq!(r.json()["acknowledgement"]["operator"], "supervisora");
    let r = l.run(&["intents", "show", KEY, "--json"]);
    assert_eq!(r.json()["acknowledged_delivery"], false);
}

fn the_daily_cap_refuses_the_third_resend_of_the_day_naming_its_rule(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    l.signals(KEY, FAILED);
    for n in 1..=2 {
        let r = resend(&l, KEY, &[]);
        assert_eq!(r.code, 0, "resend {n}: {}{}", r.stdout, r.stderr);
        // Each resend failed too, so none is pending.
        l.signals(&format!("{KEY}:reenvio:{n}"), FAILED);
    }
    let r = resend(&l, KEY, &[]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("[daily_cap]"), "{}", r.stderr);
    assert!(
        r.stderr.contains("regla de tope diario") && r.stderr.contains("policy.max_resends_per_day = 2"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("Reenvíos autorizados hoy: 2 de 2"), "{}", r.stdout);
    // The acknowledgement does not lift the cap.
    let r = resend(&l, KEY, &["--acknowledge-delivered", "--json"]);
    assert_eq!((r.code, r.json()["rule"].as_str()), (3, Some("daily_cap")));

    // The refusal speaks the configured language.
    let en = l.alt_config(
        "en.toml",
        Extra {
            top: "language = \"en\"",
            ..Extra::default()
        },
    );
    let r = l.run_with(
        &en,
        &[
            "intents",
            "resend",
            KEY,
            "--operator",
            "supervisora",
            "--reason",
            "again",
        ],
    );
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains("Refused [daily_cap]: daily-cap rule"), "{}", r.stderr);
    assert!(r.stdout.contains("Resends authorized today: 2 of 2"), "{}", r.stdout);

    // A site that allows three a day gets the third.
    let three = l.alt_config(
        "three.toml",
        Extra {
            policy: "max_resends_per_day = 3",
            ..Extra::default()
        },
    );
    let r = l.run_with(
        &three,
        &[
            "intents",
            "resend",
            KEY,
            "--operator",
            "supervisora",
            "--reason",
            "again",
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(l.exists(&format!("{KEY}:reenvio:3")));
}

fn a_bad_cap_in_the_config_is_an_error_naming_the_field(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    let bad = l.alt_config(
        "bad.toml",
        Extra {
            policy: "max_resends_per_day = 0",
            ..Extra::default()
        },
    );
    let r = l.run_with(
        &bad,
        &["intents", "resend", KEY, "--operator", "supervisora", "--reason", "x"],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("policy.max_resends_per_day"), "{}", r.stderr);
}

fn stored_text_is_printed_inert_and_json_stays_exact(backend: Backend) {
    // An operator whose configured name carries terminal commands, and a
    // reason with a carriage return and a bell.
    let toml_name: String = EVIL
        .chars()
        .map(|c| {
            if c.is_control() {
                format!("\\u{:04X}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect();
    let tables = format!("[[operator]]\nname = \"{toml_name}\"\nrole = \"supervisor\"\n");
    let l = Ledger::new(
        backend,
        Extra {
            tables: &tables,
            ..Extra::default()
        },
    );
    l.book(&["cita-r1"], EVIL);
    l.signals(KEY, READ);
    let reason = "llamó\rotra vez\u{7}";
    let base = ["intents", "resend", KEY, "--operator", EVIL, "--reason", reason];
    let r = l.run(&[&base[..], &["--acknowledge-delivered"]].concat());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!has_controls(&r.stdout) && !has_controls(&r.stderr), "{:?}", r.stdout);
    assert!(r.stdout.contains(EVIL_SHOWN), "{}", r.stdout);

    // The next one is refused (pending): the evidence names the authorizer.
    let r = l.run(&[&base[..], &["--acknowledge-delivered"]].concat());
    assert_eq!(r.code, 3);
    assert!(!has_controls(&r.stdout) && !has_controls(&r.stderr), "{:?}", r.stdout);
    assert!(r.stdout.contains(&format!("autorizó {EVIL_SHOWN}")), "{}", r.stdout);

    // JSON is exact: the same bytes that were stored.
    let r = l.run(&[&base[..], &["--json"]].concat());
    let j = r.json();
    assert_eq!(j["evidence"]["messages"][1]["authorized_by"], EVIL);
    let r = l.run(&["intents", "show", &format!("{KEY}:reenvio:1"), "--json"]);
    let reason_json = r.json()["intention"]["reason"].as_str().unwrap().to_string();
    assert!(
        reason_json.contains(reason) && reason_json.contains(EVIL),
        "{reason_json:?}"
    );

    // Error lines quote input inert too.
    let r = l.run(&["intents", "resend", EVIL, "--operator", EVIL, "--reason", "x"]);
    assert_eq!(r.code, 2);
    assert!(!has_controls(&r.stderr), "{:?}", r.stderr);
    assert!(r.stderr.contains(EVIL_SHOWN), "{}", r.stderr);
}

fn a_late_delivery_on_a_failed_message_still_counts_as_the_customer_having_it(backend: Backend) {
    let l = Ledger::new(backend, Extra::default());
    l.book(&["cita-r1"], "Ana");
    // Failed first, then the engine reported it delivered after all: the
    // state stays failed, but the customer has the message.
    l.signals(KEY, &[Signal::Claim, Signal::Failed, Signal::Delivered]);
    assert_eq!(l.intention(KEY).state, IntentionState::Failed);
    let r = resend(&l, KEY, &["--json"]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["rule"], "acknowledge_delivery");
    assert!(j["evidence"]["messages"][0]["delivered_at"].is_string(), "{j}");
}

on_both!(
    unknown_key_operator_or_blank_reason_exit_2_and_front_desk_is_refused_with_3,
    a_resend_is_created_and_a_second_one_is_refused_while_the_first_is_pending,
    a_delivered_or_read_message_needs_the_acknowledgement_and_it_is_recorded,
    the_daily_cap_refuses_the_third_resend_of_the_day_naming_its_rule,
    a_bad_cap_in_the_config_is_an_error_naming_the_field,
    stored_text_is_printed_inert_and_json_stays_exact,
    a_late_delivery_on_a_failed_message_still_counts_as_the_customer_having_it,
);
