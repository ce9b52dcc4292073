//! SQL fragments that restate a core rule, generated from core's enums
//! (issue 28 §4). A statement that selects by a rule of `unavez-core`
//! (which attempt outcomes the channel acknowledged, which signals are
//! evidence, which states await an outcome…) takes its list of words from
//! here, never from a literal: a new variant, or a rule that changes, moves
//! the SQL with it. `tests/rules_sql_backends.rs` runs every fragment on
//! SQLite and PostgreSQL against the core function for every value of its
//! enum; this module's tests check that the fragments a partial index
//! relies on are the text of the index's predicate in the migrations.
//!
//! Each fragment is computed once ([`LazyLock`]); the statements that use
//! one are built once too, so a query costs what its literal did.

use std::fmt;
use std::ops::Deref;
use std::sync::LazyLock;

use crate::domain::attempt::AttemptOutcome;
use crate::domain::channel_event::EventStatus;
use crate::domain::history::HistorySignal;
use crate::domain::operator::OpKind;
use crate::domain::state::{IntentionState, Signal};

/// A statement or fragment computed once, on first use: it derefs to
/// `&str` and shows as its text in `format!`.
pub struct Sql(LazyLock<String>);

impl Sql {
    pub const fn new(build: fn() -> String) -> Sql {
        Sql(LazyLock::new(build))
    }
}

impl Deref for Sql {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Sql {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

/// `('a', 'b')`: the words of the values of `all` that `keep` selects, in
/// the enum's order.
pub fn words<T: Copy, W: fmt::Display>(all: &[T], keep: impl Fn(T) -> bool, word: impl Fn(T) -> W) -> String {
    let quoted: Vec<String> = all
        .iter()
        .copied()
        .filter(|v| keep(*v))
        .map(|v| format!("'{}'", word(v)))
        .collect();
    assert!(!quoted.is_empty(), "an empty SQL list is a syntax error");
    format!("({})", quoted.join(", "))
}

fn outcomes(keep: impl Fn(AttemptOutcome) -> bool) -> String {
    words(&AttemptOutcome::ALL, keep, AttemptOutcome::as_str)
}

fn states(keep: impl Fn(IntentionState) -> bool) -> String {
    words(&IntentionState::ALL, keep, IntentionState::as_str)
}

/// Attempt outcomes the channel acknowledged ([`AttemptOutcome::acknowledged`]).
pub static ACKNOWLEDGED_OUTCOMES: Sql = Sql::new(|| outcomes(AttemptOutcome::acknowledged));

/// Attempt outcomes that prove the request never reached the channel
/// (not [`AttemptOutcome::may_have_reached_channel`]): used as
/// `outcome NOT IN …`.
pub static UNREACHED_OUTCOMES: Sql = Sql::new(|| outcomes(|o| !o.may_have_reached_channel()));

/// Attempt outcomes a technician reads as errors ([`AttemptOutcome::is_error`]).
pub static ERROR_OUTCOMES: Sql = Sql::new(|| outcomes(AttemptOutcome::is_error));

/// History signals that are evidence ([`Signal::is_evidence`]), as the
/// words their rows store ([`HistorySignal::of`]).
pub static EVIDENCE_SIGNALS: Sql =
    Sql::new(|| words(&Signal::KINDS, Signal::is_evidence, |s| HistorySignal::of(s).as_str()));

/// States the channel acknowledged ([`IntentionState::has_channel_evidence`]).
pub static CHANNEL_EVIDENCE_STATES: Sql = Sql::new(|| states(IntentionState::has_channel_evidence));

/// States that reached the customer ([`IntentionState::reached_recipient`]).
pub static REACHED_STATES: Sql = Sql::new(|| states(IntentionState::reached_recipient));

/// States whose outcome is still to come ([`IntentionState::awaits_outcome`]).
pub static AWAITING_STATES: Sql = Sql::new(|| states(IntentionState::awaits_outcome));

/// States that are the channel's word on a message
/// ([`IntentionState::is_channel_outcome`]).
pub static OUTCOME_STATES: Sql = Sql::new(|| states(IntentionState::is_channel_outcome));

/// Acknowledged by the channel but not (yet) known to have reached the
/// customer: accepted, not delivered.
fn taken_not_reached(s: IntentionState) -> bool {
    s.has_channel_evidence() && !s.reached_recipient()
}

/// [`taken_not_reached`] states (a family member's "accepted at").
pub static TAKEN_STATES: Sql = Sql::new(|| states(taken_not_reached));

/// The evidence signals that move to a [`taken_not_reached`] state.
pub static TAKEN_SIGNALS: Sql = Sql::new(|| {
    words(
        &Signal::KINDS,
        |s| s.evidence_state().is_some_and(taken_not_reached),
        |s| HistorySignal::of(s).as_str(),
    )
});

/// Channel events that are a technician's case
/// ([`EventStatus::is_technicians_case`]). The partial index
/// `channel_events_parked` has exactly `status IN` this list as its
/// predicate (tested below).
pub static TECHNICIAN_EVENTS: Sql =
    Sql::new(|| words(&EventStatus::ALL, EventStatus::is_technicians_case, EventStatus::as_str));

/// Operator actions whose latest settles a resend request
/// ([`OpKind::settles_resend_ask`]).
pub static RESEND_ASK_ACTIONS: Sql = Sql::new(|| words(&OpKind::ALL, OpKind::settles_resend_ask, OpKind::as_str));

/// Template statuses at Meta that block sending
/// ([`unavez_core::template_check::MetaStatus::blocks_sending`]).
pub static BLOCKING_TEMPLATE_STATUSES: Sql = Sql::new(|| {
    use unavez_core::template_check::MetaStatus;
    let known = MetaStatus::KNOWN;
    let all: Vec<&MetaStatus> = known.iter().collect();
    words(&all, |m| m.blocks_sending(), |m| m.as_str().to_string())
});

/// [`shown_state_sql`] of the Atención page's intention `i`.
pub static SHOWN_STATE: Sql = Sql::new(|| shown_state_sql("i.state"));

/// The word an Atención row shows for intention `{column}`'s state
/// ([`crate::domain::attention::Situation::of_intention`]): a `CASE` with
/// one branch per pseudo-state, the state itself otherwise.
pub fn shown_state_sql(column: &str) -> String {
    use crate::domain::attention::Situation;
    let mut branches: Vec<(&'static str, Vec<IntentionState>)> = Vec::new();
    for s in IntentionState::ALL {
        let shown = Situation::of_intention(s);
        if shown == Situation::State(s) {
            continue;
        }
        match branches.iter_mut().find(|(w, _)| *w == shown.as_str()) {
            Some((_, list)) => list.push(s),
            None => branches.push((shown.as_str(), vec![s])),
        }
    }
    let mut sql = String::from("CASE");
    for (word, list) in branches {
        let cond = match list.as_slice() {
            [one] => format!("{column} = '{one}'"),
            many => format!("{column} IN {}", words(many, |_| true, IntentionState::as_str)),
        };
        sql.push_str(&format!(" WHEN {cond} THEN '{word}'"));
    }
    sql.push_str(&format!(" ELSE {column} END"));
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The predicate of partial index `index` in a migration's text.
    fn index_predicate<'a>(migration: &'a str, index: &str) -> &'a str {
        let at = migration
            .find(&format!("CREATE INDEX {index} "))
            .unwrap_or_else(|| panic!("no index {index}"));
        let line = migration[at..].lines().next().unwrap();
        let (_, predicate) = line.split_once(" WHERE ").expect("a partial index");
        predicate.trim_end_matches(';')
    }

    /// SQLite uses a partial index only for a query whose `WHERE` holds
    /// the index's own term; PostgreSQL must prove the predicate from the
    /// query's. The technicians' events are found through
    /// `channel_events_parked` on both.
    #[test]
    fn the_parked_events_fragment_is_the_partial_index_predicate_on_both_backends() {
        let fragment = format!("status IN {}", TECHNICIAN_EVENTS);
        let sqlite = include_str!("store/migrations/0005_notifications.sql");
        let pg = include_str!("pg/migrations/0001_ledger.sql");
        assert_eq!(index_predicate(sqlite, "channel_events_parked"), fragment);
        assert_eq!(index_predicate(pg, "channel_events_parked"), fragment);
    }

    #[test]
    fn the_lists_keep_the_words_and_order_the_statements_had() {
        assert_eq!(&*ACKNOWLEDGED_OUTCOMES, "('accepted', 'ambiguous')");
        assert_eq!(&*UNREACHED_OUTCOMES, "('retry', 'not_sent')");
        assert_eq!(&*TECHNICIAN_EVENTS, "('parked', 'refused')");
        assert_eq!(
            shown_state_sql("i.state"),
            "CASE WHEN i.state = 'dispatching' THEN 'stuck' WHEN i.state IN ('accepted', 'sent') THEN 'unconfirmed' \
             ELSE i.state END"
        );
    }
}
