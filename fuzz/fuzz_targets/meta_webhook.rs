//! The WhatsApp Cloud API webhook body, read as `POST /webhooks/whatsapp`
//! reads it after the signature check: the notification envelope, each
//! `statuses[]` object as a status report, each `messages[]` object as an
//! inbound message classified by the default keywords.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unavez_core::domain::inbound::Classifier;
use unavez_core::domain::status::CloudStatus;
use unavez_core::policy::InboundConfig;
use unavez_server::server::cloud::Notification;
use unavez_server::server::inbound::InboundMessage;

fuzz_target!(|data: &[u8]| {
    let Ok(note) = serde_json::from_slice::<Notification>(data) else {
        return;
    };
    let classifier = Classifier::new(&InboundConfig::default());
    let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
    for change in note.entry.into_iter().flat_map(|e| e.changes) {
        for status in change.value.statuses {
            if let Ok(s) = serde_json::from_value::<CloudStatus>(status) {
                let _ = (s.event_id(), s.report());
            }
        }
        for message in change.value.messages {
            if let Ok(m) = serde_json::from_value::<InboundMessage>(message) {
                for c in m.candidates() {
                    let _ = classifier.classify(c);
                }
                let _ = (m.display_text(), m.phone(), m.sent_at(now));
            }
        }
    }
});
