//! Claims for many hosts on PostgreSQL: concurrent claimers, each on its
//! own connection (as dispatchers on several hosts would be), take every
//! due intention exactly once, by the database's clock, through the same
//! store operations the dispatcher uses on SQLite. Judged by the rows
//! themselves: one attempt and one claim history row per intention.

mod pg_common;

use std::collections::BTreeSet;

use chrono::Duration;
use pg_common::{ledger, url};
use unavez_ledger::api::{ClaimScope, NewAttempt};
use unavez_ledger::domain::history::{Cause, HistorySignal, Record, Said};
use unavez_ledger::domain::state::IntentionState;
use unavez_ledger::location::Location;
use unavez_ledger::pg::PgLedger;
use unavez_ledger::store::{OpenOptions, Store, StoreError};
use unavez_testkit::PgSchema;

/// `n` planned intentions of one commitment; `due_in_ms` relative to the
/// database's clock.
fn seed(ledger: &mut PgLedger, n: i64, due_in_ms: i64) {
    ledger
        .client()
        .batch_execute(&format!(
            "INSERT INTO contacts(phone, created_at, updated_at) VALUES ('+51999000111', 0, 0);
             INSERT INTO commitments(ref, kind, status, version, contact_id, created_at, updated_at)
                 VALUES ('CITA-1', 'appointment', 'scheduled', 1, 1, 0, 0);
             INSERT INTO intentions(key, commitment_id, commitment_version, purpose, contact_id, recipient,
                 category, channel, template, language, parameters, body, fingerprint, correlation_id,
                 due_at, day, state, state_changed_at, created_by, created_at, updated_at)
             SELECT 'k' || g, 1, 1, 'reminder_24h', 1, '+51999000111', 'transactional', 'motor', 't', 'es',
                 '[]', 'body', 'f' || g, 'c' || g, unavez_now_ms() + {due_in_ms} - g, '2026-12-01', 'planned',
                 0, 'test', 0, 0
             FROM generate_series(1, {n}) AS g;"
        ))
        .unwrap();
}

/// One claim transaction as the dispatcher makes it: due ids by the
/// database's clock, attempts with the lease, planned → dispatching.
fn claim_once(ledger: &mut Store, owner: &str, scope: &ClaimScope) -> Result<Vec<i64>, StoreError> {
    ledger.write(|tx| {
        let now = tx.now()?;
        let ids = tx.due_ids(scope, 7, now)?;
        let attempts: Vec<NewAttempt> = ids
            .iter()
            .map(|id| NewAttempt {
                intention_id: *id,
                n: 1,
                worker: owner.into(),
                channel: "motor".into(),
                version_checked: 1,
                lease: Some((owner.into(), now + Duration::seconds(60))),
                at: now,
            })
            .collect();
        tx.start_attempts(&attempts)?;
        let records: Vec<Record> = ids
            .iter()
            .map(|id| Record {
                intention_id: *id,
                from: Some(IntentionState::Planned),
                to: IntentionState::Dispatching,
                applied: true,
                reason: None,
                said: Said::new(HistorySignal::Claim, Cause::Dispatcher),
                at: now,
            })
            .collect();
        tx.apply_records(&records)?;
        Ok(ids)
    })
}

#[test]
fn four_concurrent_claimers_take_every_due_intention_exactly_once() {
    let schema = PgSchema::new();
    seed(&mut ledger(&schema), 400, 0);
    let claimers: Vec<_> = (0..4)
        .map(|k| {
            let location = Location::Postgres(Box::new(url(&schema)));
            std::thread::spawn(move || {
                let mut ledger = Store::open_location(&location, &OpenOptions::EXISTING).unwrap();
                let owner = format!("host-{k}");
                let mut mine = Vec::new();
                loop {
                    let ids = claim_once(&mut ledger, &owner, &ClaimScope::Due).unwrap();
                    if ids.is_empty() {
                        return mine;
                    }
                    mine.extend(ids);
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut per_claimer = Vec::new();
    for c in claimers {
        let mine = c.join().unwrap();
        per_claimer.push(mine.len());
        all.extend(mine);
    }
    let distinct: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(
        all.len(),
        400,
        "claimed {} times for 400 intentions ({per_claimer:?})",
        all.len()
    );
    assert_eq!(distinct.len(), 400);
    let mut ledger = ledger(&schema);
    let c = ledger.client();
    let row = c
        .query_one(
            "SELECT (SELECT count(*) FROM attempts), (SELECT count(DISTINCT intention_id) FROM attempts),
                    (SELECT count(*) FROM intention_history WHERE signal = 'claim'),
                    (SELECT count(*) FROM intentions WHERE state = 'dispatching' AND lease_owner IS NOT NULL),
                    (SELECT n FROM intention_counts WHERE state = 'dispatching')",
            &[],
        )
        .unwrap();
    let counts: (i64, i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    assert_eq!(counts, (400, 400, 400, 400, 400));
}

#[test]
fn due_is_read_on_the_database_clock_and_a_stale_move_is_refused() {
    let schema = PgSchema::new();
    seed(&mut ledger(&schema), 3, 60_000);
    let mut store = Store::open_location(&Location::Postgres(Box::new(url(&schema))), &OpenOptions::EXISTING).unwrap();
    let mut ledger = ledger(&schema);
    // Due one minute from now by the server's clock: nothing to claim yet.
    assert!(claim_once(&mut store, "host-a", &ClaimScope::Due).unwrap().is_empty());
    ledger
        .client()
        .batch_execute("UPDATE intentions SET due_at = unavez_now_ms() - 1")
        .unwrap();
    // A reprocessing claim names its ids; one not due stays.
    ledger
        .client()
        .batch_execute("UPDATE intentions SET due_at = unavez_now_ms() + 60000 WHERE id = 3")
        .unwrap();
    let got = claim_once(&mut store, "host-a", &ClaimScope::Ids(vec![3, 2])).unwrap();
    assert_eq!(got, vec![2]);
    // Moving from a state the row no longer has is refused, not applied.
    let err = store
        .write(|tx| {
            tx.apply_records(&[Record {
                intention_id: 2,
                from: Some(IntentionState::Planned),
                to: IntentionState::Dispatching,
                applied: true,
                reason: None,
                said: Said::new(HistorySignal::Claim, Cause::Dispatcher),
                at: tx.now()?,
            }])
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::Moved { id: 2, .. }), "{err}");
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    let url = unavez_ledger::pg::PgUrl::parse("postgres://nobody@127.0.0.1:1/none").unwrap();
    let err = PgLedger::open(&url)
        .err()
        .expect("nothing listens on port 1")
        .to_string();
    assert!(
        err.contains("cannot connect to the PostgreSQL ledger postgres://nobody@127.0.0.1:1/none"),
        "{err}"
    );
}
