//! Every Cloud API notification leaves a stored row (issue 27 §4): a
//! message or status that cannot be acted on is kept raw as `refused` with
//! a reason, counted on /metrics and listed with the parked events; a
//! sender named only in `contacts[]` is read from there; a number change
//! may carry `wa_id`, `new_wa_id` or both. Bodies in the shapes Meta's
//! documentation examples and SDK test data use, written here, posted over
//! real HTTP to the real server.

mod webhooks_support;

use serde_json::{Value, json};
use unavez::domain::state::IntentionState;
use unavez::server::cloud::BatchSummary;
use unavez_testkit::{Backend, on_both};
use webhooks_support::*;

fn messages_change(messages: Value, contacts: Value, statuses: Value) -> String {
    json!({"object": "whatsapp_business_account",
           "entry": [{"id": "102290129340398",
                      "changes": [{"field": "messages",
                                   "value": {"messaging_product": "whatsapp",
                                             "metadata": {"display_phone_number": "15550783881",
                                                          "phone_number_id": "106540352242922"},
                                             "contacts": contacts, "messages": messages,
                                             "statuses": statuses}}]}]})
    .to_string()
}

fn now() -> String {
    chrono::Utc::now().timestamp().to_string()
}

async fn post(h: &Harness, body: &str) -> BatchSummary {
    let r = h.post_cloud(body).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// `(kind, status)` of every stored channel event.
fn stored(h: &Harness) -> Vec<(String, String)> {
    let mut store = h.store();
    let rows = store.read(|tx| tx.channel_events(1000)).unwrap();
    rows.into_iter().map(|r| (r.2, r.3)).collect()
}

async fn objects_that_cannot_be_acted_on_are_kept_refused_counted_and_listed(backend: Backend) {
    let h = Harness::start(backend).await;
    let ts = now();
    let cases = [
        // A documentation example's placeholder sender.
        (
            messages_change(
                json!([{"from": "<WHATSAPP_USER_PHONE_NUMBER>", "id": "wamid.P1", "timestamp": ts,
                        "type": "revoke", "revoke": {"original_message_id": "wamid.X"}}]),
                json!([]),
                json!([]),
            ),
            "sender_not_a_phone",
        ),
        (
            messages_change(
                json!([{"from": "PHONE_NUMBER", "id": "wamid.P2", "timestamp": ts,
                        "type": "text", "text": {"body": "MESSAGE_BODY"}}]),
                json!([{"profile": {"name": "NAME"}, "wa_id": "PHONE_NUMBER"}]),
                json!([]),
            ),
            "sender_not_a_phone",
        ),
        // Not a message object at all.
        (
            messages_change(json!([{"id": 42, "type": "text"}]), json!([]), json!([])),
            "unreadable_message",
        ),
        // Nobody named anywhere.
        (
            messages_change(
                json!([{"id": "wamid.P3", "timestamp": ts, "type": "text", "text": {"body": "hola"}}]),
                json!([]),
                json!([]),
            ),
            "no_sender",
        ),
        // A status whose time is no time.
        (
            messages_change(
                json!([]),
                json!([]),
                json!([{"id": "wamid.S1", "status": "delivered", "timestamp": "yesterday",
                        "recipient_id": &PHONE[1..]}]),
            ),
            "unreadable_status",
        ),
    ];
    for (i, (body, _)) in cases.iter().enumerate() {
        let s = post(&h, body).await;
        assert_eq!(s.rejected.len(), 1, "case {i}: {s:?}");
        assert_eq!(stored(&h).len(), i + 1, "case {i} left a row");
    }
    // Delivered again: a copy of the stored row, never a second one.
    post(&h, &cases[0].0).await;
    assert_eq!(stored(&h).len(), cases.len());
    assert!(stored(&h).iter().all(|(_, status)| status == "refused"));

    // Listed for technicians, newest first, with its reason.
    let mut store = h.store();
    let listed = store.read(|tx| tx.parked_channel_events(10)).unwrap();
    let reasons: Vec<&str> = listed.iter().map(|r| r.4.as_str()).collect();
    let mut expected: Vec<&str> = cases.iter().map(|c| c.1).collect();
    expected.reverse();
    assert_eq!(reasons, expected);
    assert!(listed.iter().all(|r| r.0 == "cloud" && r.3 == "refused"));
    assert_eq!(listed.last().unwrap().5, 2, "the redelivery counted as a copy");

    // Counted on /metrics.
    let text = h.metrics().await;
    assert!(
        text.contains("unavez_channel_events{source=\"cloud\",kind=\"inbound\",status=\"refused\"} 4"),
        "{text}"
    );
    assert!(
        text.contains("unavez_channel_events{source=\"cloud\",kind=\"status\",status=\"refused\"} 1"),
        "{text}"
    );
    assert_eq!(h.counter("webhook_rejected:cloud:malformed_event"), 6);
    h.stop().await;
}

async fn a_sender_named_only_in_contacts_is_read_from_there(backend: Backend) {
    let h = Harness::start(backend).await;
    h.schedule("cita-1042", 3);
    let uid = "PE.5550123456789";
    let ts = now();
    // Neither `from` nor `user_id` in the message: the change's contacts[]
    // names the user. Unknown yet: stored, recorded.
    let unknown = messages_change(
        json!([{"id": "wamid.C1", "timestamp": ts, "type": "text", "text": {"body": "hola"}}]),
        json!([{"profile": {"name": "Ana"}, "user_id": uid}]),
        json!([]),
    );
    let s = post(&h, &unknown).await;
    assert_eq!((s.rejected.len(), s.recorded), (0, 1), "{s:?}");
    // Once a message links the user id to Ana's phone…
    let link = messages_change(
        json!([{"from": &PHONE[1..], "id": "wamid.C2", "timestamp": ts, "type": "text", "text": {"body": "hola"}}]),
        json!([{"profile": {"name": "Ana"}, "wa_id": &PHONE[1..], "user_id": uid}]),
        json!([]),
    );
    assert_eq!(post(&h, &link).await.applied, 1);
    // …a CONFIRMO named only in contacts[] confirms her appointment.
    let confirm = messages_change(
        json!([{"id": "wamid.C3", "timestamp": ts, "type": "text", "text": {"body": "CONFIRMO"}}]),
        json!([{"profile": {"name": "Ana"}, "user_id": uid}]),
        json!([]),
    );
    let s = post(&h, &confirm).await;
    assert_eq!(s.applied, 1, "{s:?}");
    let mut store = h.store();
    let c = store.read(|tx| tx.commitment("cita-1042")).unwrap().unwrap();
    assert!(c.commitment.confirmed_at.is_some());
    // Two different users in contacts[]: which one wrote is unknown.
    let two = messages_change(
        json!([{"id": "wamid.C4", "timestamp": ts, "type": "text", "text": {"body": "hola"}}]),
        json!([{"user_id": uid}, {"user_id": "PE.5550999"}]),
        json!([]),
    );
    let s = post(&h, &two).await;
    assert_eq!(s.rejected.len(), 1, "{s:?}");
    assert_eq!(stored(&h).last().unwrap().1, "refused");
    h.stop().await;
}

/// A `user_changed_number` system message with the given `system` fields.
fn changed(id: &str, system: Value) -> String {
    let mut sys = json!({"body": "User A changed from 51987654321 to a new number", "type": "user_changed_number"});
    sys.as_object_mut().unwrap().extend(system.as_object().unwrap().clone());
    messages_change(
        json!([{"from": &PHONE[1..], "id": id, "timestamp": now(), "system": sys, "type": "system"}]),
        json!([]),
        json!([]),
    )
}

async fn a_number_change_reads_wa_id_new_wa_id_or_both(backend: Backend) {
    for (i, (fields, moved_to)) in [
        (json!({"wa_id": "51911222333"}), "+51911222333"),
        (json!({"new_wa_id": "51911222444"}), "+51911222444"),
        // Both, differing: new_wa_id, noted on the change.
        (
            json!({"wa_id": "51911222555", "new_wa_id": "51911222666"}),
            "+51911222666",
        ),
        (
            json!({"wa_id": "51911222777", "new_wa_id": "51911222777"}),
            "+51911222777",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let h = Harness::start(backend).await;
        h.schedule("cita-1042", 3);
        let s = post(&h, &changed(&format!("wamid.N{i}"), fields.clone())).await;
        assert_eq!((s.applied, s.rejected.len()), (1, 0), "{fields}: {s:?}");
        let planned: Vec<_> = h
            .intentions("cita-1042")
            .into_iter()
            .filter(|x| x.state == IntentionState::Planned)
            .collect();
        assert!(!planned.is_empty(), "{fields}");
        assert!(planned.iter().all(|x| x.recipient == moved_to), "{fields}: {planned:?}");
        let mut store = h.store();
        let event_id = format!("whatsapp:wamid.N{i}:number:cita-1042");
        let logged = store
            .read(|tx| tx.logged_event(&event_id))
            .unwrap()
            .expect("the change");
        assert_eq!(
            logged.payload.contains("new_wa_id used"),
            i == 2,
            "{fields}: {}",
            logged.payload
        );
        assert_eq!(stored(&h), [("inbound".to_string(), "applied".to_string())]);
        h.stop().await;
    }
}

on_both!(
    async:
    objects_that_cannot_be_acted_on_are_kept_refused_counted_and_listed,
    a_sender_named_only_in_contacts_is_read_from_there,
    a_number_change_reads_wa_id_new_wa_id_or_both,
);
