use chrono::{Duration, TimeZone};

use super::*;
use crate::domain::lifecycle::OrderState;

fn t(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, h, m, 0).unwrap()
}

fn appointment() -> Commitment {
    Commitment {
        reference: "CITA-1".into(),
        kind: CommitmentKind::Appointment,
        status: crate::domain::commitment::CommitmentStatus::Scheduled,
        version: 1,
        starts_at: Some(t(22, 20)),
        service: Some("Medicina general".into()),
        location: Some("Sede Miraflores".into()),
        phone: Some("+51908439509".into()),
        name: Some("María Flores".into()),
        language: None,
        confirmed_at: None,
        manual_contact_at: None,
    }
}

fn facts<'a>(state: IntentionState, reason: Option<&'a str>, c: Option<&'a Commitment>) -> Facts<'a> {
    Facts {
        state,
        state_reason: reason,
        purpose: Purpose::Booking,
        state_changed_at: t(16, 40),
        due_at: t(15, 0),
        channel_took_it: false,
        commitment: c,
    }
}

/// Every state has its own outcome, and the time it carries is the one a
/// person asks about: the due time of what waits, the evidence's time of
/// what the channel answered, none while nobody knows.
#[test]
fn every_state_has_a_verdict() {
    let c = appointment();
    for state in IntentionState::ALL {
        let v = verdict(&facts(state, None, Some(&c)));
        let (outcome, at) = match state {
            IntentionState::Planned => (Outcome::Scheduled, Some(t(15, 0))),
            IntentionState::Dispatching => (Outcome::Sending, None),
            IntentionState::Uncertain => (Outcome::Unknown, None),
            IntentionState::Accepted | IntentionState::Sent => (Outcome::WithChannel, Some(t(16, 40))),
            IntentionState::Delivered => (Outcome::Delivered, Some(t(16, 40))),
            IntentionState::Read => (Outcome::Read, Some(t(16, 40))),
            IntentionState::Failed => (Outcome::NeverLeft, Some(t(16, 40))),
            IntentionState::Review => (Outcome::Review(ReviewWhy::Other), None),
            IntentionState::Cancelled => (Outcome::NotSent(None), Some(t(16, 40))),
        };
        assert_eq!((v.outcome, v.at), (outcome, at), "{state}");
        assert_eq!(v.notice, Notice::Booking);
        assert!(!v.is_order());
        assert_eq!(
            v.about,
            Some(About::Appointment {
                starts_at: Some(t(22, 20)),
                service: Some("Medicina general".into()),
                location: Some("Sede Miraflores".into()),
                cancelled: false,
                confirmed: false,
            })
        );
    }
}

/// A failure after the channel took the message is a failure to deliver;
/// before, the channel confirmed that nothing went out.
#[test]
fn a_failure_says_whether_anything_left() {
    let mut f = facts(
        IntentionState::Failed,
        Some("engine resolved an ambiguous command; no_salio"),
        None,
    );
    assert_eq!(verdict(&f).outcome, Outcome::NeverLeft);
    f.channel_took_it = true;
    assert_eq!(verdict(&f).outcome, Outcome::Undelivered);
    assert_eq!(verdict(&f).about, None);
}

#[test]
fn every_cancel_reason_is_kept_and_free_text_is_not_read() {
    for r in CancelReason::ALL {
        let v = verdict(&facts(IntentionState::Cancelled, Some(r.as_str()), None));
        assert_eq!(v.outcome, Outcome::NotSent(Some(r)));
    }
    let v = verdict(&facts(
        IntentionState::Cancelled,
        Some("whatever the engine said"),
        None,
    ));
    assert_eq!(v.outcome, Outcome::NotSent(None));
}

#[test]
fn every_review_reason_is_kept() {
    let cases = [
        (Some("template_blocked"), ReviewWhy::TemplateBlocked),
        (Some("changed_while_uncertain"), ReviewWhy::ChangedWhileUncertain),
        (Some("invalid_while_uncertain"), ReviewWhy::InvalidWhileUncertain),
        (Some("lease expired twice"), ReviewWhy::Other),
        (None, ReviewWhy::Other),
    ];
    for (reason, why) in cases {
        assert_eq!(
            verdict(&facts(IntentionState::Review, reason, None)).outcome,
            Outcome::Review(why)
        );
    }
}

#[test]
fn every_purpose_names_its_notice() {
    let purposes = [
        (Purpose::Booking, Notice::Booking),
        (Purpose::Reminder { minutes: 1440 }, Notice::Reminder),
        (Purpose::Update, Notice::Update),
        (Purpose::Cancellation, Notice::Cancellation),
        (
            Purpose::Order {
                event: "enviado".into(),
            },
            Notice::Order,
        ),
    ];
    for (p, n) in purposes {
        let mut f = facts(IntentionState::Read, None, None);
        f.purpose = p;
        assert_eq!(verdict(&f).notice, n);
    }
}

/// The tail says a cancelled or confirmed appointment as such, and an
/// order by its reference and state (its person is a customer).
#[test]
fn the_commitment_facts_reach_the_tail() {
    let mut c = appointment();
    c.status = crate::domain::commitment::CommitmentStatus::Cancelled;
    c.confirmed_at = Some(t(9, 0));
    let v = verdict(&facts(IntentionState::Delivered, None, Some(&c)));
    assert!(matches!(
        v.about,
        Some(About::Appointment {
            cancelled: true,
            confirmed: true,
            ..
        })
    ));
    let order = Commitment {
        reference: "PED-9".into(),
        kind: CommitmentKind::Order,
        status: crate::domain::commitment::CommitmentStatus::Order(OrderState::ALL[0]),
        starts_at: None,
        ..appointment()
    };
    let mut f = facts(IntentionState::Sent, None, Some(&order));
    f.purpose = Purpose::Order {
        event: OrderState::ALL[0].as_str().into(),
    };
    f.state_changed_at = t(16, 40) + Duration::minutes(1);
    let v = verdict(&f);
    assert!(v.is_order());
    assert_eq!(
        v.about,
        Some(About::Order {
            reference: "PED-9".into(),
            state: OrderState::ALL[0].as_str().into(),
        })
    );
    assert_eq!(v.at, Some(t(16, 41)));
}

/// The engine's queue is not the phone: `en_cola` then `fallido` never
/// left; sent, delivered, read or a Cloud `failed` did.
#[test]
fn what_counts_as_taken_by_the_channel() {
    let engine = [
        ("planned", "reserved"),
        ("dispatching", "claim"),
        ("accepted", "webhook:en_cola"),
        ("accepted", "webhook:ambiguo"),
        ("failed", "webhook:fallido"),
    ];
    assert!(!channel_took_it(engine));
    assert!(channel_took_it([("accepted", "accepted"), ("sent", "webhook:enviado")]));
    assert!(channel_took_it([
        ("accepted", "accepted"),
        ("failed", "webhook:failed")
    ]));
    assert!(channel_took_it([("read", "read")]));
    assert!(!channel_took_it([("accepted", "accepted"), ("failed", "failed")]));
}
