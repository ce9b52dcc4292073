use super::*;
use crate::domain::state::CancelReason;

fn lease(id: i64, state: IntentionState, owner: Option<&str>, open: &[i64]) -> LeaseFacts {
    LeaseFacts {
        intention_id: id,
        state,
        owner: owner.map(str::to_string),
        open_attempts: open.to_vec(),
    }
}

fn ended(w: &AttemptWrite) -> (i64, AttemptOutcome, Option<&str>) {
    match w {
        AttemptWrite::End {
            attempt_id,
            outcome,
            error_detail,
            ..
        } => (*attempt_id, *outcome, error_detail.as_deref()),
        other => panic!("not an end: {other:?}"),
    }
}

#[test]
fn an_expired_lease_makes_the_outcome_unknown_never_planned() {
    let now = Utc::now();
    let r = expire_leases(
        &[
            lease(1, IntentionState::Dispatching, Some("w1"), &[10, 11]),
            lease(2, IntentionState::Dispatching, None, &[]),
        ],
        now,
    );
    let note1 = "lease of w1 expired with the attempt unfinished: outcome unknown";
    let note2 = "lease of ? expired with the attempt unfinished: outcome unknown";
    assert_eq!(
        r.attempts.iter().map(ended).collect::<Vec<_>>(),
        [
            (10, AttemptOutcome::Uncertain, Some(note1)),
            (11, AttemptOutcome::Uncertain, Some(note1)),
        ]
    );
    assert_eq!(r.moved(), [1, 2]);
    let rec = &r.records[0];
    assert_eq!(
        (rec.from, rec.to, rec.applied, rec.reason.as_deref()),
        (
            Some(IntentionState::Dispatching),
            IntentionState::Uncertain,
            true,
            Some(note1)
        )
    );
    assert_eq!(
        (rec.said.signal, rec.said.cause, rec.said.note.as_deref()),
        (HistorySignal::LeaseExpired, Cause::Reconciler, Some(note1))
    );
    assert_eq!(r.records[1].said.note.as_deref(), Some(note2));
    assert_eq!(expire_leases(&[], now), Recovery::default());
}

#[test]
fn an_abandoned_attempt_is_unknown_said_by_the_dispatcher() {
    let now = Utc::now();
    let r = abandon(
        &[lease(3, IntentionState::Dispatching, Some("w"), &[7])],
        "shutdown",
        now,
    );
    assert_eq!(
        r.attempts.iter().map(ended).collect::<Vec<_>>(),
        [(7, AttemptOutcome::Uncertain, Some("shutdown"))]
    );
    let rec = &r.records[0];
    assert_eq!(
        (rec.to, rec.said.signal, rec.said.cause),
        (
            IntentionState::Uncertain,
            HistorySignal::UnknownOutcome,
            Cause::Dispatcher
        )
    );
    // Already uncertain (the reconciler got there first): a record only.
    let r = abandon(&[lease(3, IntentionState::Uncertain, None, &[7])], "shutdown", now);
    assert!(r.moved().is_empty());
    assert_eq!(r.records[0].said.note.as_deref(), Some("repeated: shutdown"));
    assert_eq!(r.attempts.len(), 1, "the open attempt still ends");
    // Settled meanwhile (a webhook said delivered): the machine refuses,
    // nothing is written to history, the attempt still ends.
    let r = abandon(&[lease(3, IntentionState::Delivered, None, &[7])], "shutdown", now);
    assert!(r.records.is_empty());
}

#[test]
fn a_try_that_settles_nothing_is_a_reconcile_note() {
    let now = Utc::now();
    let r = reconcile_note(4, IntentionState::Uncertain, "waiting", Some("cmd-1"), now);
    assert_eq!(
        (r.from, r.to, r.applied),
        (Some(IntentionState::Uncertain), IntentionState::Uncertain, false)
    );
    assert_eq!(
        (
            r.said.signal,
            r.said.cause,
            r.said.evidence.as_deref(),
            r.said.note.as_deref()
        ),
        (
            HistorySignal::Reconcile,
            Cause::Reconciler,
            Some("cmd-1"),
            Some("waiting")
        )
    );
}

#[test]
fn evidence_goes_through_the_state_machine() {
    let now = Utc::now();
    let r = reconcile_evidence(
        5,
        IntentionState::Uncertain,
        Signal::Delivered,
        Some("m1"),
        "lookup",
        now,
    )
    .unwrap();
    assert_eq!((r.to, r.applied), (IntentionState::Delivered, true));
    assert_eq!(
        (r.said.signal, r.said.cause, r.said.evidence.as_deref()),
        (HistorySignal::Delivered, Cause::Reconciler, Some("m1"))
    );
    assert_eq!(
        reconcile_evidence(5, IntentionState::Sent, Signal::Claim, None, "x", now),
        None
    );
}

#[test]
fn a_refused_repeat_goes_to_review_with_its_typed_reason() {
    let now = Utc::now();
    let r = reconcile_review(6, IntentionState::Uncertain, ToReview::NoEvidence, "no evidence", now).unwrap();
    assert_eq!(
        (r.to, r.reason.as_deref(), r.said.evidence, r.said.commitment_version),
        (IntentionState::Review, Some("no evidence"), None, None)
    );
    let why = ToReview::RefusedRepeat {
        reason: ReviewReason::for_refused_repeat(CancelReason::Superseded),
        version: 3,
    };
    let r = reconcile_review(6, IntentionState::Uncertain, why, "validity: superseded", now).unwrap();
    assert_eq!(
        (
            r.to,
            r.reason.as_deref(),
            r.said.evidence.as_deref(),
            r.said.commitment_version,
            r.said.note.as_deref()
        ),
        (
            IntentionState::Review,
            Some("changed_while_uncertain"),
            Some("validity_before_repeat"),
            Some(3),
            Some("validity: superseded")
        )
    );
    // Already in review: recorded, the reason stays as it was.
    let r = reconcile_review(6, IntentionState::Review, why, "again", now).unwrap();
    assert_eq!((r.applied, r.reason), (false, None));
    assert_eq!(
        reconcile_review(6, IntentionState::Delivered, ToReview::NoEvidence, "x", now),
        None
    );
}
