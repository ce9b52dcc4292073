//! Claims, results, leases and reconciliation support through the
//! set-based ledger, on a real SQLite file.

use chrono::{DateTime, Duration, Utc};

use super::*;
use crate::dispatch::finish::finish_attempt;
use crate::domain::attempt::{AttemptResult, Backoff, Finished, RetryPolicy};
use crate::domain::event::BookingEvent;
use crate::domain::state::Signal;
use crate::domain::validity::Rules;
use crate::planner::Planner;
use crate::policy::Policy;
use crate::store::{Store, StoreError, Tx};
use crate::templates::Templates;

/// Runs one statement on a second connection: a change made behind the
/// dispatcher's back (a manual edit, another process).
pub(crate) fn sql(store: &Store, statement: &str) {
    let conn = crate::store::open_connection(store.path()).unwrap();
    conn.execute_batch(statement).unwrap();
}

pub(crate) fn rules() -> Rules {
    Rules {
        quiet_hours: None,
        daily_cap: 0,
        tz: chrono_tz::America::Lima,
    }
}

pub(crate) fn retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 2,
        backoff: Backoff::new(vec![5, 60]),
    }
}

pub(crate) fn setup(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("t.db")).unwrap()
}

/// Schedules `r` two days ahead: its booking notice is due now.
pub(crate) fn schedule(
    store: &mut Store,
    r: &str,
    kind: &str,
    version: i64,
    starts: DateTime<Utc>,
    now: DateTime<Utc>,
) {
    let policy = Policy {
        quiet_hours: None,
        ..Policy::default()
    };
    let templates = Templates::embedded();
    let planner = Planner {
        policy: &policy,
        templates: &templates,
        tz: chrono_tz::America::Lima,
    };
    let ev = BookingEvent::from_json(&format!(
        r#"{{"event_id":"{r}-{kind}-{version}","type":"{kind}","ref":"{r}","version":{version},
            "starts_at":"{}","contact":{{"phone":"+5198765{:04}","name":"Ana"}},"service":"Odontología",
            "location":"Sede"}}"#,
        starts.to_rfc3339(),
        r.len() * 7 % 10000
    ))
    .unwrap();
    store.write(|tx| seed(tx, &planner, &ev, now)).unwrap();
}

/// Ingests one valid event (the real path: event log, commitment,
/// closures, reservations).
fn seed(tx: &Tx<'_>, planner: &Planner<'_>, ev: &BookingEvent, now: DateTime<Utc>) -> Result<(), StoreError> {
    match crate::ingest::ingest(tx, planner, ev, "test", now) {
        Ok(_) => Ok(()),
        Err(e) => panic!("test event {} does not apply: {e}", ev.event_id),
    }
}

pub(crate) fn claim(store: &mut Store, owner: &str, now: DateTime<Utc>) -> Vec<ClaimDecision> {
    store
        .write(|tx| claim_batch(tx, &ClaimScope::Due, claimant(owner, &rules()), 100, now))
        .unwrap()
}

pub(crate) fn claimant<'a>(owner: &'a str, rules: &'a Rules) -> Claimant<'a> {
    Claimant {
        owner,
        channel: "motor",
        lease: Duration::seconds(30),
        rules,
    }
}

pub(crate) fn claimed(d: &[ClaimDecision]) -> Vec<&Claimed> {
    d.iter()
        .filter_map(|d| match d {
            ClaimDecision::Claimed(c) => Some(c.as_ref()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_claim_records_the_attempt_before_sending_and_results_move_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-1",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d);
    assert_eq!(c.len(), 1, "only the booking notice is due");
    let c = c[0];
    assert_eq!(c.intention.key, "cita-1:aviso-reserva:v1");
    assert_eq!(c.intention.state, IntentionState::Dispatching);
    let attempts = store.read(|tx| tx.attempts(c.intention.id)).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, crate::domain::attempt::AttemptOutcome::Started);
    // Nothing else is due; a second claimer gets nothing.
    assert!(claim(&mut store, "w2", now).is_empty());
    let f = store
        .write(|tx| {
            finish_attempt(
                tx,
                c.attempt_id,
                &AttemptResult::Acknowledged {
                    evidence: Some(Signal::Accepted),
                    command_id: Some("cmd-1"),
                    message_id: None,
                    http_status: Some(202),
                    detail: None,
                },
                Cause::Dispatcher,
                &retry(),
                now,
            )
        })
        .unwrap();
    assert_eq!(f, Finished::Accepted);
    let row = store.read(|tx| tx.intention(c.intention.id)).unwrap();
    assert_eq!(row.state, IntentionState::Accepted);
    assert_eq!(row.provider_command_id.as_deref(), Some("cmd-1"));
    assert!(row.lease_owner.is_none());
}

#[test]
fn invalid_intentions_are_cancelled_at_claim_with_the_version_evaluated() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-2",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    // The commitment moves on behind the planner's back (v2 stored, the v1
    // notice still planned): validity at claim must catch it.
    sql(&store, "UPDATE commitments SET version = 2 WHERE ref = 'cita-2'");
    let d = claim(&mut store, "w1", now);
    assert!(
        matches!(&d[..], [ClaimDecision::Cancelled { reason, .. }] if reason == "superseded"),
        "{d:?}"
    );
    let id = store
        .read(|tx| tx.intention_id("cita-2:aviso-reserva:v1"))
        .unwrap()
        .unwrap();
    let h = store.read(|tx| tx.history(id)).unwrap();
    let last = h.last().unwrap();
    assert_eq!(last.to_state, "cancelled");
    assert_eq!(last.commitment_version, Some(2));
    assert!(last.note.as_deref().unwrap().contains("v1"), "{last:?}");
}

#[test]
fn retry_backs_off_then_goes_to_review_when_attempts_are_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-3",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let retry_result = AttemptResult::Retry {
        detail: "connection refused",
        http_status: None,
        retry_after_secs: None,
    };
    let d = claim(&mut store, "w1", now);
    let a = claimed(&d)[0].attempt_id;
    let f = store
        .write(|tx| finish_attempt(tx, a, &retry_result, Cause::Dispatcher, &retry(), now))
        .unwrap();
    assert_eq!(f, Finished::Retry);
    // Not due again before the backoff.
    assert!(claim(&mut store, "w1", now + Duration::seconds(4)).is_empty());
    let later = now + Duration::seconds(6);
    let d = claim(&mut store, "w1", later);
    let c = claimed(&d)[0];
    assert_eq!(c.attempt_n, 2);
    let f = store
        .write(|tx| finish_attempt(tx, c.attempt_id, &retry_result, Cause::Dispatcher, &retry(), later))
        .unwrap();
    assert_eq!(f, Finished::Review);
}

#[test]
fn an_expired_lease_with_an_open_attempt_becomes_uncertain_never_planned() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-4",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0];
    assert!(
        store
            .write(|tx| crate::dispatch::reconcile::recovery::expire_leases(tx, now + Duration::seconds(10)))
            .unwrap()
            .is_empty()
    );
    let moved = store
        .write(|tx| crate::dispatch::reconcile::recovery::expire_leases(tx, now + Duration::seconds(31)))
        .unwrap();
    assert_eq!(moved, vec![c.intention.id]);
    let row = store.read(|tx| tx.intention(c.intention.id)).unwrap();
    assert_eq!(row.state, IntentionState::Uncertain);
    let att = store.read(|tx| tx.attempts(c.intention.id)).unwrap();
    assert_eq!(att[0].outcome, crate::domain::attempt::AttemptOutcome::Uncertain);
    // The worker's late answer is still evidence.
    let f = store
        .write(|tx| {
            finish_attempt(
                tx,
                c.attempt_id,
                &AttemptResult::Acknowledged {
                    evidence: Some(Signal::Sent),
                    command_id: Some("cmd-9"),
                    message_id: Some("wamid.9"),
                    http_status: Some(202),
                    detail: None,
                },
                Cause::Dispatcher,
                &retry(),
                now + Duration::seconds(40),
            )
        })
        .unwrap();
    assert_eq!(f, Finished::Sent);
    let att = store.read(|tx| tx.attempts(c.intention.id)).unwrap();
    assert_eq!(
        att[0].outcome,
        crate::domain::attempt::AttemptOutcome::Uncertain,
        "the closing outcome stays"
    );
    assert_eq!(att[0].message_id.as_deref(), Some("wamid.9"));
    assert!(
        att[0]
            .error_detail
            .as_deref()
            .unwrap()
            .ends_with("late answer: accepted"),
        "{:?}",
        att[0]
    );
    // Taken for reconciliation: nothing left uncertain.
    let items = store
        .write(|tx| tx.take_uncertain(now + Duration::seconds(41), Duration::seconds(5), 10))
        .unwrap();
    assert!(items.is_empty());
}

#[test]
fn a_planned_intention_with_an_acknowledged_attempt_is_never_claimed_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-5",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0];
    store
        .write(|tx| {
            finish_attempt(
                tx,
                c.attempt_id,
                &AttemptResult::Acknowledged {
                    evidence: Some(Signal::Accepted),
                    command_id: Some("cmd-5"),
                    message_id: None,
                    http_status: Some(202),
                    detail: None,
                },
                Cause::Dispatcher,
                &retry(),
                now,
            )
        })
        .unwrap();
    // Simulate a bad manual edit putting it back to planned.
    sql(
        &store,
        &format!("UPDATE intentions SET state = 'planned' WHERE id = {}", c.intention.id),
    );
    let d = claim(&mut store, "w2", now);
    assert!(matches!(&d[..], [ClaimDecision::Guarded { .. }]), "{d:?}");
    assert_eq!(store.read(|tx| tx.attempts(c.intention.id)).unwrap().len(), 1);
}

#[test]
fn a_reschedule_while_in_flight_is_recorded_with_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-6",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let d = claim(&mut store, "w1", now);
    let c = claimed(&d)[0];
    schedule(
        &mut store,
        "cita-6",
        "appointment.rescheduled",
        2,
        now + Duration::days(3),
        now,
    );
    store
        .write(|tx| {
            finish_attempt(
                tx,
                c.attempt_id,
                &AttemptResult::Acknowledged {
                    evidence: Some(Signal::Accepted),
                    command_id: Some("cmd-6"),
                    message_id: None,
                    http_status: Some(202),
                    detail: None,
                },
                Cause::Dispatcher,
                &retry(),
                now,
            )
        })
        .unwrap();
    let h = store.read(|tx| tx.history(c.intention.id)).unwrap();
    let seq = h.iter().find(|r| r.signal == "version_changed_in_flight").unwrap();
    let note = seq.note.as_deref().unwrap();
    assert!(note.contains("checked v1, now v2"), "{note}");
    assert!(note.contains("cita-6:aviso-cambio:v2 is planned"), "{note}");
}

#[test]
fn two_connections_never_claim_the_same_intention() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    for n in 0..60 {
        schedule(
            &mut store,
            &format!("cita-x{n}"),
            "appointment.scheduled",
            1,
            now + Duration::days(2),
            now,
        );
    }
    let path = dir.path().join("t.db");
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut s = Store::open(&path).unwrap();
                let mut mine = Vec::new();
                loop {
                    let d = s
                        .write(|tx| {
                            let owner = format!("w{w}");
                            claim_batch(tx, &ClaimScope::Due, claimant(&owner, &rules()), 7, now)
                        })
                        .unwrap();
                    if d.is_empty() {
                        break;
                    }
                    mine.extend(claimed(&d).iter().map(|c| c.intention.id));
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<i64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(n, 60);
    assert_eq!(all.len(), 60);
}

/// A shared ledger decides due times and leases on the database's clock,
/// whatever the claiming host's clock says; the embedded one on the
/// caller's (which the other tests here drive). The same booking notice,
/// due now, asked for by a host whose clock is a day behind: SQLite finds
/// nothing due, PostgreSQL claims it with a lease from its own now.
#[test]
fn a_shared_ledger_claims_on_the_database_clock_not_the_hosts() {
    let now = Utc::now();
    let behind = now - Duration::days(1);
    let dir = tempfile::tempdir().unwrap();
    let mut sqlite = setup(&dir);
    schedule(
        &mut sqlite,
        "cita-reloj",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    assert!(claimed(&claim(&mut sqlite, "host-a", behind)).is_empty());

    let schema = unavez_testkit::PgSchema::new();
    let location = unavez_ledger::location::Location::parse(std::path::Path::new(&schema.url)).unwrap();
    let mut pg = Store::open_location(&location, &crate::store::OpenOptions::CREATE).unwrap();
    schedule(
        &mut pg,
        "cita-reloj",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let decisions = claim(&mut pg, "host-a", behind);
    assert_eq!(claimed(&decisions).len(), 1, "{decisions:?}");
    let row = pg.read(|tx| tx.list_intentions(&Default::default())).unwrap();
    let lease = row.iter().find_map(|i| i.lease_until).expect("a lease was written");
    assert!(
        lease > now,
        "the lease counts from the database's now ({lease} vs host {behind})"
    );
}

#[test]
fn a_deferral_to_the_instant_already_deferred_to_adds_no_history_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = setup(&dir);
    let now = Utc::now();
    schedule(
        &mut store,
        "cita-quieta",
        "appointment.scheduled",
        1,
        now + Duration::days(2),
        now,
    );
    let mut facts = store
        .read(|tx| {
            let ids = tx.due_ids(&ClaimScope::Due, 10, now)?;
            tx.claim_facts(&ids, None)
        })
        .unwrap();
    let mut f = facts.remove(0);
    let until = now + Duration::hours(1);
    let defer = || {
        Verdict::Validity(Validity::Defer {
            until,
            why: "quiet hours: deferred to the end of the window".into(),
        })
    };
    let (record, deferral, _) = refusal(&f, defer(), now);
    assert!(record.is_some(), "the first deferral is recorded");
    assert_eq!(deferral, Some((f.intention.id, Some(until))));
    // Due again with the same verdict (a clock that did not move on): the
    // due time is written again, the history is not.
    f.intention.next_attempt_at = Some(until);
    let (record, deferral, _) = refusal(&f, defer(), now);
    assert!(record.is_none(), "{record:?}");
    assert_eq!(deferral, Some((f.intention.id, Some(until))));
    // Another instant is another deferral.
    f.intention.next_attempt_at = Some(until - Duration::minutes(5));
    assert!(refusal(&f, defer(), now).0.is_some());
}
