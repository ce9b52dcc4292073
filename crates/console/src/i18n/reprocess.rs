//! Reproceso's "por qué" in words (issue 25 §6): the typed reason of each
//! item (`dispatch::reprocess::Because`) in the configured language, its
//! times local and human like every other date of the console.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::{Strings, fill, lookup};
use crate::dispatch::reprocess::{Because, ReplanRefusal};

impl Strings {
    /// Why reprocessing does what it does with one item.
    pub fn reprocess_why(&self, b: &Because, now: DateTime<Utc>, tz: Tz) -> String {
        let template = lookup(self.reprocess_because, b.code()).unwrap_or("");
        let when = |t: DateTime<Utc>| self.words.when(t, now, tz);
        let paren = |r: &Option<String>| {
            r.as_deref()
                .map(|x| format!(" ({})", self.reason(x)))
                .unwrap_or_default()
        };
        let none = self.detail_none;
        match b {
            Because::NotDue { at } | Because::NextTry { at } => fill(template, &[("at", &when(*at))]),
            Because::Deferred { until, .. } => fill(template, &[("at", &when(*until))]),
            Because::Closes { reason, .. } => fill(template, &[("reason", self.reason(reason.as_str()))]),
            Because::InFlight { owner, until } => fill(
                template,
                &[
                    ("owner", owner.as_deref().unwrap_or(none)),
                    ("at", &until.map(when).unwrap_or_else(|| none.to_string())),
                ],
            ),
            Because::Reported { state } => fill(template, &[("state", self.state(state.as_str()))]),
            Because::Cancelled { reason } => fill(
                template,
                &[("reason", reason.as_deref().map(|r| self.reason(r)).unwrap_or(none))],
            ),
            // The state is in its own column: the reason is what is new.
            Because::ForPerson { reason, .. } => fill(template, &[("reason", &paren(reason))]),
            Because::Replan { attempts } => fill(template, &[("n", &attempts.to_string())]),
            Because::FailedStays { refused } => fill(template, &[("why", &self.replan_refusal(*refused))]),
            Because::Acknowledged | Because::Valid | Because::Uncertain => template.to_string(),
        }
    }

    fn replan_refusal(&self, r: ReplanRefusal) -> String {
        let (code, n) = match r {
            ReplanRefusal::NotFailed => ("not_failed", 0),
            ReplanRefusal::NoAttempt => ("no_attempt", 0),
            ReplanRefusal::MayHaveReached(n) => ("may_have_reached", n),
            ReplanRefusal::HasChannelRefs => ("has_channel_refs", 0),
        };
        fill(
            lookup(self.replan_refusals, code).unwrap_or(code),
            &[("n", &n.to_string())],
        )
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::config::Language;

    /// Every kind of reason has its words in both languages, with no
    /// placeholder left and no English word in the Spanish one.
    #[test]
    fn every_reason_has_words_in_both_languages() {
        let tz = chrono_tz::America::Lima;
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 13, 0, 0).unwrap();
        for lang in [Language::Es, Language::En] {
            let t = crate::i18n::strings(lang);
            for b in Because::examples() {
                assert!(lookup(t.reprocess_because, b.code()).is_some(), "{lang:?} {b:?}");
                let s = t.reprocess_why(&b, now, tz);
                assert!(!s.is_empty() && !s.contains('{'), "{lang:?} {b:?}: {s}");
            }
            for r in [
                ReplanRefusal::NotFailed,
                ReplanRefusal::NoAttempt,
                ReplanRefusal::MayHaveReached(2),
                ReplanRefusal::HasChannelRefs,
            ] {
                let s = t.replan_refusal(r);
                assert!(!s.contains('_') && !s.contains('{'), "{lang:?} {r:?}: {s}");
            }
        }
    }

    /// Times are the clinic's and human, never UTC or ISO: "mañana 09:30"
    /// (14:30 UTC), with the year only when it is another one.
    #[test]
    fn times_are_local_and_human() {
        let tz = chrono_tz::America::Lima;
        let now = Utc.with_ymd_and_hms(2026, 12, 31, 13, 0, 0).unwrap();
        let es = crate::i18n::strings(Language::Es);
        let en = crate::i18n::strings(Language::En);
        let tomorrow = Because::NotDue {
            at: Utc.with_ymd_and_hms(2027, 1, 1, 14, 30, 0).unwrap(),
        };
        assert_eq!(
            es.reprocess_why(&tomorrow, now, tz),
            "aún no le toca: sale mañana 09:30"
        );
        assert_eq!(
            en.reprocess_why(&tomorrow, now, tz),
            "not due yet: goes out tomorrow 09:30"
        );
        let later = Because::Deferred {
            until: Utc.with_ymd_and_hms(2027, 1, 5, 12, 0, 0).unwrap(),
            why: "quiet hours".into(),
        };
        assert_eq!(es.reprocess_why(&later, now, tz), "se aplaza hasta 05/01/2027 07:00");
        let review = Because::ForPerson {
            state: crate::domain::state::IntentionState::Failed,
            reason: None,
        };
        assert_eq!(es.reprocess_why(&review, now, tz), "espera a una persona");
        let expired = Because::ForPerson {
            state: crate::domain::state::IntentionState::Review,
            reason: Some("expired".into()),
        };
        assert_eq!(
            en.reprocess_why(&expired, now, tz),
            format!("waits for a person ({})", en.reason("expired"))
        );
    }
}
