//! Issue 25 §3, ledger-backed: for every intention of a seeded clinic
//! (every state the demo leaves, a cancelled and a confirmed appointment, a
//! request open and one declined), every role and every case action, the
//! guard's verdict read without writing (`ops::guard_facts` +
//! `domain::guard`) is what the action then does in the ledger: accepted
//! exactly when the guard says so, refused with the same rule, or refused
//! for the role. Each action is rolled back so the next one sees the same
//! case.

mod tui_support;

use chrono_tz::Tz;
use unavez::config::Role;
use unavez::domain::event::{BookingEvent, EventType};
use unavez::domain::guard::{self, CommitmentState, Facts, ResendAsk, Why};
use unavez::domain::state::IntentionState;
use unavez::ops::{self, Actor, Case, OpKind, OpOutcome, OpsError, ResendGuard, Verification, VerifyOutcome};
use unavez::planner::Planner;
use unavez::store::{IntentFilter, Tx};

use tui_support::{Fixture, clinic, now};

const ROLES: [Role; 3] = [Role::FrontDesk, Role::Supervisor, Role::Technician];
const OPS: [OpKind; 7] = [
    OpKind::Cancel,
    OpKind::Verify,
    OpKind::ManualContact,
    OpKind::AuthorizeResend,
    OpKind::RequestResend,
    OpKind::DeclineResend,
    OpKind::Resolve,
];

fn tz() -> Tz {
    chrono_tz::America::Lima
}

/// Runs `op` as `actor` on intention `id` the way the console and the CLI
/// do (no channel: a cancel is the ledger's alone).
fn act(tx: &Tx<'_>, planner: &Planner<'_>, actor: &Actor<'_>, op: OpKind, id: i64) -> Result<OpOutcome, OpsError> {
    let why = "prueba de guardas";
    let report = match op {
        OpKind::Cancel => ops::cancel(tx, actor, id, None, why, now()),
        OpKind::Verify => ops::verify(
            tx,
            actor,
            id,
            Verification::Call(VerifyOutcome::NotReceived),
            why,
            now(),
        ),
        OpKind::ManualContact => {
            let commitment = tx.intention(id)?.commitment_id;
            ops::manual_contact(tx, planner, actor, commitment, Some(id), why, now())
        }
        // The acknowledgement is typed in the confirmation, never judged
        // before it: given here.
        OpKind::AuthorizeResend => ops::authorize_resend(
            tx,
            actor,
            id,
            why,
            ResendGuard {
                acknowledge_delivered: true,
                max_per_day: 2,
            },
            tz(),
            now(),
        ),
        OpKind::RequestResend => ops::request_resend(tx, actor, id, why, 2, tz(), now()),
        OpKind::DeclineResend => ops::decline_resend(tx, actor, id, why, 2, tz(), now()),
        OpKind::Resolve => ops::resolve(tx, actor, Case::intention(id), why, now()),
        _ => unreachable!(),
    }?;
    Ok(report.outcome)
}

/// The guard's verdict and what the action did, for one case, rolled back.
fn verdict_and_outcome(fx: &mut Fixture, role: Role, op: OpKind, id: i64) -> (Facts, guard::Verdict, String) {
    let config = fx.ctx.config.clone();
    let templates = fx.ctx.templates.clone();
    let planner = Planner::new(&config.policy, &templates, tz());
    let actor = Actor { name: "guardas", role };
    let mut seen = None;
    let _ = fx.store.write(|tx| {
        let facts = ops::guard_facts(tx, role, id, 2, tz(), now())?;
        let verdict = match op {
            OpKind::Cancel => guard::cancel(&facts, false),
            _ => guard::check(op, &facts),
        };
        let did = match act(tx, &planner, &actor, op, id) {
            Ok(OpOutcome::Refused(r)) => format!("refused:{}", r.rule()),
            Ok(_) => "accepted".to_string(),
            Err(OpsError::NotAllowed { .. }) => "role".to_string(),
            Err(e) => format!("error:{e}"),
        };
        seen = Some((facts, verdict, did));
        // Roll back: the next action sees the same case.
        Err::<(), _>(OpsError::Changed)
    });
    seen.unwrap()
}

fn said(v: &guard::Verdict) -> String {
    match v {
        Ok(()) => "accepted".into(),
        Err(Why::Role) => "role".into(),
        Err(Why::Rule(r)) => format!("refused:{}", r.rule()),
    }
}

/// A cancellation of `reference` from the booking system.
fn cancel_booking(fx: &mut Fixture, reference: &str) {
    let config = fx.ctx.config.clone();
    let templates = fx.ctx.templates.clone();
    let planner = Planner::new(&config.policy, &templates, tz());
    let ev = BookingEvent {
        event_id: format!("test:cancel:{reference}"),
        kind: EventType::AppointmentCancelled,
        reference: reference.to_string(),
        starts_at: None,
        version: None,
        contact: None,
        service: None,
        location: None,
        occurred_at: Some(now().fixed_offset()),
        operator: None,
        note: None,
        raw: None,
    };
    fx.store
        .write(|tx| unavez::ingest::ingest(tx, &planner, &ev, "test", now()).map(|_| ()))
        .unwrap();
}

#[test]
fn every_guard_verdict_is_what_its_action_does() {
    let mut fx = clinic(40);
    let all = fx
        .store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                limit: 1000,
                ..Default::default()
            })
        })
        .unwrap();
    let failed: Vec<_> = all.iter().filter(|r| r.state == IntentionState::Failed).collect();
    assert!(failed.len() >= 3, "the clinic has failed messages");
    // One failed notice of a cancelled appointment, one request open, one
    // declined.
    cancel_booking(&mut fx, &failed[0].commitment_ref);
    let desk = Actor {
        name: "recepcion",
        role: Role::FrontDesk,
    };
    let boss = Actor {
        name: "supervisora",
        role: Role::Supervisor,
    };
    for r in &failed[1..3] {
        fx.store
            .write(|tx| ops::request_resend(tx, &desk, r.id, "no le llegó", 2, tz(), now()))
            .unwrap();
    }
    fx.store
        .write(|tx| ops::decline_resend(tx, &boss, failed[2].id, "ya la llamamos", 2, tz(), now()))
        .unwrap();

    let ids = fx
        .store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                limit: 1000,
                ..Default::default()
            })
        })
        .unwrap();
    let mut states = std::collections::BTreeSet::new();
    let mut commitments = std::collections::BTreeSet::new();
    let mut asks = std::collections::BTreeSet::new();
    let mut checked = 0;
    for row in &ids {
        for role in ROLES {
            for op in OPS {
                let (facts, verdict, did) = verdict_and_outcome(&mut fx, role, op, row.id);
                assert_eq!(
                    said(&verdict),
                    did,
                    "{op:?} by {role:?} on #{} {} ({:?}, {:?}, {:?})",
                    row.id,
                    row.key,
                    facts.state,
                    facts.commitment,
                    facts.ask
                );
                states.insert(facts.state.to_string());
                commitments.insert(format!("{:?}", facts.commitment));
                asks.insert(
                    match facts.ask {
                        ResendAsk::None => "none",
                        ResendAsk::Requested { .. } => "requested",
                        ResendAsk::Declined { .. } => "declined",
                    }
                    .to_string(),
                );
                checked += 1;
            }
        }
    }
    // What the walk covered, so a thinner fixture cannot pass silently.
    for s in ["planned", "failed", "review", "delivered", "read"] {
        assert!(states.contains(s), "no {s} intention in {states:?}");
    }
    for c in [
        CommitmentState::Open,
        CommitmentState::Confirmed,
        CommitmentState::Cancelled,
    ] {
        assert!(commitments.contains(&format!("{c:?}")), "{c:?} not in {commitments:?}");
    }
    assert_eq!(asks.len(), 3, "{asks:?}");
    assert!(checked > 100, "{checked}");
}
