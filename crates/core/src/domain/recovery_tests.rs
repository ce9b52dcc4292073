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

#[test]
fn an_orphaned_attempt_is_closed_with_what_the_intention_knows() {
    let now = Utc::now();
    let orphan = |attempt_id, state| OrphanFacts {
        attempt_id,
        intention_id: attempt_id * 10,
        state,
    };
    for state in IntentionState::ALL {
        let w = close_orphans(&[orphan(7, state)], now);
        let (id, outcome, detail) = ended(&w[0]);
        assert_eq!(id, 7);
        let want = match state {
            IntentionState::Accepted | IntentionState::Sent | IntentionState::Delivered | IntentionState::Read => {
                AttemptOutcome::Accepted
            }
            _ => AttemptOutcome::Uncertain,
        };
        assert_eq!(outcome, want, "{state}");
        let detail = detail.unwrap();
        assert!(detail.starts_with("closed by recovery"), "{detail}");
        assert!(detail.contains(state.as_str()), "{detail}");
        // Never a claim that it was not sent, never a retry.
        assert!(outcome.may_have_reached_channel());
    }
    assert!(close_orphans(&[], now).is_empty());
    assert_eq!(
        close_orphans(
            &[orphan(1, IntentionState::Sent), orphan(2, IntentionState::Review)],
            now
        )
        .len(),
        2
    );
}

#[test]
fn the_status_poll_asks_quiet_acknowledged_messages_within_the_horizon() {
    let now = Utc::now();
    let poll = StatusPoll {
        window: Duration::minutes(30),
    };
    let m = Duration::minutes;
    for state in IntentionState::ALL {
        let asked = poll.wants(state, now - m(31), now - m(60), now);
        let want = matches!(
            state,
            IntentionState::Accepted | IntentionState::Sent | IntentionState::Delivered
        );
        assert_eq!(asked, want, "{state}");
    }
    let s = IntentionState::Accepted;
    // News within the window: not yet.
    assert!(!poll.wants(s, now - m(29), now - m(60), now));
    assert!(poll.wants(s, now - m(30), now - m(60), now));
    // Due longer ago than the horizon: no longer asked.
    assert!(!poll.wants(s, now - m(31), now - StatusPoll::HORIZON - m(1), now));
    assert!(poll.wants(s, now - m(31), now - StatusPoll::HORIZON, now));
    assert_eq!(poll.quiet_since(now), now - m(30));
    // Looked for every quarter window, between a second and a minute.
    assert_eq!(poll.pass_every(), m(1));
    let every = |window| StatusPoll { window }.pass_every();
    assert_eq!(every(Duration::zero()), Duration::seconds(1));
    assert_eq!(every(m(2)), Duration::seconds(30));
    assert_eq!(every(Duration::days(300)), m(1));
}

#[test]
fn the_next_poll_backs_off_with_the_silence() {
    let now = Utc::now();
    let poll = StatusPoll {
        window: Duration::minutes(30),
    };
    // Quiet for 31 minutes: again in 31 minutes (a window at least).
    assert_eq!(poll.next(now - Duration::minutes(31), now), now + Duration::minutes(31));
    assert_eq!(poll.next(now - Duration::minutes(2), now), now + Duration::minutes(30));
    assert_eq!(poll.next(now - Duration::hours(5), now), now + Duration::hours(5));
    // A window of zero still spaces the polls; a change "in the future"
    // (another host's clock) counts as no silence.
    let eager = StatusPoll {
        window: Duration::zero(),
    };
    assert_eq!(eager.next(now, now), now + StatusPoll::MIN_SPACING);
    assert_eq!(
        eager.next(now + Duration::minutes(1), now),
        now + StatusPoll::MIN_SPACING
    );
    // Over the horizon a message is asked about a handful of times.
    let (mut t, mut polls) = (now + Duration::minutes(30), 0);
    while t <= now + StatusPoll::HORIZON {
        polls += 1;
        let next = poll.next(now, t);
        assert!(next > t);
        t = next;
    }
    assert_eq!(polls, 7);
}

#[test]
fn a_poll_answer_is_written_only_when_it_moves_the_intention() {
    let now = Utc::now();
    let poll = |state, signal| poll_evidence(1, state, signal, Some("cmd_1"), "status poll", now);
    let r = poll(IntentionState::Accepted, Signal::Delivered).unwrap();
    assert_eq!(
        (r.from, r.to, r.applied),
        (Some(IntentionState::Accepted), IntentionState::Delivered, true)
    );
    assert_eq!(
        (r.said.cause, r.said.evidence.as_deref()),
        (Cause::Reconciler, Some("cmd_1"))
    );
    // The same or a lower rank: no news, nothing written.
    assert!(poll(IntentionState::Sent, Signal::Sent).is_none());
    assert!(poll(IntentionState::Delivered, Signal::Accepted).is_none());
    // A failure after delivery does not override it.
    assert!(poll(IntentionState::Delivered, Signal::Failed).is_none());
    assert_eq!(
        poll(IntentionState::Accepted, Signal::Failed).unwrap().to,
        IntentionState::Failed
    );
    assert_eq!(
        poll(IntentionState::Accepted, Signal::Cancel(CancelReason::Withdrawn))
            .unwrap()
            .to,
        IntentionState::Cancelled
    );
}
