//! The engine's webhook (`POST /webhooks/motor`): the signature header
//! (first line of the input) checked against the body (the rest), then one
//! event or an array of them read as engine events and mapped to
//! state-machine signals.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unavez_app::channel::motor_event::{MotorEvent, verify};
use unavez_core::domain::status::{motor_report, motor_signal};

fuzz_target!(|data: &[u8]| {
    let (header, body) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&[][..], data),
    };
    let _ = verify(b"fuzz-secret", body, &String::from_utf8_lossy(header));
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    let items = match value {
        serde_json::Value::Array(items) => items,
        one => vec![one],
    };
    for item in items {
        if let Ok(ev) = serde_json::from_value::<MotorEvent>(item) {
            let _ = motor_signal(&ev.estado);
            let _ = motor_report(&ev);
        }
    }
});
