//! The attention SQL is built from the rule; searches split for the index.

use super::*;
use crate::domain::state::IntentionState;

#[test]
fn the_sql_is_built_from_the_rule() {
    let rule = AttentionRule::default();
    assert_eq!(
        rule_sql(&rule, |_| true),
        "(i.state = 'uncertain' OR i.state = 'review' OR (i.state = 'failed' AND i.due_at >= ?2) \
         OR (i.state = 'dispatching' AND i.lease_until < ?1))"
    );
    // The walked states are the partial index's own list, in its order.
    assert_eq!(walked_states(&rule), "i.state IN ('uncertain', 'review', 'failed')");
    assert!(
        rule.clauses()
            .contains(&Clause::LeaseExpired(IntentionState::Dispatching))
    );
}

#[test]
fn a_search_splits_the_reference_from_a_typed_key() {
    let s = Search::parse(Some(" cita-1042:recordatorio ")).unwrap();
    assert_eq!(s.phrase.as_deref(), Some("\"cita-1042\""));
    assert_eq!(s.key_like.as_deref(), Some("%cita-1042:recordatorio%"));
    let s = Search::parse(Some("12")).unwrap();
    assert_eq!((s.phrase, s.like.as_str()), (None, "%12%"));
    let s = Search::parse(Some("an\"a")).unwrap();
    assert_eq!(s.phrase.as_deref(), Some("\"an\"\"a\""));
    assert!(Search::parse(Some("  ")).is_none());
}
