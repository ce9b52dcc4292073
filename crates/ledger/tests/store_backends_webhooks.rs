//! The webhook, inbound, notification, operator, refusal and recovery
//! operations of the store on both backends, from one definition: each
//! body runs on a SQLite file and on a PostgreSQL schema with the same
//! assertions (`backends_fixture`: `store_backends.rs`'s `both`, plus a
//! way to write fixture rows the store has no operation for).

mod backends_fixture;
mod pg_common;

use backends_fixture::{both, ok, unless_unported};
use chrono::{DateTime, Duration, TimeZone, Utc};
use unavez_ledger::api_recovery::RecoveryTx;
use unavez_ledger::domain::channel_event::EventStatus;
use unavez_ledger::domain::counter::Counter;
use unavez_ledger::domain::event::ConflictKind;
use unavez_ledger::domain::state::IntentionState;
use unavez_ledger::store::{
    AcknowledgementRow, NewAcknowledgement, NewChannelEvent, NewRefusal, OperatorAction, Recorded, SOURCE_CLOUD,
    SOURCE_MOTOR, StoreError, from_ms,
};

fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap() + Duration::minutes(minutes)
}

fn event<'a>(event_id: &'a str, message_id: Option<&'a str>, key: Option<&'a str>) -> NewChannelEvent<'a> {
    NewChannelEvent {
        source: SOURCE_CLOUD,
        event_id,
        kind: "status",
        message_id,
        intention_key: key,
        // Not a status WhatsApp sends: a pending copy of it is ignored when
        // correlated (no report), which keeps the state machine out of it.
        payload: "{}",
    }
}

#[test]
fn a_channel_event_is_recorded_once_and_its_copies_counted() {
    both(|store, _| {
        store
            .write(|tx| {
                let first = tx.record_channel_event(&event("w1:delivered:1", Some("w1"), None), at(0))?;
                let Recorded::New(row) = first else { panic!("{first:?}") };
                let again = tx.record_channel_event(&event("w1:delivered:1", Some("w1"), None), at(1))?;
                assert_eq!(
                    again,
                    Recorded::Duplicate {
                        row,
                        intention_id: None
                    }
                );
                tx.record_channel_event(&event("w1:delivered:1", Some("w1"), None), at(2))?;
                let motor = NewChannelEvent {
                    source: SOURCE_MOTOR,
                    ..event("m1", None, None)
                };
                tx.record_channel_event(&motor, at(2))?;
                tx.mark_channel_event(row, EventStatus::Applied, None, at(3))?;
                Ok::<_, StoreError>(())
            })
            .unwrap();
        let on = store.path().display().to_string();
        store
            .read(|tx| {
                assert_eq!(
                    tx.channel_event(SOURCE_CLOUD, "w1:delivered:1")?,
                    Some(("status".into(), "applied".into(), None, 3)),
                    "on {on}"
                );
                assert_eq!(tx.channel_event(SOURCE_CLOUD, "nope")?, None);
                assert_eq!(tx.extra_copies(SOURCE_CLOUD)?, 2);
                assert_eq!(tx.extra_copies(SOURCE_MOTOR)?, 0);
                assert_eq!(tx.extra_copies("other")?, 0);
                assert_eq!(tx.counter(&Counter::DuplicateEvents.name())?, 2);
                let listed = tx.channel_events(10)?;
                assert_eq!(listed.len(), 2);
                assert_eq!(listed[0].0, SOURCE_CLOUD);
                assert_eq!(
                    listed[1],
                    (
                        SOURCE_MOTOR.into(),
                        "m1".into(),
                        "status".into(),
                        "received".into(),
                        None
                    )
                );
                Ok::<_, StoreError>(())
            })
            .unwrap();
    });
}

/// A status stored and marked waiting for its intention.
fn pending(store: &mut unavez_ledger::store::Store, event_id: &str, mid: &str, minutes: i64) -> i64 {
    let recorded = ok(store.write(|tx| tx.record_channel_event(&event(event_id, Some(mid), None), at(minutes))));
    let Recorded::New(row) = recorded else {
        panic!("{recorded:?}")
    };
    ok(store.write(|tx| tx.mark_channel_event(row, EventStatus::Pending, None, at(minutes))));
    row
}

#[test]
fn pending_statuses_are_found_by_key_message_id_or_attempt_and_by_age() {
    // The rows of the status workflow (`unavez_app::status`, whose order
    // the webhook integration tests exercise end to end on both backends).
    both(|store, fx| {
        fx.commitment(101, 201, 0);
        fx.intention(301, 101, "accepted", "");
        let w9 = pending(store, "w9:sent:1", "w9", 0);
        // A copy is counted on the stored row, not stored again.
        let dup = ok(store.write(|tx| tx.record_channel_event(&event("w9:sent:1", Some("w9"), None), at(0))));
        assert_eq!(
            dup,
            Recorded::Duplicate {
                row: w9,
                intention_id: None
            }
        );
        let old = pending(store, "old:sent:1", "old", -80 * 60);
        assert_eq!(ok(store.read(|tx| tx.pending_status_count())), 2);
        let recent = ok(store.read(|tx| tx.recent_pending_statuses(10, at(-72 * 60))));
        assert_eq!(recent.iter().map(|p| p.id).collect::<Vec<_>>(), vec![w9]);
        let all = ok(store.read(|tx| tx.recent_pending_statuses(10, at(-100 * 60))));
        assert_eq!(
            all.iter().map(|p| p.id).collect::<Vec<_>>(),
            vec![old, w9],
            "newest first"
        );

        // Nothing names the intention yet.
        assert!(ok(store.read(|tx| tx.pending_statuses_for(301))).is_empty());
        assert_eq!(ok(store.read(|tx| tx.intention_of_attempt_message("w9"))), None);
        // An attempt learns the message id: found through it.
        fx.attempt(401, 301, 1, Some(1000), "accepted", Some("w9"));
        assert_eq!(ok(store.read(|tx| tx.intention_of_attempt_message("w9"))), Some(301));
        assert_eq!(ok(store.read(|tx| tx.intention_of_provider_message("w9"))), None);
        let waiting = ok(store.read(|tx| tx.pending_statuses_for(301)));
        assert_eq!(waiting.len(), 1);
        assert_eq!((waiting[0].id, waiting[0].source.as_str()), (w9, SOURCE_CLOUD));
        assert_eq!(waiting[0].message_id.as_deref(), Some("w9"));
        // Marked ignored, applied to the intention: no longer pending.
        ok(store.write(|tx| tx.mark_channel_event(w9, EventStatus::Ignored, Some(301), at(2))));
        let on = store.path().display().to_string();
        store
            .read(|tx| {
                assert_eq!(tx.pending_status_count()?, 1, "on {on}");
                let (_, status, _, copies) = tx.channel_event(SOURCE_CLOUD, "w9:sent:1")?.unwrap();
                assert_eq!((status.as_str(), copies), ("ignored", 2));
                assert_eq!(tx.channel_events(10)?[0].4, Some(301));
                assert!(tx.pending_statuses_for(301)?.is_empty());
                Ok::<_, StoreError>(())
            })
            .unwrap();
    });
}

#[test]
fn provider_references_are_learnt_once_and_never_overwritten() {
    both(|store, fx| {
        fx.commitment(102, 202, 0);
        fx.intention(302, 102, "dispatching", "");
        ok(store.write(|tx| tx.set_provider_refs(302, Some("cmd-1"), None, at(0))));
        ok(store.write(|tx| tx.set_provider_refs(302, Some("cmd-2"), Some("wm-1"), at(1))));
        ok(store.write(|tx| tx.set_provider_refs(302, None, Some("wm-2"), at(2))));
        // Whichever id the intention is found by, it is the first one kept.
        assert_eq!(
            ok(store.read(|tx| tx.provider_message_id(302))).as_deref(),
            Some("wm-1")
        );
        assert_eq!(ok(store.read(|tx| tx.intention_of_provider_message("wm-1"))), Some(302));
        assert_eq!(ok(store.read(|tx| tx.intention_of_provider_message("wm-2"))), None);
    });
}

#[test]
fn inbound_messages_open_the_window_record_opt_outs_and_find_the_commitment() {
    both(|store, fx| {
        fx.commitment(103, 203, at(60).timestamp_millis());
        fx.commitment(104, 203, at(-60).timestamp_millis());
        fx.intention(
            303,
            104,
            "delivered",
            "UPDATE intentions SET provider_message_id = 'wq' WHERE id = 303;",
        );
        fx.intention(304, 103, "delivered", "");
        fx.attempt(404, 304, 1, Some(1000), "accepted", Some("wa"));
        let contact = |col: &str| fx.int(&format!("SELECT {col} FROM contacts WHERE id = 203"));

        ok(store.write(|tx| tx.touch_inbound(203, at(5), at(6))));
        ok(store.write(|tx| tx.touch_inbound(203, at(1), at(7))));
        assert_eq!(contact("last_inbound_at"), Some(at(5).timestamp_millis()));
        ok(store.write(|tx| tx.touch_inbound(203, at(8), at(8))));
        assert_eq!(contact("last_inbound_at"), Some(at(8).timestamp_millis()));

        ok(store.write(|tx| tx.opt_out(203, false, at(10), at(10))));
        assert_eq!(contact("opt_out_marketing_at"), Some(at(10).timestamp_millis()));
        assert_eq!(contact("opt_out_transactional_at"), None);
        ok(store.write(|tx| tx.opt_out(203, true, at(11), at(11))));
        assert_eq!(contact("opt_out_marketing_at"), Some(at(10).timestamp_millis()));
        assert_eq!(contact("opt_out_transactional_at"), Some(at(11).timestamp_millis()));

        let mut reply = |quoted: Option<&'static str>| ok(store.read(|tx| tx.reply_commitment(203, quoted, at(0))));
        // Quoting our message (on the intention, or only on an attempt).
        assert_eq!(reply(Some("wq")), Some((104, "cita-104".into(), false)));
        assert_eq!(reply(Some("wa")), Some((103, "cita-103".into(), true)));
        // Otherwise the nearest upcoming appointment.
        assert_eq!(reply(Some("unknown")), Some((103, "cita-103".into(), true)));
        assert_eq!(reply(None), Some((103, "cita-103".into(), true)));
        // Nothing upcoming: the latest commitment.
        assert_eq!(
            ok(store.read(|tx| tx.reply_commitment(203, None, at(120)))),
            Some((104, "cita-104".into(), false))
        );
        assert_eq!(ok(store.read(|tx| tx.reply_commitment(999, None, at(0)))), None);

        ok(store.write(|tx| {
            tx.request_reschedule(103, "can we move it?", "cloud:in1", at(12))?;
            tx.add_commitment_signal(103, "conversation", None, "cloud:in2", at(13))
        }));
        assert_eq!(
            fx.int("SELECT reschedule_requested_at FROM commitments WHERE id = 103"),
            Some(at(12).timestamp_millis())
        );
        assert_eq!(
            ok(store.read(|tx| tx.commitment_signals(103))),
            vec![
                (
                    "reschedule_requested".to_string(),
                    Some("can we move it?".to_string()),
                    Some("cloud:in1".to_string())
                ),
                ("conversation".to_string(), None, Some("cloud:in2".to_string())),
            ]
        );
        let contact_id = store.write(|tx| tx.inbound_contact("+51999000203", at(14)));
        if let Some(id) = unless_unported(store.is_pg(), contact_id) {
            assert_eq!(id, 203);
        }
    });
}

#[test]
fn template_statuses_user_ids_and_parked_events_are_kept() {
    both(|store, fx| {
        fx.commitment(105, 205, 0);
        fx.intention(
            305,
            105,
            "review",
            "UPDATE intentions SET template = 'remind' WHERE id = 305;",
        );
        fx.intention(
            306,
            105,
            "planned",
            "UPDATE intentions SET template = 'remind' WHERE id = 306;",
        );
        let status =
            |status: Option<&'static str>, quality: Option<&'static str>| unavez_ledger::store::TemplateStatus {
                name: "remind",
                language: "es",
                status,
                reason: status.map(|_| "because"),
                quality,
                ..Default::default()
            };
        let row = ok(store.write(|tx| tx.record_channel_event(&event("tpl1", None, None), at(0))));
        let Recorded::New(row) = row else { panic!("{row:?}") };
        ok(store.write(|tx| tx.set_template_status(&status(Some("PAUSED"), None), row, at(0))));
        // A quality update alone keeps the status and its reason.
        ok(store.write(|tx| tx.set_template_status(&status(None, Some("RED")), row, at(1))));
        assert_eq!(
            ok(store.read(|tx| tx.blocked_templates())),
            vec![("remind".to_string(), "es".to_string(), "PAUSED".to_string(), 1)]
        );
        assert_eq!(ok(store.read(|tx| tx.planned_of_template("remind"))), vec![306]);
        assert_eq!(ok(store.read(|tx| tx.planned_of_template("other"))), Vec::<i64>::new());
        ok(store.write(|tx| tx.set_template_status(&status(Some("APPROVED"), None), row, at(2))));
        assert!(ok(store.read(|tx| tx.blocked_templates())).is_empty());

        ok(store.write(|tx| tx.remember_user_id("+51999000205", "meta-205", at(3))));
        ok(store.write(|tx| tx.remember_user_id("+51999000205", "meta-205", at(9))));
        assert_eq!(
            fx.int("SELECT updated_at FROM contacts WHERE id = 205"),
            Some(at(3).timestamp_millis()),
            "an unchanged user id is not written again"
        );
        assert_eq!(
            ok(store.read(|tx| tx.phone_by_user_id("meta-205"))),
            Some("+51999000205".into())
        );
        assert_eq!(ok(store.read(|tx| tx.phone_by_user_id("meta-0"))), None);

        ok(store.write(|tx| tx.set_channel_event_reason(row, EventStatus::Refused, "foreign_instance")));
        assert_eq!(
            ok(store.read(|tx| tx.parked_channel_events(10))),
            vec![(
                SOURCE_CLOUD.to_string(),
                "tpl1".to_string(),
                "status".to_string(),
                "refused".to_string(),
                "foreign_instance".to_string(),
                1
            )]
        );
    });
}

#[test]
fn a_changed_number_carries_the_contact_over_and_lists_what_moves() {
    both(|store, fx| {
        fx.commitment(106, 206, at(60).timestamp_millis());
        fx.sql("UPDATE contacts SET opt_out_marketing_at = 5, wa_user_id = 'meta-206' WHERE id = 206");
        let changed = store.write(|tx| tx.change_number("+51999000206", "+51999000777", at(0)));
        let Some(changed) = unless_unported(store.is_pg(), changed) else {
            return;
        };
        let changed = changed.expect("a known number");
        assert_eq!(changed.old_contact, 206);
        assert_eq!(changed.upcoming.iter().map(|c| c.id).collect::<Vec<_>>(), vec![106]);
        assert_eq!(
            fx.int(&format!(
                "SELECT opt_out_marketing_at FROM contacts WHERE id = {}",
                changed.new_contact
            )),
            Some(5)
        );
        let stopped = store.write(|tx| tx.set_marketing_preference("+51999000777", false, at(1), at(1)));
        assert!(ok(stopped));
        assert_eq!(
            fx.int(&format!(
                "SELECT opt_out_marketing_at FROM contacts WHERE id = {}",
                changed.new_contact
            )),
            None
        );
    });
}

#[test]
fn operator_actions_and_resend_acknowledgements_are_recorded_and_listed() {
    both(|store, fx| {
        fx.commitment(107, 207, 0);
        fx.intention(307, 107, "delivered", "");
        fx.intention(308, 107, "planned", "");
        let action = |action: &'static str, intention_id: Option<i64>| OperatorAction {
            operator: "ana",
            role: "supervisor",
            action,
            intention_id,
            commitment_id: Some(107),
            scope: None,
            reason: "customer asked",
            result: "ok",
            detail: intention_id.map(|_| "resend of #307"),
        };
        let first = ok(store.write(|tx| tx.record_operator_action(&action("pause", None), at(0))));
        let second = ok(store.write(|tx| tx.record_operator_action(&action("resend", Some(308)), at(1))));
        assert!(second > first);
        let listed = ok(store.read(|tx| tx.operator_actions(10)));
        assert_eq!(listed.len(), 2);
        let (newest, oldest) = (&listed[0], &listed[1]);
        assert_eq!(
            (newest.id, newest.action.as_str(), newest.intention_id),
            (second, "resend", Some(308))
        );
        assert_eq!((newest.at, newest.detail.as_deref()), (at(1), Some("resend of #307")));
        assert_eq!(
            (oldest.id, oldest.scope.as_deref(), oldest.detail.as_deref()),
            (first, None, None)
        );
        assert_eq!(ok(store.read(|tx| tx.operator_actions(1))).len(), 1);

        let evidence = serde_json::json!([{"intention": 307, "state": "delivered"}]);
        ok(store.write(|tx| {
            tx.record_resend_acknowledgement(
                &NewAcknowledgement {
                    action_id: second,
                    intention_id: 308,
                    original_id: 307,
                    operator: "ana",
                    evidence: &evidence,
                },
                at(1),
            )
        }));
        let ack = ok(store.read(|tx| tx.resend_acknowledgement(308))).expect("recorded");
        assert_eq!(
            ack,
            AcknowledgementRow {
                action_id: second,
                original_id: 307,
                operator: "ana".into(),
                at: at(1),
                evidence
            }
        );
        assert_eq!(ok(store.read(|tx| tx.resend_acknowledgement(307))), None);
    });
}

#[test]
fn a_refused_event_is_counted_each_time_and_closed_by_a_newer_version() {
    both(|store, fx| {
        fx.commitment(108, 208, 0);
        let fields = vec!["starts_at".to_string()];
        let refusal = |fingerprint: &'static str| NewRefusal {
            event_id: "ev-1",
            commitment_ref: "cita-108",
            event_type: "appointment.scheduled",
            version: 1,
            conflict: ConflictKind::SameVersion,
            fields: &fields,
            reason: "same version, other content",
            source: "booking",
            payload: r#"{"id":"ev-1"}"#,
            fingerprint,
        };
        let a = ok(store.write(|tx| tx.record_refusal(&refusal("f1"), at(0))));
        let again = ok(store.write(|tx| tx.record_refusal(&refusal("f1"), at(5))));
        assert_eq!(a, again);
        ok(store.write(|tx| tx.record_refusal(&refusal("f2"), at(6))));
        let rows = ok(store.read(|tx| tx.refused_events("cita-108")));
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!(
            (r.id, r.times, r.open, r.conflict),
            (a, 2, true, ConflictKind::SameVersion)
        );
        assert_eq!((r.first_seen_at, r.last_seen_at), (at(0), at(5)));
        assert_eq!(
            (r.fields.clone(), r.payload.clone()),
            (fields.clone(), serde_json::json!({"id": "ev-1"}))
        );
        assert_eq!(ok(store.read(|tx| tx.counter(&Counter::RefusedEvents.name()))), 3);
        // A newer version of the commitment settles them.
        fx.sql("UPDATE commitments SET version = 2 WHERE id = 108");
        assert!(
            ok(store.read(|tx| tx.refused_events("cita-108")))
                .iter()
                .all(|r| !r.open)
        );
        // Filed under a commitment the ledger does not know: open.
        let unknown = NewRefusal {
            commitment_ref: "cita-0",
            ..refusal("f3")
        };
        ok(store.write(|tx| tx.record_refusal(&unknown, at(7))));
        assert!(ok(store.read(|tx| tx.refused_events("cita-0")))[0].open);
        assert!(ok(store.read(|tx| tx.refused_events("nothing"))).is_empty());
    });
}

#[test]
fn expired_leases_and_the_uncertain_queue_read_alike() {
    both(|store, fx| {
        let now = at(0).timestamp_millis();
        fx.commitment(109, 209, 0);
        let lease = |until: i64| format!("UPDATE intentions SET lease_owner = 'w1', lease_until = {until} WHERE id = ");
        fx.intention(309, 109, "dispatching", &format!("{}309;", lease(now - 1)));
        fx.intention(310, 109, "dispatching", &format!("{}310;", lease(now + 60_000)));
        fx.intention(311, 109, "dispatching", &format!("{}311;", lease(now - 5)));
        fx.attempt(409, 309, 1, Some(900), "failed", None);
        fx.attempt(410, 309, 2, None, "started", None);
        fx.attempt(411, 309, 3, None, "started", None);
        fx.attempt(412, 310, 1, None, "started", None);

        let facts = ok(store.read(|tx| RecoveryTx::expired_leases(tx, at(0))));
        let open: Vec<(i64, Vec<i64>)> = facts
            .iter()
            .map(|f| (f.intention_id, f.open_attempts.clone()))
            .collect();
        assert_eq!(open, vec![(309, vec![410, 411]), (311, vec![])]);
        assert_eq!(
            (facts[0].owner.as_deref(), facts[0].state),
            (Some("w1"), IntentionState::Dispatching)
        );

        let of = ok(store.read(|tx| RecoveryTx::lease_facts_of_attempts(tx, &[412, 411, 410])));
        let open: Vec<(i64, Vec<i64>)> = of.iter().map(|f| (f.intention_id, f.open_attempts.clone())).collect();
        assert_eq!(open, vec![(310, vec![412]), (309, vec![410, 411])]);
        match store.read(|tx| tx.lease_facts_of_attempts(&[999])) {
            Err(StoreError::NoAttempt(999)) => {}
            other => panic!("{other:?}"),
        }

        // Uncertain rows: one due now, one held for later; a planned one.
        fx.intention(312, 109, "uncertain", "");
        fx.intention(
            313,
            109,
            "uncertain",
            &format!(
                "UPDATE intentions SET next_attempt_at = {} WHERE id = 313;",
                now + 120_000
            ),
        );
        fx.intention(
            314,
            109,
            "planned",
            &format!("UPDATE intentions SET due_at = {} WHERE id = 314;", now + 300_000),
        );
        fx.attempt(413, 312, 1, Some(1000), "ambiguous", Some("wu"));
        fx.attempt(414, 312, 2, Some(1001), "not_sent", None);
        assert_eq!(ok(store.read(|tx| tx.next_due())), Some(from_ms(0)));
        assert_eq!(ok(store.read(|tx| tx.count_due(at(0)))), 0);
        assert_eq!(ok(store.read(|tx| tx.count_due(at(5)))), 1);
        let day = "2026-12-01".parse().unwrap();
        let ids = |rows: Vec<unavez_ledger::store::IntentionRow>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(ok(store.read(|tx| tx.day_intentions(day, &[])))).len(), 6);
        assert_eq!(
            ids(ok(store.read(|tx| tx.day_intentions(day, &[IntentionState::Uncertain])))),
            vec![312, 313]
        );
        ok(store.write(|tx| tx.hold_uncertain(312, at(1))));
        ok(store.write(|tx| tx.hold_uncertain(314, at(9))));
        assert_eq!(
            fx.int("SELECT next_attempt_at FROM intentions WHERE id = 312"),
            Some(at(1).timestamp_millis())
        );
        assert_eq!(fx.int("SELECT next_attempt_at FROM intentions WHERE id = 314"), None);
        assert_eq!(ok(store.read(|tx| tx.next_due())), Some(at(1)));

        // Taking the queue reads the intention and its contact through
        // other modules: asserted wherever those run.
        let taken = store.write(|tx| tx.take_uncertain(at(1), Duration::minutes(10), 10));
        if let Some(taken) = unless_unported(store.is_pg(), taken) {
            assert_eq!(taken.iter().map(|t| t.intention.id).collect::<Vec<_>>(), vec![312]);
            let last = taken[0].last_attempt.as_ref().expect("an attempt");
            assert_eq!((last.id, last.message_id.as_deref()), (413, Some("wu")));
            assert_eq!(taken[0].tries, 0);
            assert_eq!(
                fx.int("SELECT next_attempt_at FROM intentions WHERE id = 312"),
                Some(at(11).timestamp_millis())
            );
        }
    });
}
