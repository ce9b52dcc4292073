//! `POST /v1/bookings/events` and `POST /webhooks/motor` over real HTTP,
//! and the ingest endpoint of a real `unavez serve` process.

mod dispatch_support;
mod webhooks_support;

use chrono::{Duration, SecondsFormat, Utc};
use serde_json::{Value, json};
use unavez::domain::state::IntentionState;
use unavez_testkit::{Backend, on_both};
use webhooks_support::*;

fn scheduled(event_id: &str, reference: &str, phone: &str) -> Value {
    let starts = (Utc::now() + Duration::days(3)).to_rfc3339_opts(SecondsFormat::Secs, true);
    json!({"event_id": event_id, "type": "appointment.scheduled", "ref": reference, "starts_at": starts,
           "contact": {"phone": phone, "name": "Ana"}, "service": "Odontología", "unknown_field": [1, 2]})
}

async fn a_booking_event_posted_twice_changes_once(backend: Backend) {
    let h = Harness::start(backend).await;
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

async fn invalid_events_get_a_reason_each_and_nothing_half_applied(backend: Backend) {
    let h = Harness::start(backend).await;
    let batch = json!([
        scheduled("evt-a", "cita-a", PHONE),
        scheduled("evt-b", "cita-b", "987654321"),
        // Valid shape, refused by the ledger: reschedule of an unknown ref.
        {"event_id": "evt-c", "type": "appointment.rescheduled", "ref": "cita-zz",
         "starts_at": "2026-12-15T09:00:00-05:00"},
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

/// `appointment.scheduled` at an explicit version, three days ahead.
fn versioned(event_id: &str, reference: &str, version: i64, place: &str, phone: &str) -> Value {
    let starts = (Utc::now() + Duration::days(3))
        .date_naive()
        .and_hms_opt(14, 30, 0)
        .unwrap()
        .and_utc();
    json!({"event_id": event_id, "type": "appointment.scheduled", "ref": reference, "version": version,
           "starts_at": starts.to_rfc3339_opts(SecondsFormat::Secs, true),
           "contact": {"phone": phone, "name": "Ana"}, "service": "Odontología", "location": place})
}

fn outcomes(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap().to_string())
        .collect()
}

/// (key, state, recipient) of a commitment's intentions.
fn snapshot(h: &Harness, reference: &str) -> Vec<(String, IntentionState, String)> {
    let mut rows: Vec<_> = h
        .intentions(reference)
        .into_iter()
        .map(|i| (i.key.to_string(), i.state, i.recipient))
        .collect();
    rows.sort();
    rows
}

async fn a_changed_event_at_the_same_version_is_rejected_alone_every_time_and_kept(backend: Backend) {
    let h = Harness::start(backend).await;
    let other_phone = "+51911222333";
    let r = h
        .post_bookings(&versioned("evt-1", "cita-1", 1, "Sede A", PHONE).to_string())
        .await;
    assert_eq!(r.status(), 200);
    let before = snapshot(&h, "cita-1");
    assert_eq!(before.len(), 3);

    let batch = json!([
        // The issue's case: the same version, another place.
        versioned("evt-2", "cita-1", 1, "Sede B", PHONE),
        // An unrelated event in the same batch.
        versioned("evt-3", "cita-2", 1, "Sede A", other_phone),
        // A phone change at the same version (a privacy leak if ignored).
        versioned("evt-4", "cita-1", 1, "Sede A", other_phone),
        // An event id seen before, with other content.
        versioned("evt-1", "cita-1", 1, "Sede C", PHONE),
    ]);
    for round in 0..2 {
        let r = h.post_bookings(&batch.to_string()).await;
        assert_eq!(r.status(), 207, "round {round}");
        let v: Value = r.json().await.unwrap();
        let other = if round == 0 { "stored" } else { "duplicate" };
        assert_eq!(
            outcomes(&v),
            ["rejected", other, "rejected", "rejected"],
            "round {round}: {v}"
        );
        let reason = |i: usize| v["results"][i]["reason"].as_str().unwrap().to_string();
        assert!(reason(0).starts_with("version: cita-1 is already at version 1"), "{v}");
        assert!(reason(0).contains("(location)"), "{v}");
        assert_eq!(v["results"][0]["detail"]["conflict"]["fields"], json!(["location"]));
        assert!(
            reason(2).starts_with("version: ") && reason(2).contains("(contact.phone)"),
            "{v}"
        );
        assert!(
            reason(3).starts_with("version: event_id evt-1 was already received"),
            "{v}"
        );
        assert!(reason(3).contains("(location)"), "{v}");
    }
    // Nothing of the refused events was applied: same place, same phone,
    // the same planned messages to the same number.
    assert_eq!(snapshot(&h, "cita-1"), before);
    let mut store = h.store();
    let c = store.read(|tx| tx.commitment("cita-1")).unwrap().unwrap().commitment;
    assert_eq!(
        (c.version, c.location.as_deref(), c.phone.as_deref()),
        (1, Some("Sede A"), Some(PHONE))
    );
    assert_eq!(h.intentions("cita-2").len(), 3, "the rest of the batch was applied");
    // Kept, each once per content, counted per presentation.
    let refused = store.read(|tx| tx.refused_events("cita-1")).unwrap();
    let kept: Vec<(&str, &str, i64, bool)> = refused
        .iter()
        .map(|r| (r.event_id.as_str(), r.conflict.as_str(), r.times, r.open))
        .collect();
    assert_eq!(
        kept,
        [
            ("evt-2", "same_version", 2, true),
            ("evt-4", "same_version", 2, true),
            ("evt-1", "event_id_reused", 2, true)
        ]
    );
    assert_eq!(refused[1].fields, ["contact.phone"]);
    assert_eq!(refused[1].payload["contact"]["phone"], other_phone);
    // …and shown to a person in Atención.
    let att = store
        .read(|tx| tx.attention(&unavez::store::AttentionQuery::new(Utc::now())))
        .unwrap();
    let refused_rows = att
        .rows
        .iter()
        .filter(|r| r.kind == unavez::store::RowKind::RefusedEvent)
        .count();
    assert_eq!(refused_rows, 3);

    // The booking system settles it with a higher version.
    let r = h
        .post_bookings(&versioned("evt-5", "cita-1", 2, "Sede B", PHONE).to_string())
        .await;
    assert_eq!(r.status(), 200);
    let c = store.read(|tx| tx.commitment("cita-1")).unwrap().unwrap().commitment;
    assert_eq!((c.version, c.location.as_deref()), (2, Some("Sede B")));
    assert!(
        store
            .read(|tx| tx.refused_events("cita-1"))
            .unwrap()
            .iter()
            .all(|r| !r.open)
    );
    h.stop().await;
}

async fn oversize_fields_are_rejected_per_event_naming_the_field(backend: Backend) {
    let h = Harness::start(backend).await;
    let mut long_name = scheduled("evt-1", "cita-1", PHONE);
    long_name["contact"]["name"] = "n".repeat(121).into();
    let mut long_place = scheduled("evt-2", "cita-2", PHONE);
    long_place["location"] = "p".repeat(201).into();
    long_place["note"] = "x".repeat(1001).into();
    let batch = json!([long_name, long_place, scheduled("evt-3", "cita-3", PHONE)]);
    let r = h.post_bookings(&batch.to_string()).await;
    assert_eq!(r.status(), 207);
    let v: Value = r.json().await.unwrap();
    assert_eq!(outcomes(&v), ["rejected", "rejected", "stored"], "{v}");
    assert_eq!(
        v["results"][0]["reason"],
        "contact.name: too long: 121 characters (at most 120)"
    );
    assert_eq!(
        v["results"][1]["reason"],
        "location: too long: 201 characters (at most 200); note: too long: 1001 characters (at most 1000)"
    );
    h.stop().await;
}

fn motor_event(event_id: &str, key: &str, estado: &str, resolves: bool) -> String {
    json!({"event_id": event_id, "type": "comando.estado", "instance_id": "clinica-principal",
           "command_id": "cmd-77", "idempotency_key": key, "estado": estado,
           "provider_message_id": "wamid.M77", "resolves_ambiguous": resolves,
           "occurred_at": "2026-11-29T15:00:00Z", "extra": {"tolerated": true}})
    .to_string()
}

async fn engine_events_apply_once_and_resolve_ambiguous_commands(backend: Backend) {
    let h = Harness::start(backend).await;
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
    assert_eq!(hist.iter().filter(|r| r.signal == "duplicate_webhook").count(), 0);
    assert_eq!(h.counter("duplicate_events_motor"), 2);
    let stored = h
        .store()
        .read(|tx| tx.channel_event("motor", "evt-2"))
        .unwrap()
        .unwrap();
    assert_eq!(stored.3, 3, "three copies counted on one stored event: {stored:?}");

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

async fn an_uncertain_intention_resolved_by_the_engine_records_the_evidence(backend: Backend) {
    let h = Harness::start(backend).await;
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

/// A store failure in the middle of one event (injected with the
/// `ingest_event` failpoint in a real `unavez serve`) is that event's
/// rejection: the others are applied, nothing of it is half-applied, the
/// answer is 207 (never 500), and posting it again applies it.
fn a_store_error_on_one_event_rejects_that_event_only(backend: Backend) {
    use dispatch_support::{Cfg, Env, Proc, free_port, runtime, wait_until};
    let rt = runtime();
    let port = free_port();
    let mut cfg = Cfg::motor("http://127.0.0.1:9");
    cfg.server_listen = format!("127.0.0.1:{port}");
    let env = Env::with(backend, &cfg);
    let child = env
        .command_armed("ingest_event:2:error", &["serve"])
        .env("UNAVEZ_INGEST_TOKEN", INGEST_TOKEN)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut serve = Proc(Some(child));
    let up = wait_until(std::time::Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "serve did not listen on {port}");
    let client = reqwest::Client::new();
    let post = |body: String| {
        let req = client
            .post(format!("http://127.0.0.1:{port}/v1/bookings/events"))
            .bearer_auth(INGEST_TOKEN)
            .header("Content-Type", "application/json")
            .body(body);
        rt.block_on(async {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        })
    };
    let batch = json!([
        scheduled("evt-a", "cita-a", PHONE),
        scheduled("evt-b", "cita-b", PHONE),
        scheduled("evt-c", "cita-c", PHONE)
    ]);
    let (status, v) = post(batch.to_string());
    assert_eq!(status, 207, "{v}");
    assert_eq!(outcomes(&v), ["stored", "rejected", "stored"], "{v}");
    let reason = v["results"][1]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("store: the ledger could not apply this event"),
        "{reason}"
    );
    let mut store = env.store();
    assert!(store.read(|tx| tx.commitment("cita-b")).unwrap().is_none());
    assert!(
        store.read(|tx| tx.commitment_events("cita-b")).unwrap().is_empty(),
        "no half-applied log row"
    );
    for r in ["cita-a", "cita-c"] {
        assert!(store.read(|tx| tx.commitment(r)).unwrap().is_some(), "{r}");
    }
    // The failure was that event's, not the ledger's: posted again, it applies.
    let (status, v) = post(json!([scheduled("evt-b", "cita-b", PHONE)]).to_string());
    assert_eq!((status, outcomes(&v)), (200, vec!["stored".to_string()]), "{v}");
    serve.terminate();
}

on_both!(a_store_error_on_one_event_rejects_that_event_only,);

on_both!(
    async:
    a_booking_event_posted_twice_changes_once,
    invalid_events_get_a_reason_each_and_nothing_half_applied,
    a_changed_event_at_the_same_version_is_rejected_alone_every_time_and_kept,
    oversize_fields_are_rejected_per_event_naming_the_field,
    engine_events_apply_once_and_resolve_ambiguous_commands,
    an_uncertain_intention_resolved_by_the_engine_records_the_evidence,
);
