use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::*;

const ROLES: [Role; 3] = [Role::FrontDesk, Role::Supervisor, Role::Technician];

fn asks() -> [ResendAsk; 3] {
    [
        ResendAsk::None,
        ResendAsk::Requested {
            by: "recepcion".into(),
            reason: "no le llegó".into(),
        },
        ResendAsk::Declined {
            by: "ana".into(),
            reason: "ya llamamos".into(),
        },
    ]
}

/// The family situations the resend rules tell apart, from "a resend would
/// be created" to each refusing rule.
fn families(original: IntentionState) -> Vec<ResendFacts> {
    let base = ResendFacts::single(original, 2);
    let at = Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).unwrap().fixed_offset();
    vec![
        base.clone(),
        ResendFacts {
            current_version: 2,
            ..base.clone()
        },
        ResendFacts {
            expired: true,
            ..base.clone()
        },
        ResendFacts {
            pending: Some(PendingResend {
                key: "k:reenvio:1".into(),
                authorized_by: Some("ana".into()),
                authorized_at: at,
            }),
            ..base.clone()
        },
        ResendFacts {
            authorized_today: 2,
            ..base.clone()
        },
        // As a page's row reads them (`Family::facts`): a resend pending
        // on a family that also reached the day's cap.
        Family {
            original,
            planned_version: 1,
            current_version: 1,
            expires_at: None,
            resends: vec![
                resend_member("k:reenvio:1", IntentionState::Failed, 2),
                resend_member("k:reenvio:2", IntentionState::Planned, 1),
            ],
        }
        .facts(2, lima(), now()),
    ]
}

fn lima() -> Tz {
    chrono_tz::America::Lima
}

/// 22:00 in Lima on 10 March (already the 11th in UTC).
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 11, 3, 0, 0).unwrap()
}

fn resend_member(key: &str, state: IntentionState, hours_ago: i64) -> FamilyResend {
    FamilyResend {
        key: key.into(),
        state,
        authorized_by: Some("ana".into()),
        created_at: now() - chrono::Duration::hours(hours_ago),
    }
}

/// Every combination of role × intention state × commitment state × the
/// front desk's request × family situation × kind of commitment.
fn every_case() -> Vec<Facts> {
    let mut all = Vec::new();
    for role in ROLES {
        for state in IntentionState::ALL {
            for commitment in CommitmentState::ALL {
                for ask in asks() {
                    for resend in families(state) {
                        for appointment in [true, false] {
                            all.push(Facts {
                                role,
                                state,
                                state_reason: None,
                                commitment,
                                appointment,
                                resend: resend.clone(),
                                ask: ask.clone(),
                            });
                        }
                    }
                }
            }
        }
    }
    all
}

/// The hint never names an action its guard refuses, for any role, state,
/// commitment, request or family.
#[test]
fn a_hint_names_only_actions_the_guards_accept() {
    let cases = every_case();
    assert_eq!(cases.len(), 3 * IntentionState::ALL.len() * 3 * 3 * 6 * 2);
    for f in &cases {
        let step = hint(CaseKind::Intention(f.state), f);
        for op in step.actions() {
            assert_eq!(check(*op, f), Ok(()), "{step:?} names {op:?} for {f:?}");
        }
    }
}

/// A role is refused exactly the actions it may not take, whatever the case.
#[test]
fn a_role_refusal_is_the_role_table() {
    for f in every_case() {
        for op in OpKind::ALL {
            let v = check(op, &f);
            assert_eq!(v == Err(Why::Role), !allowed(f.role, op), "{op:?} {f:?}: {v:?}");
        }
    }
}

/// The front desk is never told to resend, and asks for one exactly when a
/// supervisor's resend would be accepted (and it has not asked already).
#[test]
fn the_front_desk_asks_for_what_a_supervisor_could_do() {
    for f in every_case().into_iter().filter(|f| f.role == Role::FrontDesk) {
        let step = hint(CaseKind::Intention(f.state), &f);
        assert_ne!(step, NextStep::Resend, "{f:?}");
        let sup = Facts {
            role: Role::Supervisor,
            ..f.clone()
        };
        let requested = matches!(f.ask, ResendAsk::Requested { .. });
        assert_eq!(
            request_resend(&f).is_ok(),
            !requested && authorize_resend(&sup).is_ok(),
            "{f:?}"
        );
    }
}

/// The words of the issue: a failed notice of a cancelled appointment says
/// to call about the cancellation, a confirmed appointment is not chased,
/// an uncertain outcome waits for the channel, a request is answered by a
/// supervisor.
#[test]
fn the_hint_follows_the_commitment_and_the_request() {
    for f in every_case() {
        let step = hint(CaseKind::Intention(f.state), &f);
        let waiting = matches!(f.state, IntentionState::Dispatching | IntentionState::Uncertain);
        let requested = matches!(f.ask, ResendAsk::Requested { .. });
        let want = if waiting {
            Some(NextStep::WaitForChannel)
        } else if requested {
            Some(match f.role {
                Role::Supervisor if authorize_resend(&f).is_ok() => NextStep::AnswerRequest,
                Role::Supervisor => NextStep::DeclineRequest,
                _ => NextStep::WaitForSupervisor,
            })
        } else if f.commitment == CommitmentState::Cancelled {
            Some(NextStep::CallAboutCancellation)
        } else if f.commitment == CommitmentState::Confirmed {
            Some(NextStep::AlreadyConfirmed)
        } else {
            None
        };
        if let Some(want) = want {
            assert_eq!(step, want, "{f:?}");
        }
        // "Reenviar" only where a resend would be accepted.
        if step == NextStep::Resend {
            assert_eq!(authorize_resend(&f), Ok(()));
        }
    }
}

/// A failed message of a standing appointment: the supervisor resends when
/// the rules allow it, else calls; the front desk asks, else calls; the
/// technician verifies.
#[test]
fn a_failed_message_by_role() {
    let f = |role, resend: ResendFacts, ask: ResendAsk| Facts {
        role,
        state: IntentionState::Failed,
        state_reason: None,
        commitment: CommitmentState::Open,
        appointment: true,
        resend,
        ask,
    };
    let ok = ResendFacts::single(IntentionState::Failed, 2);
    let capped = ResendFacts {
        authorized_today: 2,
        ..ok.clone()
    };
    let step = |x: &Facts| hint(CaseKind::Intention(x.state), x);
    assert_eq!(
        step(&f(Role::Supervisor, ok.clone(), ResendAsk::None)),
        NextStep::Resend
    );
    assert_eq!(
        step(&f(Role::Supervisor, capped.clone(), ResendAsk::None)),
        NextStep::Call
    );
    assert_eq!(
        step(&f(Role::FrontDesk, ok.clone(), ResendAsk::None)),
        NextStep::RequestResend
    );
    assert_eq!(step(&f(Role::FrontDesk, capped, ResendAsk::None)), NextStep::Call);
    let declined = ResendAsk::Declined {
        by: "ana".into(),
        reason: "no".into(),
    };
    assert_eq!(step(&f(Role::FrontDesk, ok.clone(), declined)), NextStep::Call);
    assert_eq!(step(&f(Role::Technician, ok, ResendAsk::None)), NextStep::Verify);
}

/// A cancel closes what has not left, refuses the rest by what holds it,
/// and an accepted message only with the channel's withdrawal.
#[test]
fn cancel_by_state() {
    use IntentionState as S;
    for state in S::ALL {
        let f = Facts {
            role: Role::FrontDesk,
            state,
            state_reason: None,
            commitment: CommitmentState::Open,
            appointment: true,
            resend: ResendFacts::single(state, 2),
            ask: ResendAsk::None,
        };
        let plain = cancel(&f, false);
        assert_eq!(plain.is_ok(), matches!(state, S::Planned | S::Review), "{state}");
        assert_eq!(
            cancel(&f, true).is_ok(),
            matches!(state, S::Planned | S::Review | S::Accepted),
            "{state}"
        );
        if let Err(Why::Rule(r)) = plain {
            assert_eq!(r, cancel_refusal(state, None));
        }
    }
}

/// A message the channel took and never confirmed delivering (a Cloud API
/// case after `status_poll_minutes`): whoever may verify is told to call
/// and check that it arrived.
#[test]
fn an_unconfirmed_message_is_a_call_to_confirm_delivery() {
    for f in every_case() {
        let unconfirmed = matches!(f.state, IntentionState::Accepted | IntentionState::Sent);
        let quiet = matches!(f.ask, ResendAsk::None) && f.commitment == CommitmentState::Open;
        if unconfirmed && quiet && check(OpKind::Verify, &f).is_ok() {
            assert_eq!(
                hint(CaseKind::Intention(f.state), &f),
                NextStep::ConfirmDelivery,
                "{f:?}"
            );
        }
    }
}

/// A family's facts, as the action and a page's hints both derive them:
/// the first resend still waiting is pending, and only resends authorized
/// in the clinic's operating day of `now` count toward the cap (Lima's
/// day, not UTC's).
#[test]
fn a_familys_facts_count_the_clinics_day() {
    let family = |resends| Family {
        original: IntentionState::Failed,
        planned_version: 1,
        current_version: 1,
        expires_at: None,
        resends,
    };
    // 23:00 on the 9th (another day), 01:00 and 21:00 on the 10th.
    let capped = family(vec![
        resend_member("k:reenvio:1", IntentionState::Failed, 23),
        resend_member("k:reenvio:2", IntentionState::Cancelled, 21),
        resend_member("k:reenvio:3", IntentionState::Read, 1),
    ]);
    let f = capped.facts(2, lima(), now());
    assert_eq!((f.authorized_today, f.pending.as_ref()), (2, None));
    assert_eq!(resend_refusal(&f, false).map(|r| r.rule()), Some("daily_cap"));
    // In UTC the day began at 19:00 Lima: only the latest counts.
    assert_eq!(capped.facts(2, Tz::UTC, now()).authorized_today, 1);
    assert_eq!(capped.facts(3, lima(), now()).max_per_day, 3);
    assert_eq!(resend_refusal(&capped.facts(3, lima(), now()), false), None);

    for waiting in [
        IntentionState::Planned,
        IntentionState::Dispatching,
        IntentionState::Uncertain,
    ] {
        let f = family(vec![
            resend_member("k:reenvio:1", IntentionState::Failed, 2),
            resend_member("k:reenvio:2", waiting, 1),
        ])
        .facts(5, lima(), now());
        let p = f.pending.clone().expect("pending");
        assert_eq!(p.key, "k:reenvio:2");
        assert_eq!(
            p.authorized_at,
            (now() - chrono::Duration::hours(1))
                .with_timezone(&lima())
                .fixed_offset()
        );
        assert_eq!(resend_refusal(&f, false).map(|r| r.rule()), Some("resend_pending"));
    }
    let expired = Family {
        expires_at: Some(now()),
        ..family(Vec::new())
    };
    assert!(expired.facts(2, lima(), now()).expired);
    assert_eq!(
        family(Vec::new()).facts(2, lima(), now()),
        ResendFacts::single(IntentionState::Failed, 2)
    );
}

/// Every channel answer on every state: only an accepted message reads
/// the answer; the rest is decided by the ledger alone.
#[test]
fn cancel_decision_by_state_and_channel_answer() {
    use IntentionState as S;
    let answers = [
        None,
        Some(Withdrawal::Withdrawn),
        Some(Withdrawal::Kept),
        Some(Withdrawal::Unreachable { detail: "503".into() }),
    ];
    for state in S::ALL {
        for a in &answers {
            let d = cancel_decision(state, Some("why"), a.as_ref());
            match (state, a) {
                (S::Planned | S::Review, _) => assert_eq!(d, Ok(CancelReason::Operator), "{state} {a:?}"),
                (S::Accepted, Some(Withdrawal::Withdrawn)) => assert_eq!(d, Ok(CancelReason::Withdrawn)),
                (S::Accepted, Some(Withdrawal::Unreachable { detail })) => {
                    assert_eq!(d, Err(Refusal::ChannelUnavailable { detail: detail.clone() }))
                }
                _ => assert_eq!(d, Err(cancel_refusal(state, Some("why"))), "{state} {a:?}"),
            }
        }
    }
}

#[test]
fn a_resend_after_a_delivery_needs_the_acknowledgement() {
    use IntentionState as S;
    for state in S::ALL {
        assert_eq!(
            has_reached(state, false, false),
            matches!(state, S::Delivered | S::Read),
            "{state}"
        );
        assert!(has_reached(state, true, false) && has_reached(state, false, true));
    }
    let last = Some(("k:reenvio:1", S::Read));
    assert_eq!(
        acknowledgement_refusal(last, false),
        Some(Refusal::AcknowledgeDelivery {
            key: "k:reenvio:1".into(),
            state: S::Read
        })
    );
    assert_eq!(acknowledgement_refusal(last, true), None);
    assert_eq!(acknowledgement_refusal(None, false), None);
    // A rule refuses before the acknowledgement is asked for.
    assert_eq!(
        authorization_refusal(Some(Refusal::InFlight), last, false),
        Some(Refusal::InFlight)
    );
    assert_eq!(
        authorization_refusal(None, last, false),
        acknowledgement_refusal(last, false)
    );
}
