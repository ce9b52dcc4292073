//! Migration 0002's derived data (counts by day and state, the commitment's
//! start copied onto intentions) stays exact under every kind of write, is
//! backfilled on an existing database, and Atención's candidate pages equal
//! the full ranking they replace.

use chrono::{DateTime, Duration, TimeZone, Utc};
use rusqlite::params;

use super::super::AttentionQuery;
use super::super::ledger_shape::{self, LedgerShape};
use super::super::{Store, ms};

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
    ledger_shape::write(store.sqlite_conn_mut(), |c| {
        ledger_shape::generate_contacts(c, 100, now())
    })
    .unwrap();
    ledger_shape::write(store.sqlite_conn_mut(), |c| {
        ledger_shape::generate_intentions(c, &shape, 0, 3000)
    })
    .unwrap();
    store
        .sqlite_conn()
        .execute_batch(
            "UPDATE intentions SET state = 'uncertain', state_reason = 'timeout' WHERE id % 13 = 0 AND state = 'read'",
        )
        .unwrap();
    (dir, store)
}

/// Every derived value equals what it is derived from.
fn assert_derived_exact(store: &Store) {
    let c = store.sqlite_conn();
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
        .sqlite_conn()
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
            .sqlite_conn()
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
                    let cid = r.commitment_id.expect("every row of this ledger has a commitment");
                    (r.kind.as_str().to_string(), r.intention_id, cid, r.evidence_count)
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
        .sqlite_conn()
        .execute_batch(
            "DROP TRIGGER intention_counts_insert; DROP TRIGGER intention_counts_update;
             DROP TRIGGER contact_phone_suffixes_insert; DROP TRIGGER contact_phone_suffixes_update;
             DROP TRIGGER contact_phone_suffixes_delete; DROP TABLE contact_phone_suffixes;
             DROP TRIGGER commitment_search_names_insert; DROP TRIGGER commitment_search_names_update;
             DROP TRIGGER commitment_search_names_delete; DROP TRIGGER commitment_search_names_contact;
             DROP TABLE commitment_search_words; DROP TABLE commitment_search_names; DROP TABLE name_word_deletes;
             DROP TABLE feed_held; DROP TABLE feed_seen; DROP TABLE feeds;

             DROP TRIGGER intention_counts_delete; DROP TRIGGER intentions_starts_at_insert;
             DROP TRIGGER commitments_starts_at_copy; DROP TABLE intention_counts;
             DROP INDEX intentions_attention; DROP INDEX commitments_reschedule; DROP INDEX contacts_opt_out;
             DROP INDEX intentions_day_state;
             CREATE INDEX intentions_day_state ON intentions(day, state);
             ALTER TABLE intentions DROP COLUMN starts_at;
             DROP TRIGGER commitment_search_insert; DROP TRIGGER commitment_search_update;
             DROP TRIGGER commitment_search_delete; DROP TRIGGER commitment_search_contact;
             DROP TABLE commitment_search; DROP TABLE attention_handled; DROP INDEX commitments_contact;
             DROP TABLE refused_events; ALTER TABLE commitments DROP COLUMN contact_name;
             DROP INDEX channel_events_parked; ALTER TABLE channel_events DROP COLUMN copies;
             ALTER TABLE channel_events DROP COLUMN reason; DROP INDEX contacts_wa_user_id;
             ALTER TABLE contacts DROP COLUMN wa_user_id; DROP TABLE template_status; DROP TABLE dispatchers;
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
        .sqlite_conn()
        .query_row("SELECT count(*) FROM intentions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(by_state.iter().map(|(_, n)| n).sum::<i64>(), direct);
}

/// The open cases the SQL returns are exactly the intentions the domain's
/// rule (`AttentionRule::matches`) calls cases and no covering mark
/// (`handled_covers`) takes off the desk, evaluated row by row in Rust.
#[test]
fn open_cases_equal_the_domain_rule_applied_row_by_row() {
    use crate::domain::attention::{AttentionRule, CaseFacts, handled_covers};
    use crate::domain::state::IntentionState;
    let (_dir, mut store) = generated();
    churn(&store);
    // Marks of every kind: covering (after the state change) and outgrown
    // (before it).
    store
        .sqlite_conn()
        .execute_batch(&format!(
            "INSERT INTO operator_actions(id, at, operator, role, action, reason, result)
                 VALUES (1, {n}, 'recepcion', 'front_desk', 'resolve', 'x', 'done');
             INSERT INTO attention_handled(kind, subject_id, handled_at, situation_at, operator, action_id)
                 SELECT 'intention', id, {n},
                        CASE WHEN id % 2 = 0 THEN state_changed_at ELSE state_changed_at - 1 END, 'recepcion', 1
                 FROM intentions WHERE id % 5 = 0 AND state IN ('uncertain', 'review', 'failed', 'dispatching');",
            n = ms(now())
        ))
        .unwrap();
    // The engine's rule, and a Cloud API's, whose quiet acknowledged
    // messages are cases too.
    let cloud = AttentionRule {
        unconfirmed_window: Some(chrono::Duration::minutes(30)),
        ..AttentionRule::default()
    };
    for rule in [AttentionRule::default(), cloud] {
        let mut stmt = store
            .sqlite_conn()
            .prepare(
                "SELECT i.id, i.state, i.due_at, i.lease_until, i.state_changed_at, h.situation_at
                 FROM intentions i LEFT JOIN attention_handled h ON h.kind = 'intention' AND h.subject_id = i.id",
            )
            .unwrap();
        let mut want: Vec<i64> = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                ))
            })
            .unwrap()
            .map(|r| r.unwrap())
            .filter(|(_, state, due, lease, since, handled)| {
                let facts = CaseFacts {
                    state: state.parse::<IntentionState>().unwrap(),
                    due_at: super::super::from_ms(*due),
                    lease_until: lease.map(super::super::from_ms),
                    state_changed_at: super::super::from_ms(*since),
                };
                let covered =
                    handled.is_some_and(|h| handled_covers(super::super::from_ms(h), super::super::from_ms(*since)));
                rule.matches(&facts, now()).is_some() && !covered
            })
            .map(|r| r.0)
            .collect();
        drop(stmt);
        want.sort_unstable();
        let mut q = AttentionQuery::new(now());
        q.rule = rule;
        q.limit = 100_000;
        let page = store.read(|tx| tx.attention(&q)).unwrap();
        let mut got: Vec<i64> = page.rows.iter().filter_map(|r| r.intention_id).collect();
        got.sort_unstable();
        assert!(want.len() > 100);
        assert_eq!(got, want);
        let others = page.rows.iter().filter(|r| r.intention_id.is_none()).count() as i64;
        assert_eq!(page.total, want.len() as i64 + others);
        let unconfirmed = page.rows.iter().filter(|r| r.state.as_str() == "unconfirmed").count();
        assert_eq!(
            unconfirmed > 0,
            rule.unconfirmed_window.is_some(),
            "{unconfirmed} unconfirmed"
        );
    }
}

/// The trigram index stays equal to the tables it indexes, and finds a
/// patient by name, reference, key, or the phone's last digits.
#[test]
fn the_patient_search_finds_by_name_reference_key_and_phone_digits() {
    let (_dir, mut store) = generated();
    churn(&store);
    store
        .sqlite_conn()
        .execute_batch(
            "UPDATE contacts SET name = 'Mónica Quispe' WHERE id = 7;
             UPDATE commitments SET contact_name = 'Ana María Pérez' WHERE id = 10;
             UPDATE contacts SET phone = '+51999123987' WHERE id = 8;",
        )
        .unwrap();
    let stale: i64 = store
        .sqlite_conn()
        .query_row(
            "SELECT count(*) FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id
             WHERE c.id NOT IN (SELECT rowid FROM commitment_search WHERE commitment_search MATCH
                 '\"' || replace(c.ref, '\"', '\"\"') || '\"')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stale, 0, "every commitment is found by its reference");
    let find = |store: &mut Store, text: &str| -> Vec<String> {
        let mut q = AttentionQuery::new(now());
        q.filter = Some(text.into());
        q.limit = 1000;
        let open = store.read(|tx| tx.attention(&q)).unwrap();
        let up = store
            .read(|tx| {
                tx.upcoming(
                    now() - Duration::days(30),
                    now() + Duration::days(30),
                    Some(text),
                    1000,
                    0,
                )
            })
            .unwrap();
        let mut refs: Vec<String> = open.rows.into_iter().map(|r| r.commitment_ref).collect();
        refs.extend(up.rows.into_iter().map(|r| r.commitment_ref));
        refs.sort();
        refs.dedup();
        refs
    };
    let by_contact = |store: &Store, contact: i64| -> Vec<String> {
        let mut s = store
            .sqlite_conn()
            .prepare("SELECT ref FROM commitments WHERE contact_id = ?1 AND contact_name IS NULL ORDER BY ref")
            .unwrap();
        s.query_map([contact], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    // Accents and case do not matter.
    let monica = find(&mut store, "monica quis");
    assert!(!monica.is_empty());
    assert!(by_contact(&store, 7).iter().all(|r| monica.contains(r)), "{monica:?}");
    let cid10: String = store
        .sqlite_conn()
        .query_row("SELECT ref FROM commitments WHERE id = 10", [], |r| r.get(0))
        .unwrap();
    assert!(find(&mut store, "maría pérez").contains(&cid10));
    let phone = find(&mut store, "3987");
    assert!(by_contact(&store, 8).iter().all(|r| phone.contains(r)), "{phone:?}");
    // A key typed in full finds its commitment and nothing else.
    let key: String = store
        .sqlite_conn()
        .query_row(
            "SELECT key FROM intentions WHERE state = 'uncertain' ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let reference = key.split(':').next().unwrap().to_string();
    let mut q = AttentionQuery::new(now());
    q.filter = Some(key.clone());
    let page = store.read(|tx| tx.attention(&q)).unwrap();
    assert!(page.rows.iter().any(|r| r.key.as_deref() == Some(key.as_str())));
    assert!(page.rows.iter().all(|r| r.commitment_ref == reference));
    assert_eq!(page.total, page.rows.len() as i64);
    assert!(find(&mut store, "zzqx").is_empty());
}
