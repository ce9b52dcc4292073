//! Values that must be refused at the door (issue 24, section 5), posted
//! over real HTTP to the real server on a real ledger (both backends):
//! a booking event naming a key twice, references shaped as paths or
//! options, phones no country holds, Cloud status times that are not
//! times, an engine state the contract does not name, and a template
//! notice for another app's template. Each is refused (or parked, or
//! noted) with the reason, and nothing of it is applied.

mod dispatch_support;
mod webhooks_support;

use std::process::Stdio;
use std::time::Duration as StdDuration;

use chrono::{Duration, SecondsFormat, Utc};
use dispatch_support::{CLOUD_SECRET, Cfg, Env, INSTANCE, MOTOR_WEBHOOK_SECRET, Proc, free_port, runtime, wait_until};
use serde_json::{Value, json};
use unavez::channel::motor_event;
use unavez::domain::state::IntentionState;
use unavez::server::cloud::BatchSummary;
use unavez_testkit::{Backend, on_both};
use webhooks_support::*;

fn starts() -> String {
    (Utc::now() + Duration::days(3)).to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn event(event_id: &str, reference: &str, phone: &str) -> Value {
    json!({"event_id": event_id, "type": "appointment.scheduled", "ref": reference, "starts_at": starts(),
           "contact": {"phone": phone, "name": "Ana"}, "service": "Odontología", "location": "Sede Miraflores"})
}

fn logged_payload(h: &Harness, event_id: &str) -> Option<String> {
    let mut store = h.store();
    store.read(|tx| tx.logged_event(event_id)).unwrap().map(|e| e.payload)
}

async fn a_booking_event_naming_a_key_twice_is_refused_whole(backend: Backend) {
    let h = Harness::start(backend).await;
    // A cancellation for the sender's parser (first wins), a booking for
    // serde_json's (last wins): before, it was stored as scheduled.
    let twice = format!(
        r#"{{"event_id":"evt-dup","type":"appointment.cancelled","type":"appointment.scheduled","ref":"cita-dup",
            "starts_at":"{}","contact":{{"phone":"{PHONE}","name":"Ana"}}}}"#,
        starts()
    );
    let r = h.post_bookings(&twice).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(
        error.starts_with("malformed JSON: duplicate key \"type\": each key may appear once at line 1 column"),
        "{body}"
    );
    // In an array, one such item refuses the whole body: nothing of the
    // good one either (the sender must fix and send again).
    let good = event("evt-good", "cita-good", PHONE).to_string();
    let nested = event("evt-nested", "cita-nested", PHONE)
        .to_string()
        .replace("\"name\":\"Ana\"", "\"name\":\"Ana\",\"name\":\"Eva\"");
    let r = h.post_bookings(&format!("[{good},{nested}]")).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("duplicate key \"[1].contact.name\""),
        "{body}"
    );
    for reference in ["cita-dup", "cita-good", "cita-nested"] {
        assert!(h.intentions(reference).is_empty(), "{reference}");
    }
    assert_eq!(logged_payload(&h, "evt-dup"), None);
    assert_eq!(h.counter("webhook_rejected:bookings:malformed"), 2);
    h.stop().await;
}

async fn posted_events_are_logged_as_they_were_sent(backend: Backend) {
    let h = Harness::start(backend).await;
    let a = format!(
        "{{ \"event_id\" : \"evt-a\", \"type\":\"appointment.scheduled\", \"ref\":\"cita-a\",\n  \"starts_at\":\"{}\", \
         \"contact\":{{\"phone\":\"{PHONE}\",\"name\":\"Ana \\u00d1a\"}}, \"x-crm\":{{\"id\":7}} }}",
        starts()
    );
    let b = event("evt-b", "cita-b", "+51911222333").to_string();
    let body = format!("[\n  {a} ,\n{b}]");
    let r = h.post_bookings(&body).await;
    assert_eq!(r.status(), 200);
    assert_eq!(logged_payload(&h, "evt-a").as_deref(), Some(a.as_str()), "as received");
    assert_eq!(logged_payload(&h, "evt-b").as_deref(), Some(b.as_str()));
    // The same events again are duplicates: their content is compared,
    // not their text.
    let r = h.post_bookings(&body).await;
    assert_eq!(r.status(), 200);
    let again: Value = r.json().await.unwrap();
    assert_eq!(again["duplicates"], 2, "{again}");
    // One object alone is kept as sent too.
    let c = event("evt-c", "cita-c", PHONE).to_string().replace(',', " ,");
    assert_eq!(h.post_bookings(&format!(" {c}\n")).await.status(), 200);
    assert_eq!(logged_payload(&h, "evt-c").as_deref(), Some(c.as_str()));
    h.stop().await;
}

async fn path_and_option_refs_and_phones_no_country_holds_are_refused(backend: Backend) {
    let h = Harness::start(backend).await;
    let refs = ["../../etc/passwd", "..", "/", "-rf", "serie//x", "serie/./x", "/cita-1"];
    let phones = ["+999123456789", "+51000000000"];
    let mut items: Vec<Value> = refs
        .iter()
        .enumerate()
        .map(|(i, r)| event(&format!("evt-r{i}"), r, PHONE))
        .collect();
    items.extend(
        phones
            .iter()
            .enumerate()
            .map(|(i, p)| event(&format!("evt-p{i}"), &format!("cita-p{i}"), p)),
    );
    items.push(event("evt-ok", "serie-7/2027-01-12T1430Z", PHONE));
    let r = h.post_bookings(&Value::Array(items).to_string()).await;
    assert_eq!(r.status(), 207);
    let body: Value = r.json().await.unwrap();
    let results = body["results"].as_array().unwrap();
    for (i, r) in refs.iter().enumerate() {
        let reason = results[i]["reason"].as_str().unwrap_or_default();
        assert_eq!(results[i]["outcome"], "rejected", "{r}: {}", results[i]);
        assert!(reason.starts_with(&format!("ref: reference {r:?} ")), "{r}: {reason}");
    }
    assert!(
        results[0]["reason"]
            .as_str()
            .unwrap()
            .ends_with("has a \".\" or \"..\" segment")
    );
    assert!(results[3]["reason"].as_str().unwrap().ends_with("starts with '-'"));
    for (i, p) in phones.iter().enumerate() {
        let res = &results[refs.len() + i];
        let reason = res["reason"].as_str().unwrap_or_default();
        assert_eq!(res["outcome"], "rejected", "{p}: {res}");
        assert!(
            reason.starts_with(&format!("contact.phone: invalid phone {p:?}: ")),
            "{reason}"
        );
    }
    assert_eq!(
        results.last().unwrap()["outcome"],
        "stored",
        "an occurrence ref keeps its '/'"
    );
    assert_eq!(body["stored"], 1);
    let mut store = h.store();
    let keys: Vec<String> = store
        .read(|tx| tx.list_intentions(&Default::default()))
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert!(!keys.is_empty());
    for k in &keys {
        assert!(k.starts_with("serie-7/2027-01-12T1430Z:"), "{k}");
    }
    h.stop().await;
}

fn statuses(wamid: &str, key: &str, timestamps: &[Value]) -> String {
    let statuses: Vec<Value> = timestamps
        .iter()
        .map(|t| {
            json!({"id": wamid, "status": "delivered", "timestamp": t, "recipient_id": &PHONE[1..],
                        "biz_opaque_callback_data": key})
        })
        .collect();
    json!({"object": "whatsapp_business_account",
           "entry": [{"id": "102290129340398", "changes": [{"field": "messages",
               "value": {"messaging_product": "whatsapp", "statuses": statuses}}]}]})
    .to_string()
}

async fn cloud_statuses_whose_time_is_not_a_time_are_refused(backend: Backend) {
    let h = Harness::start(backend).await;
    let key = h.schedule("cita-ts", 3)[0].key.clone();
    h.accept(&key, Some("wamid.TS"));
    let bad = [json!("abc"), json!(""), json!(-1), json!("-1"), Value::Null];
    let r = h.post_cloud(&statuses("wamid.TS", &key, &bad)).await;
    assert_eq!(r.status(), 200);
    let s: BatchSummary = r.json().await.unwrap();
    assert_eq!(
        (s.received, s.applied, s.pending, s.rejected.len()),
        (5, 0, 0, 5),
        "{s:?}"
    );
    let reasons: Vec<&str> = s.rejected.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "status object: timestamp: \"abc\" is not a positive number of Unix seconds",
            "status object: timestamp: \"\" is not a positive number of Unix seconds",
            "status object: timestamp: -1 is not a positive number of Unix seconds",
            "status object: timestamp: \"-1\" is not a positive number of Unix seconds",
            "status object: timestamp: missing",
        ]
    );
    assert_eq!(h.intention(&key).state, IntentionState::Accepted, "nothing applied");
    assert_eq!(h.counter("webhook_rejected:cloud:malformed_event"), 5);
    let now = Utc::now().timestamp().to_string();
    let s: BatchSummary = h
        .post_cloud(&statuses("wamid.TS", &key, &[json!(now)]))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(s.applied, 1, "{s:?}");
    assert_eq!(h.intention(&key).state, IntentionState::Delivered);
    h.stop().await;
}

async fn an_engine_state_the_contract_does_not_name_is_parked(backend: Backend) {
    let h = Harness::start(backend).await;
    let key = h.schedule("cita-estado", 3)[0].key.clone();
    let id = h.accept(&key, Some("wamid.E"));
    let body = json!({"event_id": "evt-x", "type": "comando.estado", "instance_id": "clinica-principal",
                      "command_id": "cmd-1", "idempotency_key": key, "estado": "../../x",
                      "provider_message_id": "wamid.E", "occurred_at": "2026-11-29T15:00:00Z"})
    .to_string();
    let r = h.post_motor(&body).await;
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["results"][0]["outcome"], "parked", "{answer}");
    assert_eq!(answer["results"][0]["reason"], "unknown_state");
    assert_eq!(h.intention(&key).state, IntentionState::Accepted);
    assert!(
        h.history(id).iter().all(|r| !r.signal.starts_with("webhook:")),
        "no history row"
    );
    assert_eq!(h.counter("webhook_parked:motor:unknown_state"), 1);
    let r = h.post_motor(&body).await;
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["results"][0]["outcome"], "duplicate", "{answer}");
    // Kept raw, listed for a technician with its reason.
    let mut store = h.store();
    let parked = store.read(|tx| tx.parked_channel_events(10)).unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!((parked[0].1.as_str(), parked[0].3.as_str()), ("evt-x", "parked"));
    assert_eq!(parked[0].4, "unknown_state");
    let m = h.metrics().await;
    assert!(
        m.contains("unavez_channel_events{source=\"motor\",kind=\"motor_event\",status=\"parked\"} 1"),
        "{m}"
    );
    h.stop().await;
}

async fn webhook_bodies_naming_a_key_twice_are_refused(backend: Backend) {
    let h = Harness::start(backend).await;
    let key = h.schedule("cita-twice", 3)[0].key.clone();
    h.accept(&key, Some("wamid.T"));
    let engine = json!({"event_id": "evt-t", "type": "comando.estado", "instance_id": "clinica-principal",
                        "command_id": "cmd-1", "idempotency_key": key, "estado": "fallido",
                        "provider_message_id": "wamid.T", "occurred_at": "2026-11-29T15:00:00Z"})
    .to_string()
    .replace(
        "\"estado\":\"fallido\"",
        "\"estado\":\"fallido\",\"estado\":\"entregado\"",
    );
    let r = h.post_motor(&format!("[{engine}]")).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("malformed engine event JSON: duplicate key \"[0].estado\""),
        "{body}"
    );
    let now = Utc::now().timestamp().to_string();
    let cloud = statuses("wamid.T", &key, &[json!(now)]).replace(
        "\"status\":\"delivered\"",
        "\"status\":\"failed\",\"status\":\"delivered\"",
    );
    let r = h.post_cloud(&cloud).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("duplicate key \"entry[0].changes[0].value.statuses[0].status\""),
        "{body}"
    );
    assert_eq!(h.intention(&key).state, IntentionState::Accepted, "neither applied");
    assert_eq!(h.counter("webhook_rejected:motor:malformed"), 1);
    assert_eq!(h.counter("webhook_rejected:cloud:malformed"), 1);
    h.stop().await;
}

fn template_notice(name: &str, event: &str) -> String {
    json!({"object": "whatsapp_business_account",
           "entry": [{"id": "102290129340398", "time": Utc::now().timestamp(),
                      "changes": [{"field": "message_template_status_update",
                                   "value": {"event": event, "message_template_id": 1,
                                             "message_template_name": name,
                                             "message_template_language": "es_PE", "reason": "NONE"}}]}]})
    .to_string()
}

async fn a_template_notice_for_another_apps_template_is_a_note_not_an_alert(backend: Backend) {
    let h = Harness::start(backend).await;
    let r = h.post_cloud(&template_notice("promo_de_otra_app", "REJECTED")).await;
    assert_eq!(r.status(), 200);
    let s: BatchSummary = r.json().await.unwrap();
    assert_eq!((s.received, s.recorded), (1, 1), "{s:?}");
    assert_eq!(h.counter("template_blocked"), 0);
    let m = h.metrics().await;
    assert!(!m.contains("unavez_template_blocked{"), "{m}");
    assert!(m.contains("unavez_alert{kind=\"template_blocked\"} 0"), "{m}");
    let stored =
        "unavez_channel_events{source=\"cloud\",kind=\"message_template_status_update\",status=\"recorded\"} 1";
    assert!(m.contains(stored), "kept raw: {m}");
    // One of this clinic's templates, even with nothing planned, alerts.
    let r = h.post_cloud(&template_notice("cita_recordatorio", "PAUSED")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(h.counter("template_blocked"), 1);
    let m = h.metrics().await;
    assert!(
        m.contains("unavez_template_blocked{template=\"cita_recordatorio\""),
        "{m}"
    );
    assert!(!m.contains("promo_de_otra_app"), "{m}");
    h.stop().await;
}

on_both!(
    async:
    a_booking_event_naming_a_key_twice_is_refused_whole,
    posted_events_are_logged_as_they_were_sent,
    path_and_option_refs_and_phones_no_country_holds_are_refused,
    cloud_statuses_whose_time_is_not_a_time_are_refused,
    an_engine_state_the_contract_does_not_name_is_parked,
    webhook_bodies_naming_a_key_twice_are_refused,
    a_template_notice_for_another_apps_template_is_a_note_not_an_alert,
);

/// The same refusals through `unavez import` (the real binary): each row
/// named by file, line and field, nothing stored; and a good line is kept
/// in the event log as it was written.
fn import_refuses_hostile_rows_and_logs_good_lines_as_written(backend: Backend) {
    let env = Env::with(backend, &Cfg::motor("http://127.0.0.1:9"));
    let twice = event("e1", "cita-1", PHONE)
        .to_string()
        .replace("\"type\":", "\"type\":\"appointment.cancelled\",\"type\":");
    let lines = vec![
        twice,
        event("e2", "../../etc/passwd", PHONE).to_string(),
        event("e3", "-rf", PHONE).to_string(),
        event("e4", "..", PHONE).to_string(),
        event("e5", "/", PHONE).to_string(),
        event("e6", "cita-6", "+999123456789").to_string(),
        event("e7", "cita-7", "+51000000000").to_string(),
    ];
    let file = env.write_events("hostil.jsonl", &lines);
    let f = file.to_str().unwrap();
    let out = env.run(&["import", f]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for expected in [
        format!("{f}:1: json: duplicate key \"type\": each key may appear once"),
        format!("{f}:2: ref: reference \"../../etc/passwd\" has a \".\" or \"..\" segment"),
        format!("{f}:3: ref: reference \"-rf\" starts with '-'"),
        format!("{f}:4: ref: reference \"..\" has a \".\" or \"..\" segment"),
        format!("{f}:5: ref: reference \"/\" starts with '/'"),
        format!("{f}:6: contact.phone: invalid phone \"+999123456789\": not a known country calling code"),
        format!("{f}:7: contact.phone: invalid phone \"+51000000000\": not a valid phone number"),
    ] {
        assert!(err.contains(&expected), "missing {expected:?} in:\n{err}");
    }
    assert!(err.contains("nothing was stored"), "{err}");
    assert!(env.intentions().is_empty());

    let line = format!(
        "{{\"event_id\": \"e-raw\",  \"type\": \"appointment.scheduled\", \"ref\": \"cita-raw\", \"starts_at\": \"{}\", \
         \"contact\": {{\"phone\": \"{PHONE}\"}}, \"crm\": [1, 2]}}",
        starts()
    );
    env.import("ok.jsonl", std::slice::from_ref(&line));
    let logged = env.store().read(|tx| tx.logged_event("e-raw")).unwrap().unwrap();
    assert_eq!(logged.payload, line, "the line as written");
    let again = env.ok(&["import", env.path("ok.jsonl").to_str().unwrap()]);
    assert!(again.contains("already present"), "{again}");
}

on_both!(import_refuses_hostile_rows_and_logs_good_lines_as_written);

/// POSTs `body` signed with `secret` in `header`.
async fn post_signed(url: &str, header: &str, secret: &str, body: &str) -> u16 {
    let sig = motor_event::sign(secret.as_bytes(), body.as_bytes());
    let r = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header(header, sig)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    r.status().as_u16()
}

/// A signed sender's words with a newline in them never start a line of
/// `unavez serve`'s log: a template name, an engine instance and an
/// engine state, each carrying a forged log line, come out quoted.
#[test]
fn a_signed_sender_cannot_forge_log_lines() {
    let rt = runtime();
    let port = free_port();
    let mut cfg = Cfg::motor("http://127.0.0.1:9");
    cfg.server_listen = format!("127.0.0.1:{port}");
    let env = Env::new(&cfg);
    let child = env
        .command(&["serve"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut serve = Proc(Some(child));
    let base = format!("http://127.0.0.1:{port}");
    let up = wait_until(StdDuration::from_secs(30), || {
        rt.block_on(reqwest::get(format!("{base}/healthz"))).is_ok()
    });
    assert!(up, "serve did not listen on {port}");

    let forged = |n: u32| format!("x\" y\n2026-12-01T08:00:00.000000Z ERROR FORGED-{n}: admin password reset");
    let cloud = template_notice(&forged(1), "REJECTED");
    let engine = |event_id: &str, instance: &str, estado: &str| {
        json!({"event_id": event_id, "type": "comando.estado", "instance_id": instance,
               "command_id": "cmd-1", "idempotency_key": "cita-1:aviso-reserva:v1", "estado": estado,
               "occurred_at": "2026-11-29T15:00:00Z"})
        .to_string()
    };
    let motor_url = format!("{base}/webhooks/motor");
    rt.block_on(async {
        let cloud_url = format!("{base}/webhooks/whatsapp");
        assert_eq!(
            post_signed(&cloud_url, "X-Hub-Signature-256", CLOUD_SECRET, &cloud).await,
            200
        );
        for body in [
            engine(&forged(2), &forged(3), "entregado"),
            engine("evt-estado", INSTANCE, &forged(4)),
        ] {
            let status = post_signed(&motor_url, motor_event::SIGNATURE_HEADER, MOTOR_WEBHOOK_SECRET, &body).await;
            assert_eq!(status, 200);
        }
    });

    let mut c = serve.0.take().unwrap();
    let st = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(c.id().to_string())
        .status()
        .unwrap();
    assert!(st.success());
    let _ = wait_until(StdDuration::from_secs(30), || c.try_wait().unwrap().is_some());
    let out = c.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    for line in log.lines() {
        assert!(
            !line.starts_with("2026-12-01T08:00:00.000000Z"),
            "a forged line:\n{line}\nin:\n{log}"
        );
    }
    for n in 1..=4 {
        let quoted = format!("\\n2026-12-01T08:00:00.000000Z ERROR FORGED-{n}");
        assert!(log.contains(&quoted), "FORGED-{n} logged, quoted:\n{log}");
    }
}
