//! `POST /v1/bookings/events` and `POST /webhooks/motor` over real HTTP.

mod webhooks_support;

use chrono::{Duration, SecondsFormat, Utc};
use serde_json::{Value, json};
use unavez::domain::state::IntentionState;
use webhooks_support::*;

fn scheduled(event_id: &str, reference: &str, phone: &str) -> Value {
    let starts = (Utc::now() + Duration::days(3)).to_rfc3339_opts(SecondsFormat::Secs, true);
    json!({"event_id": event_id, "type": "appointment.scheduled", "ref": reference, "starts_at": starts,
           "contact": {"phone": phone, "name": "Ana"}, "service": "Odontología", "unknown_field": [1, 2]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_booking_event_posted_twice_changes_once() {
    let h = Harness::start().await;
    let body = scheduled("evt-1", "cita-1", PHONE).to_string();
    let r = h.post_bookings(&body).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["stored"], 1, "{v}");
    assert_eq!(v["results"][0]["outcome"], "stored");
    let before = h.intentions("cita-1");
    assert_eq!(before.len(), 3);

    let r = h.post_bookings(&body).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["results"][0]["outcome"], "duplicate", "{v}");
    assert_eq!(h.intentions("cita-1").len(), 3);
    let mut store = h.store();
    assert_eq!(store.read(|tx| tx.commitment_events("cita-1")).unwrap().len(), 1);
    assert_eq!(h.counter("duplicate_events"), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_events_get_a_reason_each_and_nothing_half_applied() {
    let h = Harness::start().await;
    let batch = json!([
        scheduled("evt-a", "cita-a", PHONE),
        scheduled("evt-b", "cita-b", "987654321"),
        // Valid shape, refused by the ledger: reschedule of an unknown ref.
        {"event_id": "evt-c", "type": "appointment.rescheduled", "ref": "cita-zz",
         "starts_at": "2030-01-01T09:00:00-05:00"},
        {"event_id": "evt-d", "type": "appointment.moved", "ref": "cita-d"},
    ]);
    let r = h.post_bookings(&batch.to_string()).await;
    assert_eq!(r.status(), 207);
    let v: Value = r.json().await.unwrap();
    let outcomes: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["stored", "rejected", "rejected", "rejected"], "{v}");
    assert!(
        v["results"][1]["reason"].as_str().unwrap().contains("contact.phone"),
        "{v}"
    );
    assert!(v["results"][2]["reason"].as_str().unwrap().contains("cita-zz"), "{v}");
    assert!(v["results"][3]["reason"].as_str().unwrap().contains("type"), "{v}");
    let mut store = h.store();
    for r in ["cita-b", "cita-zz", "cita-d"] {
        assert!(store.read(|tx| tx.commitment(r)).unwrap().is_none(), "{r}");
        assert!(
            store.read(|tx| tx.commitment_events(r)).unwrap().is_empty(),
            "{r}: no half-applied log row"
        );
    }
    assert_eq!(h.intentions("cita-a").len(), 3);
    // All rejected → 422.
    let r = h
        .post_bookings(&json!({"event_id": "x", "type": "appointment.scheduled", "ref": "c"}).to_string())
        .await;
    assert_eq!(r.status(), 422);

    // Authentication and malformed bodies.
    let url = format!("{}/v1/bookings/events", h.base);
    let r = h
        .client
        .post(&url)
        .bearer_auth("wrong")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = h.client.post(&url).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = h.post_bookings("[{\"event_id\": ").await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("malformed JSON"));
    assert_eq!(h.counter("webhook_rejected:bookings:token"), 2);
    h.stop().await;
}

fn motor_event(event_id: &str, key: &str, estado: &str, resolves: bool) -> String {
    json!({"event_id": event_id, "type": "comando.estado", "instance_id": "clinica-principal",
           "command_id": "cmd-77", "idempotency_key": key, "estado": estado,
           "provider_message_id": "wamid.M77", "resolves_ambiguous": resolves,
           "occurred_at": "2026-11-29T15:00:00Z", "extra": {"tolerated": true}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_events_apply_once_and_resolve_ambiguous_commands() {
    let h = Harness::start().await;
    h.schedule("cita-1042", 3);
    let id = h.accept(FIXTURE_KEY, None);

    // The engine says ambiguous before we heard back: nothing regresses.
    let r = h.post_motor(&motor_event("evt-1", FIXTURE_KEY, "ambiguo", false)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Accepted);
    // Its resolution, delivered three times.
    for _ in 0..3 {
        assert_eq!(
            h.post_motor(&motor_event("evt-2", FIXTURE_KEY, "entregado", true))
                .await
                .status(),
            200
        );
    }
    let row = h.intention(FIXTURE_KEY);
    assert_eq!(row.state, IntentionState::Delivered);
    assert_eq!(row.provider_command_id.as_deref(), Some("cmd-77"));
    assert_eq!(row.provider_message_id.as_deref(), Some("wamid.M77"));
    let hist = h.history(id);
    let applied: Vec<_> = hist
        .iter()
        .filter(|r| r.signal == "webhook:entregado" && r.applied)
        .collect();
    assert_eq!(applied.len(), 1);
    assert!(applied[0].note.as_deref().unwrap().contains("ambiguous"));
    assert_eq!(hist.iter().filter(|r| r.signal == "duplicate_webhook").count(), 2);
    assert_eq!(h.counter("duplicate_events_motor"), 2);

    // Wrong signature: refused, nothing stored.
    let url = format!("{}/webhooks/motor", h.base);
    let body = motor_event("evt-3", FIXTURE_KEY, "leido", false);
    let r = h
        .client
        .post(&url)
        .header("X-Unavez-Signature", "sha256=00")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Delivered);
    // Malformed: 400 naming the field.
    let r = h.post_motor(r#"{"event_id":"e"}"#).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("missing field"));
    assert_eq!(h.counter("webhook_rejected:motor:signature"), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncertain_intention_resolved_by_the_engine_records_the_evidence() {
    let h = Harness::start().await;
    h.schedule("cita-1042", 3);
    let mut store = h.store();
    let id = store
        .write(|tx| {
            use unavez::domain::state::Signal;
            use unavez::store::{Cause, Entry};
            let id = tx.intention_id(FIXTURE_KEY)?.unwrap();
            let e = Entry {
                signal: "x",
                cause: Cause::Dispatcher,
                evidence: None,
                note: None,
                commitment_version: None,
            };
            tx.signal(id, Signal::Claim, &e, Utc::now())?;
            tx.signal(id, Signal::Unknown, &e, Utc::now())?;
            Ok::<_, unavez::store::StoreError>(id)
        })
        .unwrap();
    assert_eq!(
        h.post_motor(&motor_event("evt-9", FIXTURE_KEY, "enviado", true))
            .await
            .status(),
        200
    );
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Sent);
    let last = h.history(id).pop().unwrap();
    assert_eq!(last.evidence.as_deref(), Some("motor:evt-9"));
    assert!(last.note.unwrap().contains("resolves uncertain"));
    h.stop().await;
}
