//! Recovery's reads for evidence left hanging, on SQLite and PostgreSQL
//! alike: attempts left open on intentions no dispatcher holds, and the
//! acknowledged messages the status poll asks about.

mod backends_fixture;
mod pg_common;

use backends_fixture::{both, ok};
use chrono::{DateTime, Duration, TimeZone, Utc};
use unavez_ledger::api_recovery::RecoveryTx;
use unavez_ledger::domain::recovery::{OrphanFacts, StatusPoll};
use unavez_ledger::domain::state::IntentionState;

/// `minutes` after 2026-12-01 12:00 UTC.
fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap() + Duration::minutes(minutes)
}

#[test]
fn orphaned_attempts_are_the_open_ones_no_lease_covers() {
    both(|store, fx| {
        fx.commitment(101, 201, 0);
        for (id, state) in [(301, "read"), (302, "dispatching"), (303, "uncertain"), (304, "sent")] {
            fx.intention(id, 101, state, "");
        }
        fx.attempt(401, 301, 1, None, "started", None); // webhooks moved it on
        fx.attempt(402, 302, 1, None, "started", None); // its lease's
        fx.attempt(403, 303, 1, None, "started", None);
        fx.attempt(404, 304, 1, Some(1500), "accepted", None); // closed
        // Started at 1000 ms: before a cut-off after it, not before one at it.
        let cutoff = DateTime::from_timestamp_millis(1001).unwrap();
        let found = ok(store.write(|tx| RecoveryTx::orphaned_attempts(tx, cutoff, 10)));
        let orphan = |attempt_id, intention_id, state| OrphanFacts {
            attempt_id,
            intention_id,
            state,
        };
        assert_eq!(
            found,
            vec![
                orphan(401, 301, IntentionState::Read),
                orphan(403, 303, IntentionState::Uncertain)
            ]
        );
        assert_eq!(
            ok(store.write(|tx| RecoveryTx::orphaned_attempts(tx, cutoff, 1))).len(),
            1
        );
        let early = DateTime::from_timestamp_millis(1000).unwrap();
        assert!(ok(store.write(|tx| RecoveryTx::orphaned_attempts(tx, early, 10))).is_empty());
    });
}

#[test]
fn the_status_poll_takes_quiet_acknowledged_commands_and_holds_them() {
    both(|store, fx| {
        let now = at(0);
        let ms = |t: DateTime<Utc>| t.timestamp_millis();
        fx.commitment(102, 202, 0);
        // (id, state, quiet for minutes, due minutes ago, command id)
        let rows = [
            (311, "accepted", 90, 120, true),
            (312, "sent", 61, 120, true),
            (313, "delivered", 70, 120, true),
            (314, "read", 90, 120, true),         // nothing more to learn
            (315, "accepted", 30, 120, true),     // news within the window
            (316, "accepted", 90, 120, false),    // no command to ask about
            (317, "accepted", 90, 60 * 49, true), // due before the horizon
            (318, "uncertain", 90, 120, true),    // the reconciler's, not the poll's
        ];
        for (id, state, quiet, due, command) in rows {
            let command = if command { format!("'cmd_{id}'") } else { "NULL".into() };
            fx.intention(
                id,
                102,
                state,
                &format!(
                    "UPDATE intentions SET state_changed_at = {}, due_at = {}, provider_command_id = {command}
                     WHERE id = {id};",
                    ms(now - Duration::minutes(quiet)),
                    ms(now - Duration::minutes(due))
                ),
            );
        }
        let poll = StatusPoll {
            window: Duration::minutes(60),
        };
        let ids = |rows: Vec<unavez_ledger::store::IntentionRow>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
        let due = ok(store.write(|tx| RecoveryTx::status_polls_due(tx, &poll, now, 10)));
        // The longest quiet first.
        assert_eq!(ids(due), vec![311, 313, 312]);
        assert_eq!(
            ids(ok(store.write(|tx| RecoveryTx::status_polls_due(tx, &poll, now, 2)))),
            vec![311, 313]
        );
        // Held: not asked again before the hold ends.
        ok(store.write(|tx| RecoveryTx::hold_status_polls(tx, &[(311, at(30)), (313, at(-1))])));
        assert_eq!(
            ids(ok(store.write(|tx| RecoveryTx::status_polls_due(tx, &poll, now, 10)))),
            vec![313, 312]
        );
        assert_eq!(
            ids(ok(store.write(|tx| RecoveryTx::status_polls_due(
                tx,
                &poll,
                at(30),
                10
            )))),
            // The hold is over, and 315 has been quiet an hour by then.
            vec![311, 313, 312, 315]
        );
        assert_eq!(
            fx.int("SELECT next_attempt_at FROM intentions WHERE id = 311"),
            Some(ms(at(30)))
        );
    });
}
