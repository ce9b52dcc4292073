//! The call list's outcomes and reopen (issue 25, section 4) through the
//! real binary (`unavez intents call-outcome|reopen`), on a SQLite file and
//! on PostgreSQL: what each outcome changes in the ledger, that it is
//! audited with who and why, and the exit codes (0 done, 3 refused, 2
//! unusable input).

mod resend_support;

use resend_support::{Extra, Ledger, Run};
use unavez::domain::state::IntentionState;
use unavez::store::{IntentFilter, IntentionRow, RowKind};
use unavez_testkit::{Backend, on_both};

const KEY: &str = "cita-c1:aviso-reserva:v1";

/// A ledger whose appointments get a booking notice and two reminders,
/// the 24 h one asking for confirmation.
fn ledger(backend: Backend) -> Ledger {
    let l = Ledger::new(backend, Extra::default());
    let text = std::fs::read_to_string(&l.config).unwrap().replace(
        "reminder_offsets_minutes = []\nconfirm_reminder_offsets_minutes = []",
        "reminder_offsets_minutes = [1440, 120]\nconfirm_reminder_offsets_minutes = [1440]",
    );
    std::fs::write(&l.config, text).unwrap();
    l
}

fn call(l: &Ledger, key: &str, operator: &str, outcome: &str) -> Run {
    l.run(&[
        "intents",
        "call-outcome",
        key,
        "--operator",
        operator,
        "--outcome",
        outcome,
        "--json",
    ])
}

/// Every message of the appointment `reference`.
fn family(l: &Ledger, reference: &str) -> Vec<IntentionRow> {
    let mut store = l.store();
    let c = store.read(|tx| tx.commitment(reference)).unwrap().unwrap();
    l.store()
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                limit: 1000,
                ..Default::default()
            })
        })
        .unwrap()
        .into_iter()
        .filter(|i| i.commitment_id == c.id)
        .collect()
}

fn handled(l: &Ledger, key: &str) -> bool {
    let id = l.intention(key).id;
    l.store()
        .read(|tx| tx.handled_mark(RowKind::Intention, id))
        .unwrap()
        .is_some()
}

fn confirmed_closes_the_confirmation_reminder_and_is_audited(backend: Backend) {
    let l = ledger(backend);
    l.book(&["cita-c1"], "Ana");
    let before = family(&l, "cita-c1");
    assert_eq!(before.len(), 3, "{before:?}");

    let r = call(&l, KEY, "recepcion", "confirmó");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["result"], "done");
    assert_eq!(j["action"], "call_outcome");

    let c = l.store().read(|tx| tx.commitment("cita-c1")).unwrap().unwrap();
    assert!(c.commitment.confirmed_at.is_some(), "confirmed_at is set");
    let closed: Vec<_> = family(&l, "cita-c1")
        .into_iter()
        .filter(|i| i.state == IntentionState::Cancelled)
        .map(|i| i.state_reason.unwrap_or_default())
        .collect();
    assert_eq!(closed, ["already_confirmed"], "the confirmation reminder is closed");

    let a = &l.actions()[0];
    assert_eq!(
        (
            a.operator.as_str(),
            a.action.as_str(),
            a.reason.as_str(),
            a.result.as_str()
        ),
        ("recepcion", "call_outcome", "confirmed", "done")
    );
    assert!(handled(&l, KEY), "a confirmed call settles the case");
}

fn no_answer_counts_tries_and_leaves_the_case_open(backend: Backend) {
    let l = ledger(backend);
    l.book(&["cita-c1"], "Ana");
    for _ in 0..2 {
        let r = call(&l, KEY, "recepcion", "no_contesta");
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    }
    let id = l.intention(KEY).id;
    let (count, last) = l.store().read(|tx| tx.call_tries(id)).unwrap();
    assert_eq!(count, 2);
    assert!(last.is_some());
    assert!(!handled(&l, KEY), "an unanswered call leaves the case on the list");
    // Nothing else changed: the notice still waits to go.
    assert_eq!(l.intention(KEY).state, IntentionState::Planned);
}

fn reschedule_request_goes_to_the_supervisor(backend: Backend) {
    let l = ledger(backend);
    l.book(&["cita-c1"], "Ana");
    let r = call(&l, KEY, "recepcion", "reprogramar");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let c = l.store().read(|tx| tx.commitment("cita-c1")).unwrap().unwrap();
    assert!(c.reschedule_requested_at.is_some());
    assert_eq!(l.actions()[0].reason, "reschedule_requested");
}

fn wrong_number_holds_every_planned_message_to_that_phone(backend: Backend) {
    let l = ledger(backend);
    // Two appointments of the same phone (each `book` numbers from 1).
    l.book(&["cita-c1"], "Ana");
    l.book(&["cita-c2"], "Ana");
    let r = call(&l, KEY, "recepcion", "numero_equivocado");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for reference in ["cita-c1", "cita-c2"] {
        for i in family(&l, reference) {
            assert_eq!(i.state, IntentionState::Review, "{}", i.key);
            assert_eq!(i.state_reason.as_deref(), Some("wrong_number"), "{}", i.key);
        }
    }
}

fn nothing_more_goes_to_a_wrong_number_until_another_phone_arrives(backend: Backend) {
    let l = ledger(backend);
    l.book(&["cita-c1"], "Ana");
    assert_eq!(call(&l, KEY, "recepcion", "numero_equivocado").code, 0);
    // A new appointment for the same phone: held at once.
    l.book(&["cita-c3"], "Ana");
    let held = family(&l, "cita-c3");
    assert!(!held.is_empty());
    for i in &held {
        assert_eq!(
            (i.state, i.state_reason.as_deref()),
            (IntentionState::Review, Some("wrong_number")),
            "{}",
            i.key
        );
    }
    // Another phone (the second booking of this import gets another
    // number): planned as usual.
    l.book(&["cita-x", "cita-c4"], "Ana");
    assert!(family(&l, "cita-c4").iter().all(|i| i.state == IntentionState::Planned));
}

fn reopen_takes_the_mark_back_and_both_actions_stay(backend: Backend) {
    let l = ledger(backend);
    l.book(&["cita-c1"], "Ana");
    assert_eq!(call(&l, KEY, "recepcion", "confirmo").code, 0);
    assert!(handled(&l, KEY));
    let reopen = |reason: &str| {
        l.run(&[
            "intents",
            "reopen",
            KEY,
            "--operator",
            "supervisora",
            "--reason",
            reason,
            "--json",
        ])
    };
    let r = reopen("la paciente llamó otra vez");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!handled(&l, KEY));
    let r = reopen("otra vez");
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["rule"], "not_handled");
    let log: Vec<_> = l.actions().into_iter().map(|a| (a.action, a.result)).collect();
    assert_eq!(
        log,
        [
            ("reopen".to_string(), "refused".to_string()),
            ("reopen".into(), "done".into()),
            ("call_outcome".into(), "done".into()),
        ]
    );
}

fn unusable_input_exits_2_and_refusals_exit_3(backend: Backend) {
    let l = ledger(backend);
    l.book(&["cita-c1"], "Ana");
    let r = call(&l, KEY, "recepcion", "tal_vez");
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let r = call(&l, "cita-nada:aviso-reserva:v1", "recepcion", "confirmo");
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let r = call(&l, KEY, "tecnico", "confirmo");
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["rule"], "role");
    assert!(l.actions().is_empty(), "nothing is recorded for unusable input");
}

on_both!(
    confirmed_closes_the_confirmation_reminder_and_is_audited,
    no_answer_counts_tries_and_leaves_the_case_open,
    reschedule_request_goes_to_the_supervisor,
    wrong_number_holds_every_planned_message_to_that_phone,
    nothing_more_goes_to_a_wrong_number_until_another_phone_arrives,
    reopen_takes_the_mark_back_and_both_actions_stay,
    unusable_input_exits_2_and_refusals_exit_3,
);
