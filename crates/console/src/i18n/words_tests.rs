use chrono::TimeZone;

use super::*;
use crate::domain::commitment::{Commitment, CommitmentKind, CommitmentStatus};
use crate::domain::history::{Cause, HistorySignal};
use crate::domain::key::Purpose;
use crate::domain::state::{IntentionState, ReviewReason};
use crate::domain::verdict::{Facts, verdict};
use crate::i18n::{EN, ES, Strings};

const LIMA: Tz = chrono_tz::America::Lima;

fn lima(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    LIMA.with_ymd_and_hms(2026, 12, d, h, m, 0).unwrap().with_timezone(&Utc)
}

fn appointment() -> Commitment {
    Commitment {
        reference: "CITA-1".into(),
        kind: CommitmentKind::Appointment,
        status: CommitmentStatus::Scheduled,
        version: 1,
        starts_at: Some(lima(1, 17, 20)),
        service: Some("Medicina general".into()),
        location: Some("Sede Miraflores".into()),
        phone: None,
        name: Some("María Flores".into()),
        language: None,
        confirmed_at: None,
        manual_contact_at: None,
    }
}

fn facts(state: IntentionState, purpose: Purpose, c: Option<&Commitment>) -> Facts<'_> {
    Facts {
        state,
        state_reason: None,
        purpose,
        state_changed_at: lima(1, 11, 40),
        due_at: lima(1, 9, 0),
        channel_took_it: false,
        commitment: c,
    }
}

/// The issue's own examples, word for word.
#[test]
fn the_front_desk_reads_what_happened() {
    let now = lima(1, 12, 0);
    let c = appointment();
    let v = verdict(&facts(IntentionState::Failed, Purpose::Booking, Some(&c)));
    assert_eq!(
        ES.words.verdict(&v, now, LIMA),
        "No le llegó el aviso de reserva: el canal confirmó que no salió. Cita hoy 17:20, Medicina general, Sede Miraflores."
    );
    let v = verdict(&facts(IntentionState::Read, Purpose::Update, None));
    assert_eq!(
        ES.words.verdict(&v, now, LIMA),
        "Se le avisó de la reprogramación; lo leyó hoy 11:40."
    );
    assert_eq!(
        EN.words.verdict(&v, now, LIMA),
        "They were told of the reschedule; they read it today 11:40."
    );
}

/// Every state, every message kind, both languages: a sentence with no
/// placeholder left and no engine word (`snake_case`) in it.
#[test]
fn every_state_reads_as_a_sentence_in_both_languages() {
    let now = lima(1, 12, 0);
    let c = appointment();
    let purposes = [
        Purpose::Booking,
        Purpose::Reminder { minutes: 120 },
        Purpose::Update,
        Purpose::Cancellation,
        Purpose::Order {
            event: "enviado".into(),
        },
    ];
    let mut reasons: Vec<Option<&str>> = vec![None, Some("template_blocked"), Some("engine said no_salio")];
    reasons.extend(CancelReason::ALL.map(|r| Some(r.as_str())));
    reasons
        .extend([ReviewReason::ChangedWhileUncertain, ReviewReason::InvalidWhileUncertain].map(|r| Some(r.as_str())));
    for t in [&ES, &EN] {
        for state in IntentionState::ALL {
            for p in &purposes {
                for reason in &reasons {
                    for took in [false, true] {
                        let mut f = facts(state, p.clone(), Some(&c));
                        f.state_reason = *reason;
                        f.channel_took_it = took;
                        let s = t.words.verdict(&verdict(&f), now, LIMA);
                        assert!(!s.contains('{') && !s.contains('_'), "{state} {p:?} {reason:?}: {s}");
                        assert!(s.chars().next().unwrap().is_uppercase(), "{s}");
                        assert!(s.ends_with('.'), "{s}");
                    }
                }
            }
        }
    }
}

/// A planned message says when it goes out, or that it is late.
#[test]
fn a_planned_message_says_when_or_that_it_is_late() {
    let mut f = facts(IntentionState::Planned, Purpose::Reminder { minutes: 120 }, None);
    f.due_at = lima(1, 15, 0);
    let v = verdict(&f);
    assert_eq!(
        ES.words.verdict(&v, lima(1, 12, 0), LIMA),
        "El recordatorio sale hoy 15:00."
    );
    assert_eq!(
        ES.words.verdict(&v, lima(1, 16, 0), LIMA),
        "El recordatorio debía salir hoy 15:00 y aún espera."
    );
}

#[test]
fn a_cancelled_or_confirmed_appointment_and_an_order_say_so() {
    let now = lima(1, 12, 0);
    let mut c = appointment();
    c.confirmed_at = Some(now);
    let v = verdict(&facts(IntentionState::Delivered, Purpose::Booking, Some(&c)));
    assert!(
        ES.words
            .verdict(&v, now, LIMA)
            .ends_with("Cita hoy 17:20, Medicina general, Sede Miraflores (confirmada).")
    );
    c.status = CommitmentStatus::Cancelled;
    let v = verdict(&facts(IntentionState::Delivered, Purpose::Cancellation, Some(&c)));
    assert!(
        ES.words
            .verdict(&v, now, LIMA)
            .ends_with("Cita cancelada (hoy 17:20, Medicina general, Sede Miraflores).")
    );
    let order = Commitment {
        reference: "PED-9".into(),
        kind: CommitmentKind::Order,
        starts_at: None,
        ..appointment()
    };
    let v = verdict(&facts(
        IntentionState::Sent,
        Purpose::Order {
            event: "enviado".into(),
        },
        Some(&order),
    ));
    assert_eq!(
        ES.words.verdict(&v, now, LIMA),
        "El aviso del pedido salió hoy 11:40; el canal aún no confirma que le llegó. Pedido PED-9: scheduled."
    );
}

/// Local and human: today, tomorrow, yesterday, a date this year, and the
/// year only when it is another one. Never ISO, never UTC.
#[test]
fn dates_are_local_and_human() {
    let now = lima(1, 23, 30);
    let w = &ES.words;
    assert_eq!(w.when(lima(1, 14, 30), now, LIMA), "hoy 14:30");
    assert_eq!(w.when(lima(2, 9, 0), now, LIMA), "mañana 09:00");
    assert_eq!(
        w.when(lima(1, 0, 5) - chrono::Duration::hours(1), now, LIMA),
        "ayer 23:05"
    );
    assert_eq!(w.when(lima(3, 9, 40), now, LIMA), "03/12 09:40");
    let next_year = LIMA.with_ymd_and_hms(2027, 1, 5, 8, 0, 0).unwrap().with_timezone(&Utc);
    assert_eq!(w.when(next_year, now, LIMA), "05/01/2027 08:00");
    let d = |m, d| chrono::NaiveDate::from_ymd_opt(2026, m, d).unwrap();
    assert_eq!(w.day(d(12, 1), now, LIMA), "hoy");
    assert_eq!(w.day(d(12, 2), now, LIMA), "mañana");
    assert_eq!(w.day(d(11, 30), now, LIMA), "ayer");
    assert_eq!(w.day(d(3, 12), now, LIMA), "12/03");
    assert_eq!(
        w.day(chrono::NaiveDate::from_ymd_opt(2025, 12, 1).unwrap(), now, LIMA),
        "01/12/2025"
    );
    // 23:30 in Lima is 04:30 UTC the next day: still "hoy".
    assert_eq!(w.when(now, now, LIMA), "hoy 23:30");
}

fn complete(t: &Strings) {
    use crate::i18n::lookup as has;
    for h in HistorySignal::all() {
        if h == HistorySignal::Webhook {
            assert_ne!(t.signal("webhook:delivered"), "webhook:delivered");
            continue;
        }
        let said = has(t.signals, h.as_str()).unwrap_or_else(|| panic!("history signal {h} has no text"));
        assert!(!said.contains('_'), "{said}");
    }
    for c in Cause::ALL {
        assert!(has(t.causes, c.as_str()).is_some(), "cause {c}");
    }
    for r in CancelReason::ALL {
        assert!(has(t.reasons, r.as_str()).is_some(), "cancel reason {r}");
        assert!(!lookup(&t.words.not_sent_why, r).is_empty(), "{r}");
    }
    for r in [ReviewReason::ChangedWhileUncertain, ReviewReason::InvalidWhileUncertain] {
        assert!(has(t.reasons, r.as_str()).is_some(), "review reason {r}");
    }
    for r in RecordOnly::ALL {
        assert!(
            t.words.record_only(Some(r.as_str())).is_some(),
            "record-only reason {r:?}"
        );
        assert!(
            t.words.record_only(Some(&format!("{}: late", r.as_str()))).is_some(),
            "{r:?}"
        );
    }
    for o in AttemptOutcome::ALL {
        assert!(!t.words.attempt_outcome(o).is_empty(), "attempt outcome {o}");
    }
    for n in Notice::ALL {
        assert!(t.words.notices.iter().any(|(k, ..)| *k == n), "{n:?}");
    }
    for w in ReviewWhy::ALL {
        assert!(t.words.review_why.iter().any(|(k, _)| *k == w), "{w:?}");
    }
    for rel in ["resend_of", "resent_as", "other_version"] {
        assert!(!t.words.relation(rel).is_empty(), "{rel}");
    }
}

/// Every history signal, cause, closing reason, record-only reason,
/// attempt outcome and message kind has words in both languages.
#[test]
fn every_vocabulary_is_translated() {
    complete(&ES);
    complete(&EN);
}

/// Channel answers are open-ended: a known word is translated, anything
/// else says we do not recognize it (never the raw word).
#[test]
fn channel_answers_known_and_unknown() {
    assert_eq!(ES.signal("webhook:delivered"), "aviso del canal: le llegó");
    assert_eq!(ES.signal("webhook:fallido"), "aviso del canal: no salió");
    assert_eq!(
        ES.signal("webhook:warning"),
        "aviso del canal: el canal respondió algo que no reconocemos"
    );
    assert_eq!(ES.words.channel_word("clave_en_uso"), ES.words.channel_unknown);
    for t in [&ES, &EN] {
        for (word, _) in t.words.channel_words {
            assert_ne!(t.words.channel_word(word), t.words.channel_unknown);
        }
    }
}
