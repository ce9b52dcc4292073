//! The attention SQL is built from the rule; searches split for the index.

use super::*;
use crate::domain::state::IntentionState;

const PE: Country = Country::PE;

#[test]
fn the_sql_is_built_from_the_rule() {
    let rule = AttentionRule::default();
    assert_eq!(
        rule_sql(&rule, |_| true),
        "(i.state = 'uncertain' OR i.state = 'review' OR (i.state = 'failed' AND i.due_at >= ?2) \
         OR (i.state = 'dispatching' AND i.lease_until < ?1))"
    );
    // The walked states are the partial index's own list, in its order,
    // and what a walked clause asks beyond its state is a term of its own.
    assert_eq!(
        walked_sql(&rule),
        "i.state IN ('uncertain', 'review', 'failed') AND (i.state <> 'failed' OR i.due_at >= ?2)"
    );
    // `walked_sql` is the walked clauses' OR only while no state has two.
    let walked_states: Vec<_> = rule.clauses().iter().filter(|c| walked(c)).map(|c| c.state()).collect();
    let mut distinct = walked_states.clone();
    distinct.sort_by_key(|s| s.as_str());
    distinct.dedup();
    assert_eq!(distinct.len(), walked_states.len());
    assert!(
        rule.clauses()
            .contains(&Clause::LeaseExpired(IntentionState::Dispatching))
    );
}

#[test]
fn a_search_splits_the_reference_from_a_typed_key() {
    let s = Search::parse(Some(" cita-1042:recordatorio "), PE).unwrap();
    assert_eq!(s.phrase.as_deref(), Some("\"cita-1042\""));
    assert_eq!(s.key_like.as_deref(), Some("%cita-1042:recordatorio%"));
    let s = Search::parse(Some("12"), PE).unwrap();
    assert_eq!((s.phrase, s.like.as_str()), (None, "%12%"));
    let s = Search::parse(Some("an\"a"), PE).unwrap();
    assert_eq!(s.phrase.as_deref(), Some("\"an\"\"a\""));
    assert!(Search::parse(Some("  "), PE).is_none());
}

#[test]
fn postgresql_asks_its_trigram_index_for_the_most_telling_words() {
    let word = |text: &str| Search::parse(Some(text), PE).unwrap().index_like;
    assert_eq!(word("Paciente 57321"), "%57321%");
    assert_eq!(word("cita-322583:recordatorio-24h"), "%322583%");
    assert_eq!(word("908 439 509"), "%908%439%509%");
    // A name's words all together, in the order typed.
    assert_eq!(word("María Quispe"), "%María%Quispe%");
    assert_eq!(word("patricia qiuspe"), "%patricia%qiuspe%");
    assert_eq!(word("Flor de María"), "%Flor%María%");
    // Too short for a trigram of its own: the whole text.
    assert_eq!(word("ab cd"), "%ab cd%");
    // Too short for trigrams at all: the plain pattern on both engines.
    let s = Search::parse(Some("12"), PE).unwrap();
    assert_eq!((s.arg(true), s.arg(false)), ("%12%", "%12%"));
    let s = Search::parse(Some("Paciente 57321"), PE).unwrap();
    assert_eq!((s.arg(true), s.arg(false)), ("%57321%", "\"Paciente 57321\""));
}

/// The walked states are the text of `intentions_attention`'s predicate as
/// both backends' migrations wrote it (SQLite's `INDEXED BY` refuses the
/// query otherwise; PostgreSQL would not prove the predicate), whichever
/// clauses the rule has.
#[test]
fn the_walked_states_are_the_attention_index_predicate_on_both_backends() {
    fn predicate(migration: &str) -> &str {
        let at = migration.find("CREATE INDEX intentions_attention ").expect("the index");
        let (_, rest) = migration[at..].split_once("WHERE ").expect("a partial index");
        rest.split(';').next().unwrap().trim()
    }
    let sqlite = predicate(include_str!("migrations/0002_console_speed.sql"));
    let pg = predicate(include_str!("../pg/migrations/0001_ledger.sql"));
    for unconfirmed in [None, Some(chrono::Duration::minutes(30))] {
        let rule = AttentionRule {
            unconfirmed_window: unconfirmed,
            ..AttentionRule::default()
        };
        assert_eq!(walked_states(&rule), format!("i.{sqlite}"));
        assert_eq!(walked_states(&rule), format!("i.{pg}"));
    }
}
