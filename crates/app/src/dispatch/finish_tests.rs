//! Store-level tests of the pre-send check, abandoned sends, repeats that
//! record the version they were validated against, and reviews of refused
//! repeats, on a real SQLite file.

use chrono::{Duration, Utc};

use super::super::claim::tests::{claim, claimant, claimed, retry, rules, schedule, setup};
use super::*;
use crate::dispatch::claim::{ClaimDecision, claim_batch, evaluate};
use crate::dispatch::presend::moved;
use crate::domain::attempt::AttemptResult;
use crate::domain::state::ReviewReason;
use crate::domain::validity::Validity;
use crate::store::{ClaimScope, NewAttempt, Store};

#[test]
fn the_pre_send_check_sees_a_cancellation_committed_after_the_claim() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    let starts = now + Duration::days(2);
    schedule(&mut store, "cita-p1", "appointment.scheduled", 1, starts, now);
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0].clone();
    let holder = Holder::Lease("w1".into());
    // A second connection, as the dispatcher's reader.
    let mut reader = Store::open(store.path()).unwrap();
    let f = reader.read(|tx| tx.presend_facts(&[c.attempt_id])).unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(moved(&f[0], &holder, now), None, "{f:?}");
    assert_eq!(
        moved(&f[0], &Holder::Lease("w2".into()), now).as_deref(),
        Some("the lease is held by w1 now")
    );

    schedule(&mut store, "cita-p1", "appointment.cancelled", 2, starts, now);
    let f = reader.read(|tx| tx.presend_facts(&[c.attempt_id, 9_999])).unwrap();
    assert_eq!(f.len(), 1, "unknown attempts are simply absent");
    let why = moved(&f[0], &holder, now).unwrap();
    assert!(why.contains("moved from v1 to v2"), "{why}");
}

#[test]
fn an_abandoned_send_is_not_sent_and_goes_straight_back_through_validity() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    let starts = now + Duration::days(2);
    schedule(&mut store, "cita-p2", "appointment.scheduled", 1, starts, now);
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0].clone();
    schedule(&mut store, "cita-p2", "appointment.cancelled", 2, starts, now);

    let f = store
        .write(|tx| {
            abandon_unsent(
                tx,
                c.attempt_id,
                &Holder::Lease("w1".into()),
                "the commitment moved from v1 to v2 after the validity check",
                &rules(),
                now,
            )
        })
        .unwrap();
    assert_eq!(f, Finished::NotSent);
    let i = store.read(|tx| tx.intention(c.intention.id)).unwrap();
    assert_eq!(i.state, IntentionState::Cancelled);
    assert_eq!(i.state_reason.as_deref(), Some("commitment_cancelled"));
    assert_eq!((i.lease_owner, i.lease_until), (None, None));
    let att = store.read(|tx| tx.attempts(c.intention.id)).unwrap();
    assert_eq!(att.len(), 1);
    assert_eq!(att[0].outcome, crate::domain::attempt::AttemptOutcome::NotSent);
    assert!(att[0].ended_at.is_some());
    assert!(!store.read(|tx| tx.acknowledged(c.intention.id)).unwrap());
    let h = store.read(|tx| tx.history(c.intention.id)).unwrap();
    let signals: Vec<&str> = h.iter().map(|r| r.signal.as_str()).collect();
    assert_eq!(signals, ["reserved", "claim", "not_sent", "cancel"], "{h:#?}");
    let cancel = h.last().unwrap();
    assert_eq!(cancel.evidence.as_deref(), Some("validity_before_send"));
    assert_eq!(cancel.commitment_version, Some(2));
}

#[test]
fn a_send_abandoned_for_a_still_valid_intention_is_due_again_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-p3",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0].clone();
    store
        .write(|tx| {
            abandon_unsent(
                tx,
                c.attempt_id,
                &Holder::Lease("w1".into()),
                "the lease ran out",
                &rules(),
                now,
            )
        })
        .unwrap();
    let i = store.read(|tx| tx.intention(c.intention.id)).unwrap();
    assert_eq!(i.state, IntentionState::Planned);
    let d = claim(&mut store, "w2", now);
    let again = claimed(&d);
    assert_eq!(again.len(), 1, "{d:?}");
    assert_eq!(again[0].attempt_n, 2);
}

#[test]
fn an_abandoned_send_that_is_no_longer_ours_only_closes_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-p4",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0].clone();
    // The lease passes (expired: the reconciler owns it now).
    store
        .write(|tx| crate::dispatch::reconcile::recovery::expire_leases(tx, now + Duration::minutes(5)))
        .unwrap();
    store
        .write(|tx| abandon_unsent(tx, c.attempt_id, &Holder::Lease("w1".into()), "late", &rules(), now))
        .unwrap();
    let i = store.read(|tx| tx.intention(c.intention.id)).unwrap();
    assert_eq!(i.state, IntentionState::Uncertain, "not ours to move");
    let att = store.read(|tx| tx.attempts(c.intention.id)).unwrap();
    assert_eq!(
        att[0].outcome,
        crate::domain::attempt::AttemptOutcome::Uncertain,
        "the closing outcome stays"
    );
    let h = store.read(|tx| tx.history(c.intention.id)).unwrap();
    let late = h.last().unwrap();
    assert_eq!(late.signal, "not_sent_late");
    assert!(
        late.note.as_deref().unwrap().contains("no longer this sender's"),
        "{late:?}"
    );
}

#[test]
fn a_not_sent_attempt_does_not_count_as_a_message_handed_over_today() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    // Same reference length → same phone (see `schedule`).
    for r in ["cita-qa", "cita-qb"] {
        schedule(&mut store, r, "appointment.scheduled", 1, now + Duration::days(2), now);
    }
    let capped = Rules {
        daily_cap: 1,
        ..rules()
    };
    let d = store
        .write(|tx| claim_batch(tx, &ClaimScope::Due, claimant("w1", &capped), 10, now))
        .unwrap();
    let first = claimed(&d)[0].clone();
    assert!(
        d.iter().any(|x| matches!(x, ClaimDecision::Deferred { .. })),
        "the cap holds the second: {d:?}"
    );
    let second = d
        .iter()
        .find_map(|x| match x {
            ClaimDecision::Deferred { id, .. } => Some(*id),
            _ => None,
        })
        .unwrap();
    store
        .write(|tx| abandon_unsent(tx, first.attempt_id, &Holder::Lease("w1".into()), "test", &capped, now))
        .unwrap();
    let verdict = store
        .read(|tx| {
            let i = tx.intention(second)?;
            evaluate(tx, &i, &capped, now)
        })
        .unwrap()
        .0;
    assert_eq!(verdict, Validity::Valid, "nothing was handed to the channel today");
}

#[test]
fn an_unvalidated_first_delivery_after_a_change_is_a_bug_never_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    let starts = now + Duration::days(2);
    schedule(&mut store, "cita-p5", "appointment.scheduled", 1, starts, now);
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0].clone();
    // The first request never reached the engine (503 before processing),
    // then the appointment moved to v2 …
    store
        .write(|tx| {
            finish_attempt(
                tx,
                c.attempt_id,
                &AttemptResult::Retry {
                    detail: "HTTP 503",
                    http_status: Some(503),
                    retry_after_secs: None,
                },
                Cause::Dispatcher,
                &retry(),
                now,
            )
        })
        .unwrap();
    schedule(
        &mut store,
        "cita-p5",
        "appointment.rescheduled",
        2,
        starts + Duration::days(1),
        now,
    );
    // … and something sends it validated against v2, bypassing validity
    // (as the old reconciler's repeat did): the engine takes it now.
    let a2 = store
        .write(|tx| {
            tx.start_attempts(&[NewAttempt {
                intention_id: c.intention.id,
                n: 2,
                worker: "w1/reconciler".into(),
                channel: "motor".into(),
                version_checked: 2,
                lease: None,
                at: now,
            }])
        })
        .unwrap()[0];
    store
        .write(|tx| {
            finish_attempt(
                tx,
                a2,
                &AttemptResult::Acknowledged {
                    evidence: Some(Signal::Accepted),
                    command_id: Some("cmd-p5"),
                    message_id: None,
                    http_status: Some(202),
                    detail: None,
                },
                Cause::Reconciler,
                &retry(),
                now,
            )
        })
        .unwrap();
    let att = store.read(|tx| tx.attempts(c.intention.id)).unwrap();
    assert_eq!(att[1].commitment_version_checked, 2, "a repeat records what it read");
    let h = store.read(|tx| tx.history(c.intention.id)).unwrap();
    assert!(
        !h.iter().any(|r| r.signal == "version_changed_in_flight"),
        "not in flight: {h:#?}"
    );
    let bug = h.iter().find(|r| r.signal == "sent_after_change").unwrap();
    assert!(
        bug.note
            .as_deref()
            .unwrap()
            .contains("attempt 2 was validated against v2"),
        "{bug:?}"
    );
}

#[test]
fn a_refused_repeat_goes_to_review_with_a_typed_reason_and_evidence_still_settles_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-p6",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0].clone();
    store
        .write(|tx| {
            finish_attempt(
                tx,
                c.attempt_id,
                &AttemptResult::Uncertain { detail: "timeout" },
                Cause::Dispatcher,
                &retry(),
                now,
            )
        })
        .unwrap();
    let moved = store
        .write(|tx| {
            let why = crate::domain::recovery::ToReview::RefusedRepeat {
                reason: ReviewReason::ChangedWhileUncertain,
                version: 2,
            };
            let note = "not repeated: the commitment was cancelled (now v2)";
            crate::dispatch::reconcile::recovery::to_review(tx, c.intention.id, why, note, now)
        })
        .unwrap();
    assert!(moved);
    let i = store.read(|tx| tx.intention(c.intention.id)).unwrap();
    assert_eq!(i.state, IntentionState::Review);
    assert_eq!(i.state_reason.as_deref(), Some("changed_while_uncertain"));
    // The engine's later report is exactly what a reviewer waits for.
    store
        .write(|tx| {
            let refs = (Some("cmd-p6"), Some("wamid.p6"));
            crate::dispatch::reconcile::recovery::evidence(
                tx,
                c.intention.id,
                Signal::Delivered,
                refs,
                "status webhook",
                now,
            )
        })
        .unwrap();
    let i = store.read(|tx| tx.intention(c.intention.id)).unwrap();
    assert_eq!(i.state, IntentionState::Delivered);
    let h = store.read(|tx| tx.history(c.intention.id)).unwrap();
    assert!(h.iter().any(|r| r.to_state == "review" && r.applied), "{h:#?}");
}
