//! Every Meta webhook event is kept, and the ones that matter act (issue
//! 14), plus the engine-event checks of issue 11; bodies shaped as Meta's
//! webhook reference and the engine contract document them, posted over
//! real HTTP to the real server on a real SQLite file.

mod webhooks_support;

use serde_json::{Value, json};
use unavez::domain::event::BookingEvent;
use unavez::domain::state::IntentionState;
use unavez::server::cloud::BatchSummary;
use unavez_testkit::{Backend, on_both};
use webhooks_support::*;

const WABA: &str = "102290129340398";

/// `{"object": "whatsapp_business_account", "entry": [{…, "changes": [{field, value}]}]}`.
fn notification(field: &str, value: Value) -> String {
    json!({"object": "whatsapp_business_account",
           "entry": [{"id": WABA, "time": chrono::Utc::now().timestamp(),
                      "changes": [{"field": field, "value": value}]}]})
    .to_string()
}

fn metadata() -> Value {
    json!({"display_phone_number": "15550783881", "phone_number_id": "106540352242922"})
}

async fn post(h: &Harness, body: &str) -> BatchSummary {
    let r = h.post_cloud(body).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn metrics(h: &Harness) -> String {
    h.metrics().await
}

fn stored(h: &Harness, kind: &str) -> usize {
    let mut store = h.store();
    let rows = store.read(|tx| tx.channel_events(1000)).unwrap();
    rows.iter().filter(|r| r.2 == kind).count()
}

async fn a_paused_template_holds_its_planned_messages_in_review_with_one_alert(backend: Backend) {
    let h = Harness::start(backend).await;
    let planned = h.schedule("cita-1042", 3);
    let template = planned[0].template.clone();
    let same: Vec<String> = planned
        .iter()
        .filter(|i| i.template == template)
        .map(|i| i.key.clone())
        .collect();
    let others: Vec<String> = planned
        .iter()
        .filter(|i| i.template != template)
        .map(|i| i.key.clone())
        .collect();
    let paused = notification(
        "message_template_status_update",
        json!({"event": "PAUSED", "message_template_id": 1689556908129832_i64,
               "message_template_name": template, "message_template_language": "es_PE",
               "reason": "LOW_QUALITY", "message_template_category": "UTILITY"}),
    );
    let s = post(&h, &paused).await;
    assert_eq!((s.received, s.recorded), (1, 1), "{s:?}");
    for k in &same {
        let row = h.intention(k);
        assert_eq!(row.state, IntentionState::Review, "{k}");
        let hist = h.history(row.id);
        let held = hist
            .iter()
            .find(|r| r.signal == "template_blocked")
            .expect("history says why");
        assert!(held.note.as_deref().unwrap().contains("PAUSED"), "{held:?}");
    }
    for k in &others {
        assert_eq!(h.intention(k).state, IntentionState::Planned, "{k}");
    }
    let m = metrics(&h).await;
    let line = format!(
        "unavez_template_blocked{{template=\"{template}\",language=\"es_PE\",status=\"PAUSED\"}} {}",
        same.len()
    );
    assert!(m.contains(&line), "{line} in:\n{m}");
    // The same notification again: stored once, nothing moves twice.
    let again = post(&h, &paused).await;
    assert_eq!(again.duplicates, 1);
    // Approved again: the alert goes; the held messages stay for a person.
    let approved = notification(
        "message_template_status_update",
        json!({"event": "APPROVED", "message_template_id": 1689556908129832_i64,
               "message_template_name": template, "message_template_language": "es_PE", "reason": "NONE"}),
    );
    post(&h, &approved).await;
    assert!(!metrics(&h).await.contains("unavez_template_blocked{"), "alert cleared");
    // Quality and category updates are recorded as well.
    post(
        &h,
        &notification(
            "message_template_quality_update",
            json!({"previous_quality_score": "GREEN", "new_quality_score": "YELLOW",
                   "message_template_id": 1, "message_template_name": template,
                   "message_template_language": "es_PE"}),
        ),
    )
    .await;
    post(
        &h,
        &notification(
            "template_category_update",
            json!({"message_template_id": 1, "message_template_name": template,
                   "message_template_language": "es_PE", "new_category": "MARKETING"}),
        ),
    )
    .await;
    assert_eq!(stored(&h, "message_template_status_update"), 2);
    assert_eq!(stored(&h, "message_template_quality_update"), 1);
    assert_eq!(stored(&h, "template_category_update"), 1);
    h.stop().await;
}

async fn user_preferences_stop_and_resume_marketing_only(backend: Backend) {
    let h = Harness::start(backend).await;
    h.schedule("cita-1042", 3);
    let pref = |value: &str| {
        notification(
            "user_preferences",
            json!({"messaging_product": "whatsapp", "metadata": metadata(),
                   "contacts": [{"profile": {"name": "Ana"}, "wa_id": &PHONE[1..]}],
                   "user_preferences": [{"wa_id": &PHONE[1..], "detail": "User requested to stop marketing messages",
                                          "category": "marketing_messages", "value": value,
                                          "timestamp": chrono::Utc::now().timestamp()}]}),
        )
    };
    post(&h, &pref("stop")).await;
    let mut store = h.store();
    let c = store.read(|tx| tx.contact_by_phone(PHONE)).unwrap().unwrap();
    assert!(c.opt_out_marketing_at.is_some());
    assert!(c.opt_out_transactional_at.is_none(), "never transactional");
    assert!(c.last_inbound_at.is_none(), "a preference is not the user writing");
    // Reminders are transactional: still planned.
    assert!(
        h.intentions("cita-1042")
            .iter()
            .all(|i| i.state == IntentionState::Planned)
    );
    post(&h, &pref("resume")).await;
    let c = store.read(|tx| tx.contact_by_phone(PHONE)).unwrap().unwrap();
    assert!(c.opt_out_marketing_at.is_none(), "the user resumed");
    assert_eq!(stored(&h, "user_preferences"), 2);
    h.stop().await;
}

fn messages_change(messages: Value, contacts: Value) -> String {
    notification(
        "messages",
        json!({"messaging_product": "whatsapp", "metadata": metadata(),
               "contacts": contacts, "messages": messages}),
    )
}

async fn a_changed_number_moves_upcoming_appointments_without_opening_the_window(backend: Backend) {
    let h = Harness::start(backend).await;
    let before = h.schedule("cita-1042", 3);
    // Two orders of the same customer: one notice still waits, one went out.
    let order = |reference: &str| {
        BookingEvent::from_json(&format!(
            r#"{{"event_id":"evt-{reference}","type":"order.confirmed","ref":"{reference}",
                "contact":{{"phone":"{PHONE}","name":"Ana"}}}}"#
        ))
        .unwrap()
    };
    h.ingest(&order("pedido-7"));
    h.ingest(&order("pedido-8"));
    let waiting = h.intentions("pedido-7").remove(0);
    let sent = h.intentions("pedido-8").remove(0);
    h.accept(&sent.key, Some("wamid.P8"));
    let new_phone = "+51911222333";
    let body = messages_change(
        json!([{"from": &PHONE[1..], "id": "wamid.SYS1", "timestamp": chrono::Utc::now().timestamp().to_string(),
                "system": {"body": "User A changed from 51987654321 to 51911222333",
                           "wa_id": &new_phone[1..], "type": "user_changed_number"},
                "type": "system"}]),
        json!([]),
    );
    let s = post(&h, &body).await;
    assert_eq!(s.applied, 1, "{s:?}");
    // The old number's planned messages are superseded; new ones go to the new number.
    for i in &before {
        let row = h.intention(&i.key);
        assert_eq!(row.state, IntentionState::Cancelled, "{}", i.key);
        assert_eq!(row.state_reason.as_deref(), Some("superseded"));
    }
    let now_planned: Vec<_> = h
        .intentions("cita-1042")
        .into_iter()
        .filter(|i| i.state == IntentionState::Planned)
        .collect();
    assert!(!now_planned.is_empty());
    assert!(now_planned.iter().all(|i| i.recipient == new_phone), "{now_planned:?}");
    // The order's waiting notice moved to the new number; the one already
    // sent is not sent again.
    assert_eq!(h.intention(&waiting.key).state, IntentionState::Cancelled);
    let moved: Vec<_> = h
        .intentions("pedido-7")
        .into_iter()
        .filter(|i| i.state == IntentionState::Planned)
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0].recipient, new_phone);
    let p8 = h.intentions("pedido-8");
    assert_eq!(p8.len(), 1, "{p8:?}");
    assert_eq!(p8[0].state, IntentionState::Accepted);
    // The booking system also learns the new number: nothing waits for
    // pedido-8, so nothing is sent again.
    let corrected = BookingEvent::from_json(&format!(
        r#"{{"event_id":"evt-pedido-8-phone","type":"order.updated","ref":"pedido-8",
            "contact":{{"phone":"{new_phone}","name":"Ana"}}}}"#
    ))
    .unwrap();
    h.ingest(&corrected);
    assert_eq!(h.intentions("pedido-8").len(), 1);
    let mut store = h.store();
    let c = store.read(|tx| tx.contact_by_phone(new_phone)).unwrap().unwrap();
    assert!(c.last_inbound_at.is_none(), "no 24-hour window from a system message");
    let old = store.read(|tx| tx.contact_by_phone(PHONE)).unwrap().unwrap();
    assert!(old.last_inbound_at.is_none());
    // The console's commitment view shows the change (masked).
    let cid = store.read(|tx| tx.commitment("cita-1042")).unwrap().unwrap().id;
    let signals = store.read(|tx| tx.commitment_signals(cid)).unwrap();
    let changed = signals.iter().find(|s| s.0 == "number_changed").expect("a signal");
    assert!(
        !changed.1.as_deref().unwrap().contains("987654321"),
        "masked: {changed:?}"
    );
    // Delivered again: applied once.
    assert_eq!(post(&h, &body).await.duplicates, 1);
    h.stop().await;
}

async fn a_message_known_only_by_user_id_is_stored_and_correlated(backend: Backend) {
    let h = Harness::start(backend).await;
    h.schedule("cita-1042", 3);
    let uid = "US.13491208655302741918";
    let ts = chrono::Utc::now().timestamp().to_string();
    // Unknown user id: stored, not rejected.
    let first = messages_change(
        json!([{"user_id": uid, "id": "wamid.U1", "timestamp": ts, "type": "text", "text": {"body": "hola"}}]),
        json!([{"profile": {"name": "Ana"}, "user_id": uid}]),
    );
    let s = post(&h, &first).await;
    assert_eq!((s.rejected.len(), s.recorded), (0, 1), "{s:?}");
    // A message with both teaches the link.
    let both = messages_change(
        json!([{"from": &PHONE[1..], "id": "wamid.U2", "timestamp": ts, "type": "text", "text": {"body": "hola"}}]),
        json!([{"profile": {"name": "Ana"}, "wa_id": &PHONE[1..], "user_id": uid}]),
    );
    assert_eq!(post(&h, &both).await.applied, 1);
    // Now a user-id-only CONFIRMO confirms Ana's appointment.
    let confirm = messages_change(
        json!([{"user_id": uid, "id": "wamid.U3", "timestamp": ts, "type": "text", "text": {"body": "CONFIRMO"}}]),
        json!([{"profile": {"name": "Ana"}, "user_id": uid}]),
    );
    let s = post(&h, &confirm).await;
    assert_eq!(s.applied, 1, "{s:?}");
    let mut store = h.store();
    let c = store.read(|tx| tx.commitment("cita-1042")).unwrap().unwrap();
    assert!(c.commitment.confirmed_at.is_some());
    h.stop().await;
}

async fn calls_account_updates_and_unknown_fields_are_stored_and_counted_per_field(backend: Backend) {
    let h = Harness::start(backend).await;
    let call = notification(
        "calls",
        json!({"messaging_product": "whatsapp", "metadata": metadata(),
               "statuses": [{"id": "wacid.ABGGFjFVU2AfAgo6V", "timestamp": "1671644824", "type": "call",
                             "status": "RINGING", "recipient_id": "51987654321",
                             "biz_opaque_callback_data": "cita-1042:recordatorio-24h:v1"}]}),
    );
    // A call status delivered under `messages` is still a call's.
    let call_in_messages = notification(
        "messages",
        json!({"messaging_product": "whatsapp", "metadata": metadata(),
               "statuses": [{"id": "wacid.XYZ", "timestamp": "1671644825", "type": "call",
                             "status": "ACCEPTED", "recipient_id": "51987654321"}]}),
    );
    let account = notification(
        "account_update",
        json!({"event": "ACCOUNT_VIOLATION", "violation_info": {"violation_type": "ADULT"}}),
    );
    let echo = notification(
        "smb_message_echoes",
        json!({"messaging_product": "whatsapp", "metadata": metadata(),
               "message_echoes": [{"from": "15550783881", "to": "51987654321", "id": "wamid.E1",
                                   "timestamp": "1700000000", "type": "text", "text": {"body": "hola"}}]}),
    );
    let unknown = notification("some_future_field", json!({"anything": [1, 2, 3]}));
    for body in [&call, &call_in_messages, &account, &echo, &unknown] {
        let s = post(&h, body).await;
        assert_eq!((s.recorded, s.pending, s.applied), (1, 0, 0), "{s:?}");
    }
    let m = metrics(&h).await;
    assert!(
        !m.contains("status=\"pending\""),
        "calls are not pending message statuses:\n{m}"
    );
    let pending = h.store().read(|tx| tx.pending_status_count()).unwrap();
    assert_eq!(pending, 0);
    for field in ["calls", "account_update", "smb_message_echoes", "some_future_field"] {
        let want = if field == "calls" { 2 } else { 1 };
        let line = format!("unavez_channel_events{{source=\"cloud\",kind=\"{field}\",status=\"recorded\"}} {want}");
        assert!(m.contains(&line), "{line} in:\n{m}");
    }
    h.stop().await;
}

fn engine_event(event_id: &str, instance: &str, key: &str, wamid: &str) -> String {
    json!({"event_id": event_id, "type": "comando.estado", "instance_id": instance,
           "command_id": "cmd-1", "idempotency_key": key, "estado": "entregado",
           "provider_message_id": wamid, "resolves_ambiguous": false,
           "occurred_at": "2026-11-29T15:00:00Z"})
    .to_string()
}

async fn engine_events_for_another_instance_are_refused_and_split_ones_parked(backend: Backend) {
    let h = Harness::start(backend).await;
    let planned = h.schedule("cita-1042", 3);
    let (a, b) = (planned[0].key.clone(), planned[1].key.clone());
    let ida = h.accept(&a, Some("wamid.A"));
    let idb = h.accept(&b, Some("wamid.B"));

    // Another installation's engine: refused, kept raw, applied to nothing.
    let r = h
        .post_motor(&engine_event("evt-x", "otra-clinica", &a, "wamid.A"))
        .await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["results"][0]["outcome"], "refused", "{body}");
    assert_eq!(h.intention(&a).state, IntentionState::Accepted);
    assert_eq!(h.counter("webhook_rejected:motor:foreign_instance"), 1);
    let m = metrics(&h).await;
    assert!(
        m.contains("unavez_webhook_rejected_total{source=\"motor\",reason=\"foreign_instance\"} 1"),
        "{m}"
    );

    // Key names A, message id names B: applied to neither, parked.
    let r = h
        .post_motor(&engine_event("evt-split", "clinica-principal", &a, "wamid.B"))
        .await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["results"][0]["outcome"], "parked", "{body}");
    assert_eq!(body["results"][0]["reason"], "key_message_mismatch");
    assert_eq!(h.intention(&a).state, IntentionState::Accepted);
    assert_eq!(h.intention(&b).state, IntentionState::Accepted);
    // Its repeat is a duplicate of the stored event: no second note.
    let r = h
        .post_motor(&engine_event("evt-split", "clinica-principal", &a, "wamid.B"))
        .await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["results"][0]["outcome"], "duplicate", "{body}");
    for id in [ida, idb] {
        let notes = h.history(id).iter().filter(|r| r.signal == "event_parked").count();
        assert_eq!(notes, 1, "one note for #{id}, applied to neither");
        assert!(h.history(id).iter().all(|r| r.signal != "event_parked" || !r.applied));
    }
    let mut store = h.store();
    let parked = store.read(|tx| tx.parked_channel_events(10)).unwrap();
    let reasons: Vec<&str> = parked.iter().map(|p| p.4.as_str()).collect();
    assert_eq!(reasons, ["key_message_mismatch", "foreign_instance"]);

    // Agreeing key and message id still apply.
    let r = h
        .post_motor(&engine_event("evt-ok", "clinica-principal", &a, "wamid.A"))
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(h.intention(&a).state, IntentionState::Delivered);
    h.stop().await;
}

on_both!(
    async:
    a_paused_template_holds_its_planned_messages_in_review_with_one_alert,
    user_preferences_stop_and_resume_marketing_only,
    a_changed_number_moves_upcoming_appointments_without_opening_the_window,
    a_message_known_only_by_user_id_is_stored_and_correlated,
    calls_account_updates_and_unknown_fields_are_stored_and_counted_per_field,
    engine_events_for_another_instance_are_refused_and_split_ones_parked,
);
