//! Issue 25 §3, ledger-backed: for every intention of a seeded clinic
//! (every state the demo leaves, a cancelled and a confirmed appointment, a
//! request open and one declined, a family with a resend still pending and
//! one that reached the day's cap), every role and every case action, the
//! guard's verdict read without writing (`ops::guard_facts` +
//! `domain::guard`) is what the action then does in the ledger: accepted
//! exactly when the guard says so, refused with the same rule, or refused
//! for the role. Each action is rolled back so the next one sees the same
//! case.

mod tui_support;

use chrono_tz::Tz;
use unavez::config::Role;
use unavez::domain::attention::NextStep;
use unavez::domain::event::{BookingEvent, EventType};
use unavez::domain::guard::{self, CommitmentState, Facts, ResendAsk, Why};
use unavez::domain::state::IntentionState;
use unavez::ops::{self, Actor, Ask, Case, OpKind, OpOutcome, OpsError, ResendGuard, Verification, VerifyOutcome};
use unavez::planner::Planner;
use unavez::store::{AttentionQuery, IntentFilter, RowKind, Tx};
use unavez::tui::app::guard as rows;

use tui_support::{Fixture, clinic, now, render};

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
        OpKind::RequestResend => ops::ask_resend(tx, actor, Ask::Request, id, why, 2, tz(), now()),
        OpKind::DeclineResend => ops::ask_resend(tx, actor, Ask::Decline, id, why, 2, tz(), now()),
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

/// The failed messages of standing, unconfirmed appointments: a
/// supervisor could resend each of them now.
fn resendable(fx: &mut Fixture) -> Vec<i64> {
    let all = fx
        .store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                limit: 1000,
                ..Default::default()
            })
        })
        .unwrap();
    all.iter()
        .filter(|r| r.state == IntentionState::Failed)
        .map(|r| r.id)
        .filter(|id| {
            let f = fx
                .store
                .read(|tx| ops::guard_facts(tx, Role::Supervisor, *id, 2, tz(), now()))
                .unwrap();
            f.commitment == CommitmentState::Open && guard::authorize_resend(&f).is_ok()
        })
        .collect()
}

const BOSS: Actor<'static> = Actor {
    name: "supervisora",
    role: Role::Supervisor,
};

/// A resend of `id`, authorized now; its id.
fn resend(fx: &mut Fixture, id: i64) -> i64 {
    let guard = ResendGuard {
        acknowledge_delivered: true,
        max_per_day: 2,
    };
    let report = fx
        .store
        .write(|tx| ops::authorize_resend(tx, &BOSS, id, "no le llegó", guard, tz(), now()))
        .unwrap();
    match report.outcome {
        OpOutcome::Done {
            new_intention: Some((new, _)),
            ..
        } => new,
        other => panic!("resend of #{id}: {other:?}"),
    }
}

/// Gives `pending` a resend still waiting to leave, and `capped` the
/// day's cap (two resends authorized today, both cancelled before they
/// left: none pending), then reopens both (authorizing marked them
/// handled): open cases whose resend the guard refuses.
fn pending_and_capped(fx: &mut Fixture, pending: i64, capped: i64) {
    resend(fx, pending);
    for _ in 0..2 {
        let new = resend(fx, capped);
        fx.store
            .write(|tx| ops::cancel(tx, &BOSS, new, None, "la cita se confirmó por teléfono", now()))
            .unwrap();
    }
    for id in [pending, capped] {
        fx.store
            .write(|tx| ops::reopen(tx, &BOSS, Case::intention(id), "sigue sin llegarle", now()))
            .unwrap();
    }
}

#[test]
fn every_guard_verdict_is_what_its_action_does() {
    // Enough appointments for five failed messages a supervisor could
    // resend: three for the commitment and request cases, two families.
    let mut fx = clinic(70);
    let ok = resendable(&mut fx);
    assert!(ok.len() >= 5, "{ok:?}");
    pending_and_capped(&mut fx, ok[3], ok[4]);
    let all = fx
        .store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                limit: 1000,
                ..Default::default()
            })
        })
        .unwrap();
    let failed: Vec<_> = all.iter().filter(|r| ok[..3].contains(&r.id)).collect();
    assert_eq!(failed.len(), 3, "the clinic has failed messages");
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
            .write(|tx| ops::ask_resend(tx, &desk, Ask::Request, r.id, "no le llegó", 2, tz(), now()))
            .unwrap();
    }
    fx.store
        .write(|tx| ops::ask_resend(tx, &boss, Ask::Decline, failed[2].id, "ya la llamamos", 2, tz(), now()))
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
    let mut families = std::collections::BTreeSet::new();
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
                if facts.resend.pending.is_some() {
                    families.insert("pending");
                }
                if facts.resend.authorized_today >= facts.resend.max_per_day {
                    families.insert("capped");
                }
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
    assert_eq!(families.len(), 2, "{families:?}");
    assert!(checked > 100, "{checked}");
}

/// Issue 25 §3, the page's side: each Atención row carries the facts the
/// action's guard reads (`ops::guard_facts`), its resend family included,
/// so a row whose family has a resend pending or reached the day's cap
/// never says "reenviar" nor "pedir reenvío", on the list, the call list
/// or the patient card.
#[test]
fn a_row_reads_its_family_as_the_resend_guard_does() {
    let mut fx = clinic(40);
    let ok = resendable(&mut fx);
    let (pending, capped) = (ok[0], ok[1]);
    pending_and_capped(&mut fx, pending, capped);
    let query = AttentionQuery {
        rule: fx.ctx.config.attention_rule(),
        limit: 500,
        ..AttentionQuery::new(now())
    };
    let page = fx.store.read(|tx| tx.attention(&query)).unwrap();
    let cx = rows::ResendCtx {
        max_per_day: 2,
        tz: tz(),
        now: now(),
    };
    let mut seen = 0;
    for row in page.rows.iter().filter(|r| r.kind == RowKind::Intention) {
        let id = row.intention_id.unwrap();
        for role in ROLES {
            let from_row = rows::row_facts(role, row, cx);
            let from_ledger = fx
                .store
                .read(|tx| ops::guard_facts(tx, role, id, 2, tz(), now()))
                .unwrap();
            assert_eq!(from_row, from_ledger, "#{id} {:?} as {role:?}", row.key);
        }
        if [pending, capped].contains(&id) {
            seen += 1;
            let boss = rows::row_facts(Role::Supervisor, row, cx);
            let desk = rows::row_facts(Role::FrontDesk, row, cx);
            if id == pending {
                assert!(boss.resend.pending.is_some(), "{boss:?}");
            } else {
                assert_eq!(boss.resend.authorized_today, 2, "{boss:?}");
            }
            assert_eq!(guard::hint(rows::case_kind(row), &boss), NextStep::Call);
            assert_eq!(guard::hint(rows::case_kind(row), &desk), NextStep::Call);
        }
    }
    assert_eq!(seen, 2, "both cases are open rows");

    // What each role reads on the screen.
    let reference = |id: i64| {
        page.rows
            .iter()
            .find(|r| r.intention_id == Some(id))
            .unwrap()
            .commitment_ref
            .clone()
    };
    for (role, operator, never) in [
        (Role::Supervisor, "supervisora", "reenviar"),
        (Role::FrontDesk, "recepcion", "pedir reenvío"),
    ] {
        let mut app = fx.loaded(role, operator);
        for id in [pending, capped] {
            let reference = reference(id);
            let line = render(&app, 139, 60)
                .lines()
                .find(|l| l.contains(&format!("{reference} ")))
                .unwrap_or_default()
                .to_string();
            assert!(line.contains("llamar"), "{role:?} #{id}: {line}");
            assert!(!line.contains(never), "{role:?} #{id}: {line}");
        }
        // The call list keeps them: a call is their next step.
        fx.act(&mut app, unavez::tui::keys::Action::CallList);
        let listed: Vec<_> = app.attention.rows.iter().filter_map(|r| r.intention_id).collect();
        assert!(listed.contains(&pending) && listed.contains(&capped), "{listed:?}");
    }

    // The patient card of the capped case: the resend key is dimmed with
    // why, for the message the guard refuses.
    let mut app = fx.loaded(Role::Supervisor, "supervisora");
    let reference_capped = reference(capped);
    fx.command(&mut app, &format!("paciente {reference_capped}"));
    let messages = app.patient.messages();
    let card = app.patient.card.clone().expect("the card");
    let at = messages
        .iter()
        .position(|(c, n)| card.commitments[*c].notifications[*n].intention_id == capped)
        .expect("the capped message on the card");
    app.patient.selected = at;
    let screen = render(&app, 160, 40);
    assert!(screen.contains("autorizar reenvío (tope diario)"), "{screen}");
}
