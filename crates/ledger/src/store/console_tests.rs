//! Migration 0002's derived data (counts by day and state, the commitment's
//! start copied onto intentions) stays exact under every kind of write, is
//! backfilled on an existing database, and Atención's candidate pages equal
//! the full ranking they replace.

use chrono::{DateTime, Duration, TimeZone, Utc};
use rusqlite::params;

use super::super::AttentionQuery;
use super::super::{Store, ms};
use ledger_shape::LedgerShape;

// The bench's ledger generator (a bench tool, not part of the store), so
// these checks run on the same realistic ledger the console bench reads.
#[allow(dead_code)]
#[path = "../../../bench/src/ledger_shape.rs"]
mod ledger_shape;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
}

/// A generated ledger of 3,000 intentions (9 days around `now`). The
/// bench's realistic mix has few rows needing attention, so some read ones
/// are turned uncertain to fill several Atención pages.
fn generated() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("ledger.db")).unwrap();
    let shape = LedgerShape {
        contacts: 100,
        past_days: 6,
        future_days: 3,
        now: now(),
        tz: chrono_tz::America::Lima,
        total: 3000,
    };
    ledger_shape::write(&mut store.conn, |c| ledger_shape::generate_contacts(c, 100, now())).unwrap();
    ledger_shape::write(&mut store.conn, |c| {
        ledger_shape::generate_intentions(c, &shape, 0, 3000)
    })
    .unwrap();
    store
        .conn
        .execute_batch(
            "UPDATE intentions SET state = 'uncertain', state_reason = 'timeout' WHERE id % 13 = 0 AND state = 'read'",
        )
        .unwrap();
    (dir, store)
}

/// Every derived value equals what it is derived from.
fn assert_derived_exact(store: &Store) {
    let c = &store.conn;
    let mismatched_counts: i64 = c
        .query_row(
            "SELECT (SELECT count(*) FROM (
                         SELECT day, state, count(*) AS n FROM intentions GROUP BY day, state
                         EXCEPT SELECT day, state, n FROM intention_counts WHERE n > 0))
                  + (SELECT count(*) FROM (SELECT day, state, n FROM intention_counts WHERE n > 0
                         EXCEPT SELECT day, state, count(*) FROM intentions GROUP BY day, state))
                  + (SELECT count(*) FROM intention_counts WHERE n < 0)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(mismatched_counts, 0, "intention_counts differs from the intentions");
    let wrong_starts: i64 = c
        .query_row(
            "SELECT count(*) FROM intentions i JOIN commitments c ON c.id = i.commitment_id
             WHERE i.starts_at IS NOT c.starts_at",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(wrong_starts, 0, "intentions.starts_at differs from the commitment's");
}

/// Writes of every kind the product (and the bench) makes.
fn churn(store: &Store) {
    let now_ms = ms(now());
    store
        .conn
        .execute_batch(&format!(
            "UPDATE intentions SET state = 'uncertain', state_reason = 'timeout' WHERE id % 7 = 0 AND state = 'read';
             UPDATE intentions SET state = 'review' WHERE id % 11 = 0 AND state = 'uncertain';
             UPDATE intentions SET state = 'dispatching', lease_until = {now_ms} - 1000
                 WHERE id IN (SELECT id FROM intentions WHERE state = 'planned' ORDER BY id LIMIT 9);
             UPDATE intentions SET day = '2026-12-31' WHERE id % 97 = 0;
             UPDATE commitments SET starts_at = starts_at + 3600000 WHERE id % 5 = 0;
             UPDATE commitments SET starts_at = NULL WHERE id % 89 = 0;
             UPDATE commitments SET starts_at = starts_at - starts_at % 3600000 WHERE id % 3 = 0;
             UPDATE commitments SET reschedule_requested_at = {now_ms} WHERE id % 13 = 0;"
        ))
        .unwrap();
}

/// The ranking Atención had before migration 0002: every row of the
/// attention set, evidence counted for each, sorted, then paged.
const FULL_RANKING: &str = "
    SELECT kind, iid, cid, ev FROM (
        SELECT 'intention' AS kind, i.id AS iid, i.commitment_id AS cid, c.starts_at AS starts,
            (SELECT count(*) FROM intention_history h WHERE h.intention_id = i.id
                AND (h.evidence IS NOT NULL OR h.signal IN ('accepted','sent','delivered','read','failed'))) AS ev
        FROM intentions i JOIN commitments c ON c.id = i.commitment_id
        WHERE (i.state IN ('uncertain', 'review') OR (i.state = 'failed' AND i.due_at >= ?2)
               OR (i.state = 'dispatching' AND i.lease_until < ?1))
        UNION ALL
        SELECT 'reschedule', NULL, c.id, c.starts_at, 0 FROM commitments c
        WHERE c.starts_at BETWEEN ?3 AND ?4 AND c.reschedule_requested_at IS NOT NULL
          AND c.status != 'cancelled') p
    ORDER BY CASE WHEN p.starts IS NULL THEN 2 WHEN p.starts >= ?1 THEN 0 ELSE 1 END,
        CASE WHEN p.starts >= ?1 THEN p.starts ELSE -p.starts END, p.ev, p.iid";

fn assert_attention_matches_full_ranking(store: &mut Store) {
    for shift_h in [-72, -5, 0, 7, 30] {
        let at = now() + Duration::hours(shift_h);
        let base = AttentionQuery::new(at);
        let full: Vec<(String, Option<i64>, i64, i64)> = store
            .conn
            .prepare(FULL_RANKING)
            .unwrap()
            .query_map(
                params![
                    ms(at),
                    ms(at - base.rule.failed_window),
                    ms(at - base.rule.reschedule_window),
                    ms(at + base.rule.reschedule_window)
                ],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(full.len() > 100, "the fixture must fill several pages");
        for (limit, offset) in [
            (50, 0),
            (7, 3),
            (50, 50),
            (13, 97),
            (50, full.len() as u32 - 20),
            (50, full.len() as u32),
        ] {
            let mut q = base.clone();
            q.limit = limit;
            q.offset = offset;
            let page = store.read(|tx| tx.attention(&q)).unwrap();
            let got: Vec<_> = page
                .rows
                .iter()
                .map(|r| {
                    let kind = match r.kind {
                        super::super::RowKind::Intention => "intention",
                        super::super::RowKind::RescheduleRequest => "reschedule",
                        super::super::RowKind::RefusedEvent => "refused",
                    };
                    (kind.to_string(), r.intention_id, r.commitment_id, r.evidence_count)
                })
                .collect();
            let want: Vec<_> = full
                .iter()
                .skip(offset as usize)
                .take(limit as usize)
                .cloned()
                .collect();
            assert_eq!(got, want, "page limit {limit} offset {offset} at now{shift_h:+}h");
            assert_eq!(page.total, full.len() as i64, "total at now{shift_h:+}h");
        }
    }
}

#[test]
fn derived_data_stays_exact_and_attention_pages_match_the_full_ranking() {
    let (_dir, mut store) = generated();
    assert_derived_exact(&store);
    assert_attention_matches_full_ranking(&mut store);
    churn(&store);
    assert_derived_exact(&store);
    assert_attention_matches_full_ranking(&mut store);
}

#[test]
fn migration_0002_backfills_an_existing_database() {
    let (dir, store) = generated();
    churn(&store);
    // Back to what a version-1 database looks like, data kept.
    store
        .conn
        .execute_batch(
            "DROP TRIGGER intention_counts_insert; DROP TRIGGER intention_counts_update;
             DROP TRIGGER intention_counts_delete; DROP TRIGGER intentions_starts_at_insert;
             DROP TRIGGER commitments_starts_at_copy; DROP TABLE intention_counts;
             DROP INDEX intentions_attention; DROP INDEX commitments_reschedule; DROP INDEX contacts_opt_out;
             DROP INDEX intentions_day_due; DROP INDEX intentions_day_state;
             CREATE INDEX intentions_day_state ON intentions(day, state);
             ALTER TABLE intentions DROP COLUMN starts_at;
             DROP TRIGGER commitment_search_insert; DROP TRIGGER commitment_search_update;
             DROP TRIGGER commitment_search_delete; DROP TRIGGER commitment_search_contact;
             DROP TABLE commitment_search; DROP TABLE attention_handled; DROP INDEX commitments_contact;
             DROP TABLE refused_events; ALTER TABLE commitments DROP COLUMN contact_name;
             PRAGMA user_version = 1;",
        )
        .unwrap();
    drop(store);
    let mut store = Store::open(&dir.path().join("ledger.db")).unwrap();
    assert_derived_exact(&store);
    assert_attention_matches_full_ranking(&mut store);
    churn(&store);
    assert_derived_exact(&store);
    let by_state = store.read(|tx| tx.count_by_state()).unwrap();
    let direct: i64 = store
        .conn
        .query_row("SELECT count(*) FROM intentions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(by_state.iter().map(|(_, n)| n).sum::<i64>(), direct);
}
