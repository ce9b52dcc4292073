//! Inbound WhatsApp replies as business facts, over real HTTP: confirm,
//! opt-out (per policy), reschedule request, conversation signals, and the
//! 24-hour window.

mod webhooks_support;

use unavez::domain::event::BookingEvent;
use unavez::domain::state::{CancelReason, IntentionState};
use unavez::server::cloud::BatchSummary;
use unavez_testkit::{Backend, on_both};
use webhooks_support::*;

/// The text fixture with another body and message id.
fn text_message(body: &str, wamid: &str) -> String {
    fixture("inbound_text.json")
        .replace(
            "\"body\": \"CONFIRMO\"",
            &format!("\"body\": {}", serde_json::to_string(body).unwrap()),
        )
        .replace("wamid.HBgLNTE5ODc2NTQzMjEVAgASGBQzQUI3RjM5RkQ1QjlDMDI4RTJCQwA=", wamid)
        .replace(
            "\"timestamp\": \"1750857500\"",
            &format!("\"timestamp\": \"{}\"", chrono::Utc::now().timestamp()),
        )
}

async fn confirmo_cancels_the_pending_confirmation_reminder_once(backend: Backend) {
    let h = Harness::start(backend).await;
    let planned = h.schedule("cita-1042", 3);
    let confirm_reminder = planned.iter().find(|i| i.asks_confirmation).unwrap().key.clone();
    let other_reminder = planned
        .iter()
        .find(|i| i.purpose == "recordatorio-2h")
        .unwrap()
        .key
        .clone();

    for _ in 0..3 {
        let r = h.post_cloud(&text_message("CONFIRMO", "wamid.IN1")).await;
        assert_eq!(r.status(), 200);
    }
    let row = h.intention(&confirm_reminder);
    assert_eq!(row.state, IntentionState::Cancelled);
    assert_eq!(
        row.state_reason.as_deref(),
        Some(CancelReason::AlreadyConfirmed.as_str())
    );
    assert_eq!(h.intention(&other_reminder).state, IntentionState::Planned);

    let mut store = h.store();
    let c = store.read(|tx| tx.commitment("cita-1042")).unwrap().unwrap();
    assert!(c.commitment.confirmed_at.is_some());
    let events = store.read(|tx| tx.commitment_events("cita-1042")).unwrap();
    assert_eq!(
        events.iter().filter(|e| e.1 == "appointment.confirmed").count(),
        1,
        "confirmed once: {events:?}"
    );
    let contact = store.read(|tx| tx.contact_by_phone(PHONE)).unwrap().unwrap();
    assert!(contact.last_inbound_at.is_some(), "the 24-hour window opened");
    let signals = store.read(|tx| tx.commitment_signals(c.id)).unwrap();
    assert_eq!(
        signals.iter().filter(|s| s.0 == "confirmed_by_reply").count(),
        1,
        "{signals:?}"
    );
    assert_eq!(h.counter("duplicate_events_cloud"), 2);
    h.stop().await;
}

async fn a_quick_reply_button_confirms_the_appointment_it_answers(backend: Backend) {
    let h = Harness::start(backend).await;
    // Two appointments: the reply quotes the reminder of the later one.
    h.schedule("cita-1", 2);
    h.schedule("cita-1042", 3);
    h.accept(FIXTURE_KEY, Some(FIXTURE_WAMID));
    let body = fixture("inbound_button.json").replace(
        "\"timestamp\": \"1750857520\"",
        &format!("\"timestamp\": \"{}\"", chrono::Utc::now().timestamp()),
    );
    let r = h.post_cloud(&body).await;
    assert_eq!(r.status(), 200);
    let mut store = h.store();
    let quoted = store.read(|tx| tx.commitment("cita-1042")).unwrap().unwrap();
    let nearest = store.read(|tx| tx.commitment("cita-1")).unwrap().unwrap();
    assert!(
        quoted.commitment.confirmed_at.is_some(),
        "the quoted appointment is confirmed"
    );
    assert!(nearest.commitment.confirmed_at.is_none(), "the other one is not");
    h.stop().await;
}

async fn baja_opts_out_of_marketing_only_by_default_and_an_order_does_not_undo_it(backend: Backend) {
    let h = Harness::start(backend).await;
    h.schedule("cita-5", 3);
    assert_eq!(h.post_cloud(&text_message("baja", "wamid.OUT1")).await.status(), 200);
    let mut store = h.store();
    let contact = store.read(|tx| tx.contact_by_phone(PHONE)).unwrap().unwrap();
    assert!(contact.opt_out_marketing_at.is_some());
    assert!(
        contact.opt_out_transactional_at.is_none(),
        "transactional messages still allowed by default"
    );

    // A later order from the same customer never reactivates marketing.
    let order = BookingEvent::from_json(&format!(
        r#"{{"event_id":"ord-1","type":"order.confirmed","ref":"pedido-88","contact":{{"phone":"{PHONE}","name":"Ana"}}}}"#
    ))
    .unwrap();
    h.ingest(&order);
    let contact = store.read(|tx| tx.contact_by_phone(PHONE)).unwrap().unwrap();
    assert!(contact.opt_out_marketing_at.is_some(), "still opted out after an order");

    let metrics = h.metrics().await;
    assert!(
        metrics.contains("unavez_opt_outs{category=\"marketing\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("unavez_opt_outs{category=\"transactional\"} 0"),
        "{metrics}"
    );
    h.stop().await;
}

async fn stop_also_blocks_transactional_when_policy_says_so(backend: Backend) {
    let h = Harness::start_with(backend, |c| c.inbound.opt_out_blocks_transactional = true).await;
    // Unknown sender: the opt-out still holds for when they become a customer.
    assert_eq!(h.post_cloud(&text_message("STOP", "wamid.OUT2")).await.status(), 200);
    let mut store = h.store();
    let contact = store.read(|tx| tx.contact_by_phone(PHONE)).unwrap().unwrap();
    assert!(contact.opt_out_marketing_at.is_some());
    assert!(contact.opt_out_transactional_at.is_some());
    h.stop().await;
}

async fn reprogramar_lands_in_the_attention_list_and_other_text_is_kept(backend: Backend) {
    let h = Harness::start(backend).await;
    h.schedule("cita-1042", 3);
    h.accept(FIXTURE_KEY, Some(FIXTURE_WAMID));
    // The interactive button reply quotes our reminder and says REPROGRAMAR.
    let r = h.post_cloud(&fixture("inbound_interactive.json")).await;
    assert_eq!(r.status(), 200);
    let r = h
        .post_cloud(&text_message("¿Puedo llevar a mi hija?", "wamid.Q1"))
        .await;
    let s: BatchSummary = r.json().await.unwrap();
    assert_eq!(s.applied, 1);

    let mut store = h.store();
    let c = store.read(|tx| tx.commitment("cita-1042")).unwrap().unwrap();
    assert!(c.reschedule_requested_at.is_some());
    assert!(c.commitment.confirmed_at.is_none());
    let signals = store.read(|tx| tx.commitment_signals(c.id)).unwrap();
    let kinds: Vec<&str> = signals.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(kinds, ["reschedule_requested", "conversation"]);
    assert_eq!(signals[1].1.as_deref(), Some("¿Puedo llevar a mi hija?"));
    // Nothing about messages changed.
    assert_eq!(h.intention(FIXTURE_KEY).state, IntentionState::Accepted);
    h.stop().await;
}

on_both!(
    async:
    confirmo_cancels_the_pending_confirmation_reminder_once,
    a_quick_reply_button_confirms_the_appointment_it_answers,
    baja_opts_out_of_marketing_only_by_default_and_an_order_does_not_undo_it,
    stop_also_blocks_transactional_when_policy_says_so,
    reprogramar_lands_in_the_attention_list_and_other_text_is_kept,
);
