//! The front desk's call list (issue 25, section 4): what a phone call to
//! the patient can come to, and when a case whose call went unanswered is
//! due for another try. Pure rules; the app records outcomes
//! (`ops::call`), the ledger stores them as operator actions.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

/// What came of a call. The outcome is the action's reason: the desk
/// types nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The patient confirmed the appointment.
    Confirmed,
    /// Nobody answered: try again later.
    NoAnswer,
    /// The patient asked to move the appointment (the supervisor handles
    /// it; there is no link back to the booking system).
    RescheduleRequested,
    /// The number is not the patient's: nothing more goes to it.
    WrongNumber,
}

/// How long an unanswered call keeps a case off the call list.
pub const RETRY_AFTER_MINUTES: i64 = 30;

impl CallOutcome {
    /// In the order of the chooser's digits (`1`..`4`).
    pub const ALL: [CallOutcome; 4] = [
        Self::Confirmed,
        Self::NoAnswer,
        Self::RescheduleRequested,
        Self::WrongNumber,
    ];

    /// The stored word (the operator action's reason).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmed",
            Self::NoAnswer => "no_answer",
            Self::RescheduleRequested => "reschedule_requested",
            Self::WrongNumber => "wrong_number",
        }
    }

    /// The chooser's digit.
    pub fn digit(self) -> char {
        match self {
            Self::Confirmed => '1',
            Self::NoAnswer => '2',
            Self::RescheduleRequested => '3',
            Self::WrongNumber => '4',
        }
    }

    pub fn from_digit(c: char) -> Option<CallOutcome> {
        Self::ALL.into_iter().find(|o| o.digit() == c)
    }

    /// What a person types: the stored word, the Spanish one
    /// (`confirmo`, `no_contesta`, `reprogramar`, `numero_equivocado`),
    /// with accents, capitals, spaces or dashes.
    pub fn parse(text: &str) -> Option<CallOutcome> {
        let plain: String = text
            .trim()
            .to_lowercase()
            .chars()
            .map(|c| match c {
                'á' => 'a',
                'é' => 'e',
                'í' => 'i',
                'ó' => 'o',
                'ú' => 'u',
                ' ' | '-' => '_',
                c => c,
            })
            .collect();
        Some(match plain.as_str() {
            "confirmed" | "confirmo" | "confirmada" | "confirmado" => Self::Confirmed,
            "no_answer" | "no_contesta" => Self::NoAnswer,
            "reschedule_requested" | "reschedule" | "reprogramar" | "pidio_reprogramar" => Self::RescheduleRequested,
            "wrong_number" | "numero_equivocado" => Self::WrongNumber,
            _ => return None,
        })
    }

    /// Read back from a stored reason.
    pub fn from_stored(word: &str) -> Option<CallOutcome> {
        Self::ALL.into_iter().find(|o| o.as_str() == word)
    }

    /// Whether the outcome settles the case (marks it handled). An
    /// unanswered call does not: the case comes back for another try.
    pub fn settles(self) -> bool {
        self != Self::NoAnswer
    }
}

/// Whether a case whose next step (`domain::guard::hint`) is `step`
/// belongs on the call list: a call is what the desk does next (a failed
/// message says "reenviar o llamar": the call is the desk's half; a
/// cancelled appointment's failed notice and an unconfirmed delivery are
/// calls too).
pub fn on_call_list(step: super::attention::NextStep) -> bool {
    use super::attention::NextStep;
    matches!(
        step,
        NextStep::Call
            | NextStep::Resend
            | NextStep::RequestResend
            | NextStep::CallAboutCancellation
            | NextStep::ConfirmDelivery
    )
}

/// The unanswered calls of one case so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Tries {
    pub count: u32,
    pub last_at: Option<DateTime<Utc>>,
}

impl Tries {
    /// When the case is due on the call list again.
    pub fn due_again_at(self) -> Option<DateTime<Utc>> {
        self.last_at.map(|t| t + Duration::minutes(RETRY_AFTER_MINUTES))
    }

    /// Whether the case belongs on the call list at `now`.
    pub fn due(self, now: DateTime<Utc>) -> bool {
        self.due_again_at().is_none_or(|at| now >= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn digits_are_the_choosers_order_and_round_trip() {
        for (i, o) in CallOutcome::ALL.into_iter().enumerate() {
            assert_eq!(o.digit(), char::from(b'1' + i as u8));
            assert_eq!(CallOutcome::from_digit(o.digit()), Some(o));
            assert_eq!(CallOutcome::from_stored(o.as_str()), Some(o));
            assert_eq!(CallOutcome::parse(o.as_str()), Some(o));
        }
        assert_eq!(CallOutcome::from_digit('0'), None);
        assert_eq!(CallOutcome::from_digit('5'), None);
    }

    #[test]
    fn what_a_person_types_is_understood() {
        use CallOutcome::*;
        for (text, want) in [
            ("confirmo", Confirmed),
            ("Confirmó", Confirmed),
            ("no contesta", NoAnswer),
            ("NO-CONTESTA", NoAnswer),
            ("reprogramar", RescheduleRequested),
            ("número_equivocado", WrongNumber),
            ("numero equivocado", WrongNumber),
        ] {
            assert_eq!(CallOutcome::parse(text), Some(want), "{text}");
        }
        assert_eq!(CallOutcome::parse("tal vez"), None);
        assert_eq!(CallOutcome::parse(""), None);
    }

    #[test]
    fn only_an_unanswered_call_leaves_the_case_open() {
        let open: Vec<_> = CallOutcome::ALL.into_iter().filter(|o| !o.settles()).collect();
        assert_eq!(open, [CallOutcome::NoAnswer]);
    }

    #[test]
    fn the_call_list_holds_the_cases_a_call_answers() {
        use crate::domain::attention::NextStep;
        let on: Vec<_> = NextStep::ALL.into_iter().filter(|s| on_call_list(*s)).collect();
        assert_eq!(
            on,
            [
                NextStep::Call,
                NextStep::Resend,
                NextStep::ConfirmDelivery,
                NextStep::RequestResend,
                NextStep::CallAboutCancellation
            ]
        );
        assert!(!on_call_list(NextStep::WaitForChannel), "the channel settles those");
        assert!(!on_call_list(NextStep::CheckConflict));
    }

    #[test]
    fn an_unanswered_case_is_due_again_after_thirty_minutes() {
        let t0 = Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap();
        assert!(Tries::default().due(t0));
        let tries = Tries {
            count: 1,
            last_at: Some(t0),
        };
        assert!(!tries.due(t0));
        assert!(!tries.due(t0 + Duration::minutes(29) + Duration::seconds(59)));
        assert!(tries.due(t0 + Duration::minutes(30)));
        assert_eq!(tries.due_again_at(), Some(t0 + Duration::minutes(30)));
    }
}
