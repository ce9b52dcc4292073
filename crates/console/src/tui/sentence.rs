//! A message's state as one plain sentence, for the patient card (issue
//! 25 §1). One function, so a richer verdict (state, evidence and
//! commitment together, §2) can replace it in one place.

use crate::i18n::Strings;
use crate::store::NotificationCell;

/// What happened to `n`, in the operator's language: the state's sentence
/// from the string table, else the state's label.
pub fn message_sentence(t: &Strings, n: &NotificationCell) -> String {
    t.message_sentences
        .iter()
        .find(|(code, _)| *code == n.state)
        .map(|(_, s)| (*s).to_string())
        .unwrap_or_else(|| t.state(&n.state).to_string())
}

#[cfg(test)]
mod tests {
    use crate::config::Language;
    use crate::domain::state::IntentionState;

    /// Every state has its own sentence in both languages (a state left
    /// out would fall back to its bare label on the card).
    #[test]
    fn every_state_has_a_sentence_in_both_languages() {
        for lang in [Language::Es, Language::En] {
            let t = crate::i18n::strings(lang);
            for st in IntentionState::ALL {
                assert!(
                    t.message_sentences
                        .iter()
                        .any(|(code, s)| *code == st.as_str() && !s.is_empty()),
                    "{lang:?}: no sentence for {st:?}"
                );
            }
        }
    }
}
