//! Cloud API status webhooks over real HTTP against a real ledger file:
//! deduplication (sequential and concurrent), monotonic application,
//! signatures, malformed and oversized bodies, pending correlation.

mod webhooks_support;

use unavez::domain::state::{IntentionState, Signal};
use unavez::domain::status::CloudStatus;
use unavez::server::cloud::{BatchSummary, Notification};
use unavez::server::inbound::InboundMessage;
use unavez::store::{Cause, Entry};
use unavez_testkit::{Backend, on_both};
use webhooks_support::*;

fn webhook_rows(h: &Harness, id: i64) -> Vec<(String, bool, Option<String>)> {
    h.history(id)
        .into_iter()
        .filter(|r| r.cause == "webhook")
        .map(|r| (r.signal, r.applied, r.note))
        .collect()
}

#[test]
fn meta_shaped_fixtures_parse() {
    for name in [
        "status_sent.json",
        "status_delivered.json",
        "status_read.json",
        "status_failed.json",
    ] {
        let n: Notification = serde_json::from_str(&fixture(name)).unwrap();
        assert_eq!(n.object.as_deref(), Some("whatsapp_business_account"));
        let st: CloudStatus = serde_json::from_value(n.entry[0].changes[0].value["statuses"][0].clone()).unwrap();
        assert_eq!(st.id, FIXTURE_WAMID, "{name}");
        assert_eq!(st.biz_opaque_callback_data.as_deref(), Some(FIXTURE_KEY));
        assert!(st.report().signal.is_some(), "{name}");
    }
    let n: Notification = serde_json::from_str(&fixture("status_failed.json")).unwrap();
    let st: CloudStatus = serde_json::from_value(n.entry[0].changes[0].value["statuses"][0].clone()).unwrap();
    assert_eq!(st.report().error_code.as_deref(), Some("131026"));
    for (name, want) in [
        ("inbound_text.json", "CONFIRMO"),
        ("inbound_button.json", "SI"),
        ("inbound_interactive.json", "REPROGRAMAR"),
    ] {
        let n: Notification = serde_json::from_str(&fixture(name)).unwrap();
        let m: InboundMessage = serde_json::from_value(n.entry[0].changes[0].value["messages"][0].clone()).unwrap();
        assert_eq!(m.phone().as_deref(), Some(PHONE));
        assert_eq!(m.candidates()[0], want, "{name}");
    }
}

async fn the_same_status_ten_times_and_fifty_in_parallel_applies_once(backend: Backend) {
    let h = Harness::start(backend).await;
    h.schedule("cita-1042", 3);
    let id = h.accept(FIXTURE_KEY, Some(FIXTURE_WAMID));

    let delivered = fixture("status_delivered.json");
    for _ in 0..10 {
        let r = h.post_cloud(&delivered).await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Delivered);
    let rows = webhook_rows(&h, id);
    assert_eq!(
        rows.iter().filter(|r| r.0 == "webhook:delivered" && r.1).count(),
        1,
        "{rows:?}"
    );
    // Copies are counted on the stored event, not as history rows.
    assert!(!rows.iter().any(|r| r.0 == "duplicate_webhook"), "{rows:?}");
    assert_eq!(h.counter("duplicate_events_cloud"), 9);
    let stored = h.store().read(|tx| tx.extra_copies("cloud")).unwrap();
    assert_eq!(stored, 9);

    let read = fixture("status_read.json");
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let client = h.client.clone();
        let url = format!("{}/webhooks/whatsapp", h.base);
        let body = read.clone();
        let sig = unavez::channel::motor_event::sign(APP_SECRET.as_bytes(), body.as_bytes());
        tasks.push(tokio::spawn(async move {
            client
                .post(url)
                .header("X-Hub-Signature-256", sig)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Read);
    let rows = webhook_rows(&h, id);
    assert_eq!(
        rows.iter().filter(|r| r.0 == "webhook:read" && r.1).count(),
        1,
        "{rows:?}"
    );
    assert!(!rows.iter().any(|r| r.0 == "duplicate_webhook"), "{rows:?}");
    assert_eq!(h.counter("duplicate_events_cloud"), 9 + 49);
    assert_eq!(h.store().read(|tx| tx.extra_copies("cloud")).unwrap(), 9 + 49);
    let mut store = h.store();
    let events = store.read(|tx| tx.channel_events(1000)).unwrap();
    assert_eq!(events.len(), 2, "one stored row per distinct event: {events:?}");

    let metrics = h.metrics().await;
    assert!(
        metrics.contains("unavez_duplicates_blocked_total{kind=\"webhook_events\",source=\"cloud\"} 58"),
        "{metrics}"
    );
    assert!(metrics.contains("unavez_intentions{state=\"read\"} 1"), "{metrics}");
    assert!(metrics.contains("unavez_read 1"), "{metrics}");
    h.stop().await;
}

async fn out_of_order_statuses_end_by_rank_with_every_signal_in_history(backend: Backend) {
    let h = Harness::start(backend).await;
    let planned = h.schedule("cita-7", 3);
    let keys: Vec<String> = planned.iter().map(|i| i.key.clone()).collect();
    let (a, b, c) = (&keys[0], &keys[1], &keys[2]);
    let ids: Vec<i64> = [(a, "wamid.A"), (b, "wamid.B"), (c, "wamid.C")]
        .iter()
        .map(|(k, w)| h.accept(k, Some(w)))
        .collect();

    // delivered before sent
    for f in ["status_delivered.json", "status_sent.json"] {
        assert_eq!(h.post_cloud(&status_fixture(f, "wamid.A", a)).await.status(), 200);
    }
    // read before delivered
    for f in ["status_read.json", "status_delivered.json"] {
        assert_eq!(h.post_cloud(&status_fixture(f, "wamid.B", b)).await.status(), 200);
    }
    // failed after delivered
    for f in ["status_delivered.json", "status_failed.json"] {
        assert_eq!(h.post_cloud(&status_fixture(f, "wamid.C", c)).await.status(), 200);
    }
    assert_eq!(h.intention(a).state, IntentionState::Delivered);
    assert_eq!(h.intention(b).state, IntentionState::Read);
    assert_eq!(h.intention(c).state, IntentionState::Delivered);

    let sig = |id: i64| webhook_rows(&h, id).into_iter().map(|r| (r.0, r.1)).collect::<Vec<_>>();
    assert_eq!(
        sig(ids[0]),
        [("webhook:delivered".into(), true), ("webhook:sent".into(), false)]
    );
    assert_eq!(
        sig(ids[1]),
        [("webhook:read".into(), true), ("webhook:delivered".into(), false)]
    );
    assert_eq!(
        sig(ids[2]),
        [("webhook:delivered".into(), true), ("webhook:failed".into(), false)]
    );
    let failed_note = webhook_rows(&h, ids[2]).pop().unwrap().2.unwrap();
    assert!(
        failed_note.contains("failed_after_delivery") && failed_note.contains("131026"),
        "{failed_note}"
    );
    let lower_note = webhook_rows(&h, ids[0]).pop().unwrap().2.unwrap();
    assert!(lower_note.contains("lower_rank"), "{lower_note}");

    let metrics = h.metrics().await;
    assert!(metrics.contains("code=\"131026\"} 1"), "{metrics}");
    h.stop().await;
}

async fn bad_signatures_bad_json_and_big_bodies_are_refused_without_effect(backend: Backend) {
    let h = Harness::start_with(backend, |c| c.server.body_limit_bytes = 4096).await;
    h.schedule("cita-1042", 3);
    h.accept(FIXTURE_KEY, Some(FIXTURE_WAMID));
    let body = fixture("status_delivered.json");
    let url = format!("{}/webhooks/whatsapp", h.base);
    let good_sig = unavez::channel::motor_event::sign(APP_SECRET.as_bytes(), body.as_bytes());

    // Tampered body with the original signature.
    let tampered = body.replace("delivered", "read");
    let r = h
        .client
        .post(&url)
        .header("X-Hub-Signature-256", &good_sig)
        .body(tampered)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Wrong secret.
    let wrong = unavez::channel::motor_event::sign(b"otro", body.as_bytes());
    let r = h
        .client
        .post(&url)
        .header("X-Hub-Signature-256", wrong)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // No header.
    let r = h.client.post(&url).body(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(h.counter("webhook_rejected:cloud:signature"), 3);
    let mut store = h.store();
    assert!(
        store.read(|tx| tx.channel_events(10)).unwrap().is_empty(),
        "nothing stored"
    );
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Accepted);

    // Malformed JSON, correctly signed: 400 naming the parse error.
    let r = h.post_cloud("{\"entry\": [").await;
    assert_eq!(r.status(), 400);
    let msg = r.text().await.unwrap();
    assert!(msg.contains("malformed notification JSON"), "{msg}");
    assert_eq!(h.counter("webhook_rejected:cloud:malformed"), 1);

    // Over the body limit.
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(10_000));
    let r = h.post_cloud(&big).await;
    assert_eq!(r.status(), 413);
    assert_eq!(h.counter("webhook_rejected:cloud:too_large"), 1);

    // Unknown fields and other change kinds are tolerated.
    let r = h.post_cloud(r#"{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"account_update","value":{"x":1}}]}],"new":true}"#).await;
    assert_eq!(r.status(), 200);
    // A bad status object is rejected alone; the good one next to it applies.
    let batch = body.replace("\"statuses\": [", "\"statuses\": [ {\"status\": \"sent\"},");
    let r = h.post_cloud(&batch).await;
    assert_eq!(r.status(), 200);
    let s: BatchSummary = r.json().await.unwrap();
    assert_eq!((s.received, s.applied, s.rejected.len()), (2, 1, 1), "{s:?}");
    assert!(s.rejected[0].1.contains("id"), "{s:?}");
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Delivered);

    let metrics = h.metrics().await;
    assert!(
        metrics.contains("unavez_webhook_rejected_total{source=\"cloud\",reason=\"signature\"} 3"),
        "{metrics}"
    );
    h.stop().await;
}

async fn statuses_for_unknown_messages_wait_and_apply_when_correlated(backend: Backend) {
    let h = Harness::start(backend).await;
    let planned = h.schedule("cita-9", 3);
    let (k1, k2) = (planned[0].key.clone(), planned[1].key.clone());
    h.accept(&k1, None);
    h.accept(&k2, None);

    // Unknown wamid, no callback data: kept pending, answered 200.
    let body = status_fixture("status_delivered.json", "wamid.LATE", "")
        .replace(",\n                \"biz_opaque_callback_data\": \"\"", "");
    assert!(!body.contains("biz_opaque"), "{body}");
    let r = h.post_cloud(&body).await;
    assert_eq!(r.status(), 200);
    let s: BatchSummary = r.json().await.unwrap();
    assert_eq!(s.pending, 1);
    assert_eq!(h.intention(&k1).state, IntentionState::Accepted);

    // The dispatcher records the message id, then applies what waited.
    let mut store = h.store();
    let id1 = h.intention(&k1).id;
    let applied = store
        .write(|tx| {
            let now = chrono::Utc::now();
            tx.set_provider_refs(id1, None, Some("wamid.LATE"), now)?;
            unavez::status::apply_pending_for(tx, id1, now)
        })
        .unwrap();
    assert_eq!(applied, 1);
    assert_eq!(h.intention(&k1).state, IntentionState::Delivered);
    assert_eq!(store.read(|tx| tx.pending_status_count()).unwrap(), 0);

    // Unknown wamid but carrying the key: correlated at once, wamid recorded.
    let r = h.post_cloud(&status_fixture("status_sent.json", "wamid.K2", &k2)).await;
    assert_eq!(r.status(), 200);
    let row = h.intention(&k2);
    assert_eq!(
        (row.state, row.provider_message_id.as_deref()),
        (IntentionState::Sent, Some("wamid.K2"))
    );

    // A pending status picked up by the periodic sweep of `serve`.
    let k3 = planned[2].key.clone();
    h.accept(&k3, None);
    let body = status_fixture("status_read.json", "wamid.SWEPT", "x")
        .replace(",\n                \"biz_opaque_callback_data\": \"x\"", "");
    assert_eq!(h.post_cloud(&body).await.status(), 200);
    let id3 = h.intention(&k3).id;
    store
        .write(|tx| tx.set_provider_refs(id3, None, Some("wamid.SWEPT"), chrono::Utc::now()))
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while h.intention(&k3).state != IntentionState::Read {
        assert!(
            std::time::Instant::now() < deadline,
            "sweep did not apply the pending status"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    h.stop().await;
}

async fn a_status_resolving_an_uncertain_send_names_its_evidence(backend: Backend) {
    let h = Harness::start(backend).await;
    h.schedule("cita-1042", 3);
    let mut store = h.store();
    let id = store
        .write(|tx| {
            let id = tx.intention_id(FIXTURE_KEY)?.unwrap();
            let now = chrono::Utc::now();
            let e = Entry {
                signal: "claim",
                cause: Cause::Dispatcher,
                evidence: None,
                note: None,
                commitment_version: None,
            };
            tx.signal(id, Signal::Claim, &e, now)?;
            let e = Entry {
                signal: "timeout",
                cause: Cause::Dispatcher,
                evidence: None,
                note: None,
                commitment_version: None,
            };
            tx.signal(id, Signal::Unknown, &e, now)?;
            Ok::<_, unavez::store::StoreError>(id)
        })
        .unwrap();
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Uncertain);
    // The wamid was never recorded (the response was lost): the key correlates.
    assert_eq!(h.post_cloud(&fixture("status_delivered.json")).await.status(), 200);
    let row = h.intention(FIXTURE_KEY);
    assert_eq!(row.state, IntentionState::Delivered);
    assert_eq!(row.provider_message_id.as_deref(), Some(FIXTURE_WAMID));
    let last = h.history(id).pop().unwrap();
    assert_eq!(
        last.evidence.as_deref(),
        Some(format!("cloud:{FIXTURE_WAMID}:delivered:1750857390").as_str())
    );
    assert!(last.note.unwrap().contains("resolves uncertain"));
    h.stop().await;
}

async fn subscription_verification_and_health(backend: Backend) {
    let h = Harness::start(backend).await;
    let url = format!("{}/webhooks/whatsapp", h.base);
    let ok = h
        .client
        .get(&url)
        .query(&[
            ("hub.mode", "subscribe"),
            ("hub.verify_token", VERIFY_TOKEN),
            ("hub.challenge", "1158201444"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "1158201444");
    let bad = h
        .client
        .get(&url)
        .query(&[
            ("hub.mode", "subscribe"),
            ("hub.verify_token", "nope"),
            ("hub.challenge", "1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 403);
    let health = h.client.get(format!("{}/healthz", h.base)).send().await.unwrap();
    let status = health.status();
    assert_eq!(status, 200, "{}", health.text().await.unwrap());
    h.stop().await;
}

async fn a_batch_of_a_thousand_statuses_is_applied_in_order(backend: Backend) {
    let h = Harness::start(backend).await;
    let planned = h.schedule("cita-1042", 3);
    let ids: Vec<i64> = planned
        .iter()
        .enumerate()
        .map(|(i, p)| h.accept(&p.key, Some(&format!("wamid.N{i}"))))
        .collect();
    // 1,000 statuses: sent/delivered/read for three known messages, the
    // rest for unknown ones (kept pending), all in one notification.
    let mut statuses = Vec::new();
    for round in 0..333 {
        for (i, st) in ["sent", "delivered", "read"].iter().enumerate() {
            let wamid = if round == 0 {
                format!("wamid.N{i}")
            } else {
                format!("wamid.U{round}-{i}")
            };
            statuses.push(
                serde_json::json!({"id": wamid, "status": st, "timestamp": (1_750_000_000 + round).to_string(),
                                             "recipient_id": "51987654321"}),
            );
        }
    }
    statuses.push(serde_json::json!({"id": "wamid.N0", "status": "delivered", "timestamp": "1"}));
    assert_eq!(statuses.len(), 1000);
    let body = serde_json::json!({"object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp", "statuses": statuses}}]}]})
    .to_string();
    let r = h.post_cloud(&body).await;
    assert_eq!(r.status(), 200);
    let s: BatchSummary = r.json().await.unwrap();
    assert_eq!(
        (s.received, s.applied, s.pending, s.duplicates),
        (1000, 4, 996, 0),
        "{s:?}"
    );
    // N0: "sent", then "delivered" at the end of the batch.
    assert_eq!(h.intention(&planned[0].key).state, IntentionState::Delivered);
    assert_eq!(h.intention(&planned[1].key).state, IntentionState::Delivered);
    assert_eq!(h.intention(&planned[2].key).state, IntentionState::Read);
    let rows = webhook_rows(&h, ids[0]);
    assert_eq!(
        rows.iter().map(|r| (r.0.as_str(), r.1)).collect::<Vec<_>>(),
        [("webhook:sent", true), ("webhook:delivered", true)]
    );
    h.stop().await;
}

async fn a_second_message_id_for_one_key_is_flagged(backend: Backend) {
    let h = Harness::start(backend).await;
    h.schedule("cita-1042", 3);
    let id = h.accept(FIXTURE_KEY, Some("wamid.FIRST"));
    assert_eq!(h.post_cloud(&fixture("status_sent.json")).await.status(), 200);
    let flagged: Vec<_> = h
        .history(id)
        .into_iter()
        .filter(|r| r.signal == "second_message_id")
        .collect();
    assert_eq!(flagged.len(), 1);
    assert!(flagged[0].note.as_deref().unwrap().contains("possible duplicate send"));
    assert_eq!(
        h.intention(FIXTURE_KEY).provider_message_id.as_deref(),
        Some("wamid.FIRST")
    );
    assert_eq!(h.counter("second_message_id"), 1);
    h.stop().await;
}

async fn a_status_before_the_send_answer_applies_when_the_attempt_is_recorded(backend: Backend) {
    use unavez::dispatch::finish::finish_attempt;
    use unavez::store::{AttemptResult, Backoff, RetryPolicy};
    let h = Harness::start(backend).await;
    h.schedule("cita-1042", 3);
    let mut store = h.store();
    // Claimed and attempt started; the channel's answer is not recorded yet.
    let (id, attempt) = store
        .write(|tx| {
            let id = tx.intention_id(FIXTURE_KEY)?.unwrap();
            let e = Entry {
                signal: "claim",
                cause: Cause::Dispatcher,
                evidence: None,
                note: None,
                commitment_version: None,
            };
            tx.signal(id, Signal::Claim, &e, chrono::Utc::now())?;
            let a = tx.start_attempt(id, 1, "w1", "cloud", 1, chrono::Utc::now())?;
            Ok::<_, unavez::store::StoreError>((id, a))
        })
        .unwrap();
    // Meta's "sent" arrives first, without callback data: pending.
    let body = status_fixture("status_sent.json", "wamid.EARLY", "k")
        .replace(",\n                \"biz_opaque_callback_data\": \"k\"", "");
    let s: BatchSummary = h.post_cloud(&body).await.json().await.unwrap();
    assert_eq!(s.pending, 1);
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Dispatching);
    // The send's answer is recorded: acceptance first, then the early status.
    store
        .write(|tx| {
            let result = AttemptResult::Acknowledged {
                evidence: Some(Signal::Accepted),
                command_id: None,
                message_id: Some("wamid.EARLY"),
                http_status: Some(200),
                detail: None,
            };
            finish_attempt(
                tx,
                attempt,
                &result,
                Cause::Dispatcher,
                &RetryPolicy {
                    max_attempts: 3,
                    backoff: Backoff::new(vec![1]),
                },
                chrono::Utc::now(),
            )
        })
        .unwrap();
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Sent);
    let moves: Vec<(String, String)> = h
        .history(id)
        .into_iter()
        .filter(|r| r.applied)
        .map(|r| (r.signal, r.to_state))
        .collect();
    assert_eq!(
        moves[moves.len() - 2..],
        [
            ("accepted".to_string(), "accepted".to_string()),
            ("webhook:sent".to_string(), "sent".to_string())
        ]
    );
    assert_eq!(store.read(|tx| tx.pending_status_count()).unwrap(), 0);
    h.stop().await;
}

on_both!(
    async:
    the_same_status_ten_times_and_fifty_in_parallel_applies_once,
    out_of_order_statuses_end_by_rank_with_every_signal_in_history,
    bad_signatures_bad_json_and_big_bodies_are_refused_without_effect,
    statuses_for_unknown_messages_wait_and_apply_when_correlated,
    a_status_resolving_an_uncertain_send_names_its_evidence,
    subscription_verification_and_health,
    a_batch_of_a_thousand_statuses_is_applied_in_order,
    a_second_message_id_for_one_key_is_flagged,
    a_status_before_the_send_answer_applies_when_the_attempt_is_recorded,
);
