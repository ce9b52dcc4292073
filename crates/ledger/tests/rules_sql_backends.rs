//! Every SQL fragment that restates a core rule (`unavez_ledger::rules_sql`)
//! agrees with the core function it is built from, for every value of the
//! enum, on SQLite and on PostgreSQL: the fragment is run as the statements
//! run it (`column IN fragment`, `column NOT IN fragment`, the shown word's
//! `CASE`) on one value at a time.

mod pg_common;

use std::cell::RefCell;

use pg_common::ledger;
use unavez_core::template_check::MetaStatus;
use unavez_ledger::domain::attempt::AttemptOutcome;
use unavez_ledger::domain::attention::Situation;
use unavez_ledger::domain::channel_event::EventStatus;
use unavez_ledger::domain::history::HistorySignal;
use unavez_ledger::domain::operator::OpKind;
use unavez_ledger::domain::state::{IntentionState, Signal};
use unavez_ledger::rules_sql as r;
use unavez_ledger::sql::Db;
use unavez_ledger::store::Store;
use unavez_ledger::vals;
use unavez_testkit::PgSchema;

/// Whether `word` is in `list`, and whether it is `NOT IN` it, as the
/// backend answers.
fn member(db: &Db<'_>, list: &str, word: &str) -> (bool, bool) {
    let sql = format!(
        "SELECT CASE WHEN v.w IN {list} THEN 1 ELSE 0 END, CASE WHEN v.w NOT IN {list} THEN 1 ELSE 0 END
         FROM (SELECT CAST(?1 AS TEXT) AS w) AS v"
    );
    let (is_in, not_in) = db
        .row(&sql, &vals![word], |row| Ok((row.int(0)?, row.int(1)?)))
        .unwrap()
        .unwrap();
    (is_in == 1, not_in == 1)
}

/// One fragment and the core rule it restates, over every word of its
/// enum: `(word, core says it is in)`.
struct Case {
    name: &'static str,
    list: &'static str,
    every: Vec<(String, bool)>,
}

fn case<T: Copy>(
    name: &'static str,
    list: &'static str,
    all: &[T],
    word: impl Fn(T) -> String,
    rule: impl Fn(T) -> bool,
) -> Case {
    Case {
        name,
        list,
        every: all.iter().map(|v| (word(*v), rule(*v))).collect(),
    }
}

fn cases() -> Vec<Case> {
    let outcome = |o: AttemptOutcome| o.as_str().to_string();
    let state = |s: IntentionState| s.as_str().to_string();
    let signals: Vec<HistorySignal> = HistorySignal::all().collect();
    // A history row's signal word is evidence when it is the word of an
    // evidence signal of the state machine.
    let evidence = |h: HistorySignal| {
        Signal::KINDS
            .iter()
            .any(|s| s.is_evidence() && HistorySignal::of(*s) == h)
    };
    let taken = |s: IntentionState| s.has_channel_evidence() && !s.reached_recipient();
    let taken_signal = |h: HistorySignal| {
        Signal::KINDS
            .iter()
            .any(|s| HistorySignal::of(*s) == h && s.evidence_state().is_some_and(taken))
    };
    let known = MetaStatus::KNOWN;
    let metas: Vec<&MetaStatus> = known.iter().collect();
    vec![
        case(
            "acknowledged outcomes",
            &r::ACKNOWLEDGED_OUTCOMES,
            &AttemptOutcome::ALL,
            outcome,
            AttemptOutcome::acknowledged,
        ),
        case(
            "outcomes that never reached the channel",
            &r::UNREACHED_OUTCOMES,
            &AttemptOutcome::ALL,
            outcome,
            |o| !o.may_have_reached_channel(),
        ),
        case(
            "error outcomes",
            &r::ERROR_OUTCOMES,
            &AttemptOutcome::ALL,
            outcome,
            AttemptOutcome::is_error,
        ),
        case(
            "evidence signals",
            &r::EVIDENCE_SIGNALS,
            &signals,
            |h| h.as_str().to_string(),
            evidence,
        ),
        case(
            "taken signals",
            &r::TAKEN_SIGNALS,
            &signals,
            |h| h.as_str().to_string(),
            taken_signal,
        ),
        case(
            "channel evidence states",
            &r::CHANNEL_EVIDENCE_STATES,
            &IntentionState::ALL,
            state,
            IntentionState::has_channel_evidence,
        ),
        case(
            "reached states",
            &r::REACHED_STATES,
            &IntentionState::ALL,
            state,
            IntentionState::reached_recipient,
        ),
        case(
            "awaiting states",
            &r::AWAITING_STATES,
            &IntentionState::ALL,
            state,
            IntentionState::awaits_outcome,
        ),
        case(
            "outcome states",
            &r::OUTCOME_STATES,
            &IntentionState::ALL,
            state,
            IntentionState::is_channel_outcome,
        ),
        case("taken states", &r::TAKEN_STATES, &IntentionState::ALL, state, taken),
        case(
            "technicians' channel events",
            &r::TECHNICIAN_EVENTS,
            &EventStatus::ALL,
            |e| e.as_str().to_string(),
            EventStatus::is_technicians_case,
        ),
        case(
            "resend ask actions",
            &r::RESEND_ASK_ACTIONS,
            &OpKind::ALL,
            |op| op.as_str().to_string(),
            OpKind::settles_resend_ask,
        ),
        case(
            "blocking template statuses",
            &r::BLOCKING_TEMPLATE_STATUSES,
            &metas,
            |m| m.as_str().to_string(),
            |m| m.blocks_sending(),
        ),
    ]
}

/// What the backend says for every case and word, as lines to compare.
fn answers(db: &Db<'_>) -> Vec<String> {
    let mut seen = Vec::new();
    for c in cases() {
        for (word, core) in &c.every {
            let (is_in, not_in) = member(db, c.list, word);
            assert_eq!(is_in, *core, "{}: {word:?} IN {}", c.name, c.list);
            assert_eq!(not_in, !*core, "{}: {word:?} NOT IN {}", c.name, c.list);
            seen.push(format!("{} {word} {is_in}", c.name));
        }
    }
    // The Atención row's shown word, for every state.
    let shown = format!("SELECT {} FROM (SELECT CAST(?1 AS TEXT) AS state) AS i", r::SHOWN_STATE);
    for s in IntentionState::ALL {
        let word = db.row(&shown, &vals![s.as_str()], |row| row.text(0)).unwrap().unwrap();
        assert_eq!(word, Situation::of_intention(s).as_str(), "{s}");
        seen.push(format!("shown {s} {word}"));
    }
    seen
}

#[test]
fn every_fragment_agrees_with_its_core_rule_on_sqlite_and_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let on_sqlite = answers(&Db::Sqlite(&conn));

    let schema = PgSchema::new();
    let client = RefCell::new(ledger(&schema).into_client());
    let on_pg = answers(&Db::Pg(&client));
    assert_eq!(on_sqlite, on_pg);
}
