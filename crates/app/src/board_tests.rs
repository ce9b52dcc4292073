//! The day's figures on a known set of rows: computed by hand below, then
//! checked both on the rows themselves and through a real SQLite ledger
//! holding the same rows (history included), so the query and the rules
//! agree with the arithmetic.

use chrono::{DateTime, Duration, TimeZone, Utc};

use super::*;
use crate::store::Store;

/// Midnight in Lima on 2026-12-01.
fn day_start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 5, 0, 0).unwrap()
}

/// `h:m` local time of the day.
fn at(h: i64, m: i64) -> DateTime<Utc> {
    day_start() + Duration::hours(h) + Duration::minutes(m)
}

fn now() -> DateTime<Utc> {
    at(10, 30)
}

fn min(m: i64) -> Option<i64> {
    Some(m * 60_000)
}

/// One known row: due, state now, first reached, first closed.
struct Known {
    due: DateTime<Utc>,
    state: IntentionState,
    reached: Option<DateTime<Utc>>,
    closed: Option<DateTime<Utc>>,
}

fn row(
    due: DateTime<Utc>,
    state: IntentionState,
    reached: Option<DateTime<Utc>>,
    closed: Option<DateTime<Utc>>,
) -> Known {
    Known {
        due,
        state,
        reached,
        closed,
    }
}

/// A: 08:00 accepted 08:02; B: 08:00 accepted 08:10; C: 08:30 accepted
/// 09:05; D: 08:40 cancelled 08:50; E: 09:00 still planned; F: 07:00
/// cancelled at 06:00 (before due: never waited); G: 09:15 accepted 09:16;
/// I: 09:10 uncertain.
fn known() -> Vec<Known> {
    vec![
        row(at(8, 0), Read, Some(at(8, 2)), None),
        row(at(8, 0), Delivered, Some(at(8, 10)), None),
        row(at(8, 30), Accepted, Some(at(9, 5)), None),
        row(at(8, 40), Cancelled, None, Some(at(8, 50))),
        row(at(9, 0), Planned, None, None),
        row(at(7, 0), Cancelled, None, Some(at(6, 0))),
        row(at(9, 15), Sent, Some(at(9, 16)), None),
        row(at(9, 10), Uncertain, None, None),
    ]
}

/// The rows as the ledger returns them (by due time).
fn timings(rows: &[Known]) -> Vec<DayTiming> {
    let mut v: Vec<DayTiming> = rows
        .iter()
        .map(|k| DayTiming {
            due_at: k.due,
            state: k.state,
            reached_at: k.reached,
            closed_at: k.closed,
            created_at: None,
        })
        .collect();
    v.sort_by_key(|t| t.due_at);
    v
}

/// The figures worked out by hand.
fn check(f: &DayFigures) {
    assert_eq!(f.hours.len(), 24);
    // Hour 8: A 2 min, B 10 min. Hour 9: G 1 min, C 35 min.
    assert_eq!(
        (f.hours[8].latency_p50_ms, f.hours[8].latency_p95_ms),
        (min(2), min(10))
    );
    assert_eq!(
        (f.hours[9].latency_p50_ms, f.hours[9].latency_p95_ms),
        (min(1), min(35))
    );
    assert_eq!((f.hours[8].accepted, f.hours[9].accepted), (2, 2));
    assert!(
        f.hours
            .iter()
            .enumerate()
            .all(|(h, x)| matches!(h, 8 | 9) || x.accepted == 0)
    );
    // The day: 1, 2, 10, 35 minutes.
    assert_eq!((f.latency_p50_ms, f.latency_p95_ms, f.accepted), (min(2), min(35), 4));
    // Queue: nothing before 08:00 (F never waited); 08:00 A and B (2),
    // 08:40 C and D (2); 09:00 starts with C and E, I and G raise it to 3
    // at 09:15; 10:00 E and I; hours after now not begun.
    let peaks: Vec<Option<i64>> = f.hours.iter().map(|h| h.queue_peak).collect();
    let mut expected = vec![Some(0); 8];
    expected.extend([Some(2), Some(3), Some(2)]);
    expected.extend(vec![None; 13]);
    assert_eq!(peaks, expected);
    assert_eq!(f.queue_peak, Some((9, 3)));
}

#[test]
fn figures_of_a_known_day() {
    check(&figures(
        &timings(&known()),
        day_start(),
        day_start() + Duration::days(1),
        now(),
    ));
}

/// A message created after its due time (a booking learned late, the
/// demo's backdated feed) could not be sent before it existed: its latency
/// runs from its creation, not from a due time in the past.
#[test]
fn latency_runs_from_creation_when_it_is_later_than_due() {
    let late = DayTiming {
        due_at: at(9, 30),
        state: Read,
        reached_at: Some(at(10, 0) + Duration::seconds(3)),
        closed_at: None,
        created_at: Some(at(10, 0)),
    };
    let early = DayTiming {
        due_at: at(9, 0),
        state: Accepted,
        reached_at: Some(at(9, 2)),
        closed_at: None,
        created_at: Some(at(8, 0)),
    };
    assert_eq!(sendable_from(&late), at(10, 0));
    assert_eq!(sendable_from(&early), at(9, 0));
    let f = figures(&[early, late], day_start(), day_start() + Duration::days(1), now());
    assert_eq!(
        f.hours[10].latency_p50_ms,
        Some(3_000),
        "seconds, not the 30 min of backdating"
    );
    assert_eq!(f.hours[9].latency_p50_ms, min(2));
}

#[test]
fn percentiles_are_nearest_rank() {
    assert_eq!(percentile(&[], 50), None);
    assert_eq!(percentile(&[7], 95), Some(7));
    let v: Vec<i64> = (1..=20).collect();
    assert_eq!((percentile(&v, 50), percentile(&v, 95)), (Some(10), Some(19)));
}

#[test]
fn a_row_accepted_or_closed_without_its_history_never_shows_as_waiting() {
    let rows = timings(&[row(at(8, 0), Read, None, None), row(at(8, 0), Failed, None, None)]);
    let f = figures(&rows, day_start(), day_start() + Duration::days(1), now());
    assert_eq!((f.latency_p50_ms, f.accepted), (None, 0));
    assert!(f.hours.iter().all(|h| h.queue_peak.unwrap_or(0) == 0));
    assert_eq!(f.queue_peak, Some((0, 0)));
}

/// The same rows in a real ledger: commitments, intentions and their
/// history (with a recorded-only entry that must not count), read by
/// `read_day` through the store.
#[test]
fn the_ledger_read_gives_the_same_figures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut store = Store::open(&path).unwrap();
    let ms = |t: DateTime<Utc>| t.timestamp_millis();
    let mut sql = String::from(
        "INSERT INTO commitments(id, ref, kind, status, version, created_at, updated_at)
         VALUES (1, 'cita-1', 'appointment', 'scheduled', 1, 0, 0);",
    );
    let mut rows = known();
    // Not due yet at `now`, and another day's: neither counts.
    rows.push(row(at(11, 0), Planned, None, None));
    for (i, k) in rows.iter().enumerate() {
        let id = i + 1;
        let created = k.due - Duration::days(3);
        let changed = k.closed.or(k.reached).unwrap_or(created);
        sql.push_str(&format!(
            "INSERT INTO intentions(id, key, commitment_id, commitment_version, purpose, recipient, category,
                 channel, template, language, parameters, body, fingerprint, correlation_id, due_at, day, state,
                 state_changed_at, created_by, created_at, updated_at)
             VALUES ({id}, 'k{id}', 1, 1, 'p', '+51999000111', 'transactional', 'motor', 't', 'es', '[]', 'b',
                 'f', 'c', {}, '2026-12-01', '{}', {}, 'planner', {}, {});",
            ms(k.due),
            k.state.as_str(),
            ms(changed),
            ms(created),
            ms(created)
        ));
        let mut history = vec![(created, "planned", 1)];
        if let Some(t) = k.reached {
            // Dispatching first, then the channel's acceptance; a repeated
            // "read" a minute earlier, recorded only, must not count.
            history.push((t - Duration::minutes(1), "read", 0));
            history.push((t, k.state.as_str(), 1));
        }
        if let Some(t) = k.closed {
            history.push((t, k.state.as_str(), 1));
        }
        for (t, to, applied) in history {
            sql.push_str(&format!(
                "INSERT INTO intention_history(intention_id, at, to_state, applied, signal, cause)
                 VALUES ({id}, {}, '{to}', {applied}, 's', 'dispatcher');",
                ms(t)
            ));
        }
    }
    sql.push_str(
        "INSERT INTO intentions(id, key, commitment_id, commitment_version, purpose, recipient, category,
             channel, template, language, parameters, body, fingerprint, correlation_id, due_at, day, state,
             state_changed_at, created_by, created_at, updated_at)
         SELECT 100, 'other-day', 1, 1, p.purpose, p.recipient, p.category, p.channel, p.template, p.language,
             p.parameters, p.body, p.fingerprint, p.correlation_id, p.due_at, '2026-11-30', 'planned',
             p.state_changed_at, 'planner', p.created_at, p.updated_at
         FROM intentions p WHERE p.id = 5;",
    );
    crate::store::open_connection(&path)
        .unwrap()
        .execute_batch(&sql)
        .unwrap();
    let f = store
        .read(|tx| {
            read_day(
                tx,
                "2026-12-01".parse().unwrap(),
                day_start(),
                day_start() + Duration::days(1),
                now(),
            )
        })
        .unwrap();
    check(&f);
}
