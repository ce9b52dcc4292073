//! `day_timings` on a known set of rows: bounded by the day and by
//! `until`, the first applied entry of each set, recorded-only entries
//! ignored, and served by the day's index (never a scan of the table).

use chrono::{DateTime, Duration, TimeZone, Utc};
use rusqlite::params;

use super::super::{Store, ms};
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState::{self, *};

fn t(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, h, m, 0).unwrap()
}

/// Inserts intention `id` of `day`, due at `due`, now in `state`, with its
/// history: `(minutes after due, to_state, applied)`.
fn intention(store: &Store, id: i64, day: &str, due: DateTime<Utc>, state: &str, history: &[(i64, &str, bool)]) {
    let c = store.sqlite_conn();
    c.execute(
        "INSERT OR IGNORE INTO commitments(id, ref, kind, status, version, created_at, updated_at)
         VALUES (1, 'cita-1', 'appointment', 'scheduled', 1, 0, 0)",
        [],
    )
    .unwrap();
    let changed = history.last().map(|h| due + Duration::minutes(h.0)).unwrap_or(due);
    c.execute(
        "INSERT INTO intentions(id, key, commitment_id, commitment_version, purpose, recipient, category,
             channel, template, language, parameters, body, fingerprint, correlation_id, due_at, day, state,
             state_changed_at, created_by, created_at, updated_at)
         VALUES (?1, 'k' || ?1, 1, 1, 'p', '+51999000111', 'transactional', 'motor', 't', 'es', '[]', 'b',
             'f', 'c', ?2, ?3, ?4, ?5, 'planner', ?6, ?6)",
        params![id, ms(due), day, state, ms(changed), ms(due - Duration::hours(1))],
    )
    .unwrap();
    for (minutes, to, applied) in history {
        c.execute(
            "INSERT INTO intention_history(intention_id, at, to_state, applied, signal, cause)
             VALUES (?1, ?2, ?3, ?4, 's', 'dispatcher')",
            params![id, ms(due + Duration::minutes(*minutes)), to, *applied],
        )
        .unwrap();
    }
}

const REACHED: [IntentionState; 4] = [Accepted, Sent, Delivered, Read];
const CLOSED: [IntentionState; 3] = [Failed, Cancelled, Review];

#[test]
fn the_day_s_due_rows_with_their_first_applied_times() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("l.db")).unwrap();
    let day = "2026-12-01";
    let d: OperatingDay = day.parse().unwrap();
    // Accepted after 2 min, delivered after 5: reached at +2.
    intention(
        &store,
        1,
        day,
        t(14, 0),
        "delivered",
        &[(0, "dispatching", true), (2, "accepted", true), (5, "delivered", true)],
    );
    // A late duplicate "read" recorded only, then failed: closed at +30,
    // never reached.
    intention(
        &store,
        2,
        day,
        t(14, 10),
        "failed",
        &[(1, "read", false), (30, "failed", true)],
    );
    // Still planned, no history.
    intention(&store, 3, day, t(15, 0), "planned", &[]);
    // Not due yet at `until`: left out.
    intention(&store, 4, day, t(18, 0), "planned", &[]);
    // Another day: left out.
    intention(&store, 5, "2026-11-30", t(14, 0), "read", &[(1, "accepted", true)]);
    // Uncertain, then review (closed at +40), then a webhook proved it
    // delivered (reached at +50).
    intention(
        &store,
        6,
        day,
        t(14, 20),
        "delivered",
        &[(1, "uncertain", true), (40, "review", true), (50, "delivered", true)],
    );

    let rows = store.read(|tx| tx.day_timings(d, t(16, 0), &REACHED, &CLOSED)).unwrap();
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.due_at, r.state, r.reached_at, r.closed_at))
        .collect();
    assert_eq!(
        got,
        vec![
            (t(14, 0), Delivered, Some(t(14, 2)), None),
            (t(14, 10), Failed, None, Some(t(14, 40))),
            // Closed times are looked up for rows closed now only (it left
            // review for delivered: its acceptance is what counts).
            (t(14, 20), Delivered, Some(t(15, 10)), None),
            (t(15, 0), Planned, None, None),
        ]
    );
    // No set at all is not an error: the times are simply absent.
    let bare = store.read(|tx| tx.day_timings(d, t(16, 0), &[], &[])).unwrap();
    assert!(bare.iter().all(|r| r.reached_at.is_none() && r.closed_at.is_none()));
    assert_eq!(bare.len(), 4);
    // Only rows now in a set look their history up: with `failed` out of
    // both sets, the failed row has no times at all.
    let narrow = store
        .read(|tx| tx.day_timings(d, t(16, 0), &REACHED, &[Review]))
        .unwrap();
    assert_eq!((narrow[1].reached_at, narrow[1].closed_at), (None, None));
    assert_eq!(narrow[0].reached_at, Some(t(14, 2)));
}

/// At a million intentions the read must take the day's rows from the
/// covering index (the table's rows are wide: reading them costs more than
/// everything else) and reach the history by its index: never a scan of
/// either table.
#[test]
fn the_read_is_served_by_the_day_and_history_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("l.db")).unwrap();
    // Statistics like a large ledger's, so the planner chooses as it would
    // there (an empty table makes every plan look free).
    store.sqlite_conn().execute_batch("ANALYZE").unwrap();
    let plan: Vec<String> = store
        .sqlite_conn()
        .prepare(&format!("EXPLAIN QUERY PLAN {}", super::timings_sql(1, 1)))
        .unwrap()
        .query_map(params!["2026-12-01", 0, "accepted", "failed"], |r| {
            r.get::<_, String>(3)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("USING COVERING INDEX intentions_day_state"), "{plan}");
    assert!(plan.contains("USING INDEX intention_history_intention"), "{plan}");
    assert!(!plan.contains("SCAN i\n") && !plan.ends_with("SCAN i"), "{plan}");
    assert!(!plan.contains("SCAN h"), "{plan}");
}
