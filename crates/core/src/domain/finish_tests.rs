//! Every result in every state: what finishing decides.

use chrono::{Duration, TimeZone, Utc};

use super::*;
use crate::domain::attempt::Backoff;
use crate::domain::state::CancelReason;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

fn facts(state: IntentionState) -> FinishFacts {
    FinishFacts {
        attempt_id: 11,
        intention_id: 7,
        n: 1,
        version_checked: 1,
        attempt_ended: false,
        state,
        attempt_count: 1,
        unsent: 0,
        intention_version: 1,
        current_version: 1,
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 2,
        backoff: Backoff::new(vec![5, 60]),
    }
}

fn results() -> Vec<AttemptResult<'static>> {
    let ack = |evidence| AttemptResult::Acknowledged {
        evidence,
        command_id: Some("cmd-1"),
        message_id: None,
        http_status: Some(202),
        detail: None,
    };
    vec![
        ack(Some(Signal::Accepted)),
        ack(Some(Signal::Sent)),
        ack(Some(Signal::Delivered)),
        ack(Some(Signal::Read)),
        ack(Some(Signal::Failed)),
        ack(Some(Signal::Cancel(CancelReason::Withdrawn))),
        ack(None),
        AttemptResult::Failed {
            code: "E1",
            detail: "bad number",
            http_status: Some(400),
        },
        AttemptResult::Retry {
            detail: "503",
            http_status: Some(503),
            retry_after_secs: None,
        },
        AttemptResult::Uncertain { detail: "timeout" },
        AttemptResult::Conflict {
            detail: "key reused",
            http_status: Some(409),
        },
        AttemptResult::ChannelDown {
            fault: crate::domain::fault::ChannelFault::CredentialRejected,
            detail: "HTTP 401 no_autorizado",
            http_status: Some(401),
        },
    ]
}

#[test]
fn every_result_in_every_state_moves_only_where_the_machine_allows() {
    for state in IntentionState::ALL {
        for r in results() {
            let p = decide(&facts(state), &r, Cause::Dispatcher, &policy(), now());
            let moved = p.record.as_ref().is_some_and(|r| r.applied);
            let late = p.finished == Finished::Late;
            assert_eq!(moved, !late, "{state} + {r:?}: {p:?}");
            assert_eq!(
                p.state_after,
                p.record.as_ref().filter(|r| r.applied).map_or(state, |r| r.to)
            );
            if let Some(rec) = &p.record {
                assert_eq!(rec.from, Some(state));
                assert_eq!(rec.intention_id, 7);
                assert_eq!(
                    rec.said.commitment_version,
                    Some(1),
                    "rows speak of the version checked"
                );
                assert_eq!(rec.said.cause, Cause::Dispatcher);
            }
            assert_eq!(p.next_attempt_at.is_some(), p.finished == Finished::Retry);
            assert!(!p.version_moved);
        }
    }
}

#[test]
fn from_dispatching_each_result_lands_where_its_evidence_says() {
    let expect = [
        (Finished::Accepted, IntentionState::Accepted, HistorySignal::Accepted),
        (Finished::Sent, IntentionState::Sent, HistorySignal::Sent),
        (Finished::Delivered, IntentionState::Delivered, HistorySignal::Delivered),
        (Finished::Read, IntentionState::Read, HistorySignal::Read),
        (Finished::Failed, IntentionState::Failed, HistorySignal::Failed),
        (Finished::Withdrawn, IntentionState::Cancelled, HistorySignal::Cancel),
        (Finished::Uncertain, IntentionState::Uncertain, HistorySignal::Ambiguous),
        (Finished::Failed, IntentionState::Failed, HistorySignal::Failed),
        (Finished::Retry, IntentionState::Planned, HistorySignal::Release),
        (
            Finished::Uncertain,
            IntentionState::Uncertain,
            HistorySignal::UnknownOutcome,
        ),
        (Finished::Review, IntentionState::Review, HistorySignal::NeedsReview),
        (Finished::NotSent, IntentionState::Planned, HistorySignal::NotSent),
    ];
    for (r, (finished, state, signal)) in results().iter().zip(expect) {
        let p = decide(
            &facts(IntentionState::Dispatching),
            r,
            Cause::Dispatcher,
            &policy(),
            now(),
        );
        assert_eq!((p.finished, p.state_after), (finished, state), "{r:?}");
        let rec = p.record.unwrap();
        let want = if matches!(r, AttemptResult::Conflict { .. }) {
            HistorySignal::Conflict
        } else {
            signal
        };
        assert_eq!(rec.said.signal, want, "{r:?}");
    }
}

#[test]
fn the_attempt_row_keeps_what_the_channel_said() {
    let r = AttemptResult::Failed {
        code: "E1",
        detail: "bad number",
        http_status: Some(400),
    };
    let p = decide(
        &facts(IntentionState::Dispatching),
        &r,
        Cause::Dispatcher,
        &policy(),
        now(),
    );
    assert_eq!(
        p.attempt,
        AttemptWrite::End {
            attempt_id: 11,
            outcome: AttemptOutcome::Failed,
            http_status: Some(400),
            command_id: None,
            message_id: None,
            error_code: Some("E1".into()),
            error_detail: Some("bad number".into()),
            at: now(),
        }
    );
    assert_eq!(p.refs, None);
    let rec = p.record.unwrap();
    assert_eq!(rec.said.note.as_deref(), Some("E1: bad number"));
    assert_eq!(
        rec.said.evidence.as_deref(),
        Some("attempt 1"),
        "no reference: the attempt is the evidence"
    );
    // An acknowledgement's references are the evidence and go on the intention.
    let ack = AttemptResult::Acknowledged {
        evidence: Some(Signal::Accepted),
        command_id: None,
        message_id: Some("wamid.1"),
        http_status: Some(200),
        detail: Some("ok"),
    };
    let p = decide(
        &facts(IntentionState::Dispatching),
        &ack,
        Cause::Reconciler,
        &policy(),
        now(),
    );
    assert_eq!(p.refs, Some((None, Some("wamid.1".into()))));
    let rec = p.record.unwrap();
    assert_eq!(
        (rec.said.evidence.as_deref(), rec.said.note.as_deref()),
        (Some("wamid.1"), Some("ok"))
    );
    assert_eq!(rec.said.cause, Cause::Reconciler);
}

#[test]
fn a_closed_attempt_keeps_its_outcome_and_the_late_answer_is_noted() {
    let f = FinishFacts {
        attempt_ended: true,
        ..facts(IntentionState::Uncertain)
    };
    let ack = &results()[0];
    let p = decide(&f, ack, Cause::Dispatcher, &policy(), now());
    assert_eq!(
        p.attempt,
        AttemptWrite::LateAnswer {
            attempt_id: 11,
            http_status: Some(202),
            command_id: Some("cmd-1".into()),
            message_id: None,
            note: "late answer: accepted".into(),
        }
    );
    // The evidence still applies: accepted is above uncertain.
    assert_eq!(p.finished, Finished::Accepted);
}

#[test]
fn a_retry_backs_off_honours_retry_after_then_goes_to_review() {
    let retry = |after| AttemptResult::Retry {
        detail: "503",
        http_status: Some(503),
        retry_after_secs: after,
    };
    let p = decide(
        &facts(IntentionState::Dispatching),
        &retry(None),
        Cause::Dispatcher,
        &policy(),
        now(),
    );
    assert_eq!(
        (p.finished, p.next_attempt_at),
        (Finished::Retry, Some(now() + Duration::seconds(5)))
    );
    assert!(
        p.record
            .unwrap()
            .said
            .note
            .unwrap()
            .starts_with("503; next try at 2026-11-29T15:00:05")
    );
    let p = decide(
        &facts(IntentionState::Dispatching),
        &retry(Some(30)),
        Cause::Dispatcher,
        &policy(),
        now(),
    );
    assert_eq!(p.next_attempt_at, Some(now() + Duration::seconds(30)));
    let exhausted = FinishFacts {
        attempt_count: 2,
        ..facts(IntentionState::Dispatching)
    };
    let p = decide(&exhausted, &retry(None), Cause::Dispatcher, &policy(), now());
    assert_eq!(
        (p.finished, p.state_after, p.next_attempt_at),
        (Finished::Review, IntentionState::Review, None)
    );
    assert_eq!(
        p.record.unwrap().said.note.as_deref(),
        Some("2 attempt(s) exhausted; last: 503")
    );
    // Not ours to re-plan: recorded, nothing moves.
    let p = decide(
        &facts(IntentionState::Uncertain),
        &retry(None),
        Cause::Reconciler,
        &policy(),
        now(),
    );
    assert_eq!((p.finished, p.state_after), (Finished::Late, IntentionState::Uncertain));
    let rec = p.record.unwrap();
    assert_eq!((rec.said.signal, rec.applied), (HistorySignal::Retry, false));
    assert_eq!(rec.said.note.as_deref(), Some("retry answer while uncertain: 503"));
}

#[test]
fn a_version_that_moved_is_flagged_for_the_sequence_check() {
    for (checked, speaks, current, moved) in [(1, 1, 1, false), (1, 1, 2, true), (2, 1, 2, true), (2, 2, 2, false)] {
        let f = FinishFacts {
            version_checked: checked,
            intention_version: speaks,
            current_version: current,
            ..facts(IntentionState::Dispatching)
        };
        assert_eq!(
            decide(&f, &results()[0], Cause::Dispatcher, &policy(), now()).version_moved,
            moved
        );
    }
}

fn sequence() -> SequenceFacts {
    SequenceFacts {
        intention_id: 7,
        key: "cita-1:aviso-reserva:v1".into(),
        state: IntentionState::Accepted,
        intention_version: 1,
        appointment: true,
        current_version: 2,
        producer: Some((1, 1)),
        notice: Some(("cita-1:aviso-cambio:v2".into(), IntentionState::Planned)),
    }
}

#[test]
fn a_change_in_flight_is_recorded_with_both_versions_and_the_notice() {
    let r = version_sequence(&sequence(), now()).unwrap();
    assert_eq!(
        (r.said.signal, r.applied, r.to),
        (HistorySignal::VersionChangedInFlight, false, IntentionState::Accepted)
    );
    assert_eq!(r.said.evidence.as_deref(), Some("cita-1:aviso-cambio:v2"));
    assert_eq!(r.said.commitment_version, Some(2));
    let note = r.said.note.unwrap();
    assert!(
        note.contains("checked v1, now v2") && note.contains("update notice cita-1:aviso-cambio:v2 is planned"),
        "{note}"
    );
    let r = version_sequence(
        &SequenceFacts {
            notice: None,
            ..sequence()
        },
        now(),
    )
    .unwrap();
    assert!(r.said.note.unwrap().contains("a person should check"));
    assert_eq!(r.said.evidence, None);
}

#[test]
fn a_message_validated_against_the_new_version_is_a_bug_never_in_flight() {
    let bug = SequenceFacts {
        producer: Some((1, 2)),
        ..sequence()
    };
    let r = version_sequence(&bug, now()).unwrap();
    assert_eq!(r.said.signal, HistorySignal::SentAfterChange);
    assert_eq!(r.said.evidence.as_deref(), Some("attempt 1"));
    // Orders, and messages of the current version, are not bugs.
    assert_eq!(
        version_sequence(
            &SequenceFacts {
                appointment: false,
                ..bug.clone()
            },
            now()
        ),
        None
    );
    assert_eq!(
        version_sequence(
            &SequenceFacts {
                intention_version: 2,
                ..bug
            },
            now()
        ),
        None
    );
    // Nothing reached the channel: nothing to say.
    assert_eq!(
        version_sequence(
            &SequenceFacts {
                producer: None,
                ..sequence()
            },
            now()
        ),
        None
    );
}

#[test]
fn a_channel_that_refuses_us_leaves_the_message_planned_and_due_and_counts_no_attempt() {
    use crate::domain::fault::ChannelFault;
    let down = AttemptResult::ChannelDown {
        fault: ChannelFault::CredentialRejected,
        detail: "HTTP 401 Unauthorized: no_autorizado",
        http_status: Some(401),
    };
    // Attempts exhausted by the policy's count: still planned, never review
    // and never failed: the message was never looked at.
    let f = FinishFacts {
        attempt_count: 9,
        ..facts(IntentionState::Dispatching)
    };
    let p = decide(&f, &down, Cause::Dispatcher, &policy(), now());
    assert_eq!(
        (p.finished, p.state_after),
        (Finished::NotSent, IntentionState::Planned)
    );
    assert_eq!(p.next_attempt_at, None, "the paused channel holds it, not a backoff");
    let AttemptWrite::End {
        outcome, error_code, ..
    } = &p.attempt
    else {
        panic!("{:?}", p.attempt)
    };
    assert_eq!(
        (*outcome, error_code.as_deref()),
        (AttemptOutcome::NotSent, Some("credential_rejected"))
    );
    let rec = p.record.unwrap();
    assert_eq!(rec.said.signal, HistorySignal::NotSent);
    assert!(
        rec.said.note.as_deref().unwrap().contains("credential_rejected"),
        "{rec:?}"
    );
    // A reconciliation repeat of an uncertain one: noted, stays uncertain.
    let p = decide(
        &facts(IntentionState::Uncertain),
        &down,
        Cause::Reconciler,
        &policy(),
        now(),
    );
    assert_eq!((p.finished, p.state_after), (Finished::Late, IntentionState::Uncertain));
    assert!(!p.record.unwrap().applied);
}

#[test]
fn attempts_that_never_reached_the_channel_do_not_count_against_the_limit() {
    let retry = AttemptResult::Retry {
        detail: "503",
        http_status: Some(503),
        retry_after_secs: None,
    };
    // Two attempts, one of them refused by a paused channel: one real try
    // of two allowed, so it retries after the first backoff.
    let f = FinishFacts {
        attempt_count: 2,
        unsent: 1,
        ..facts(IntentionState::Dispatching)
    };
    let p = decide(&f, &retry, Cause::Dispatcher, &policy(), now());
    assert_eq!(p.finished, Finished::Retry);
    assert_eq!(p.next_attempt_at, Some(now() + Duration::seconds(5)));
    let f = FinishFacts { unsent: 0, ..f };
    assert_eq!(
        decide(&f, &retry, Cause::Dispatcher, &policy(), now()).finished,
        Finished::Review
    );
}
