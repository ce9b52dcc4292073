//! Issue 3, test 7: the Cloud API channel (no idempotency key, no lookup)
//! against a local fake Cloud endpoint. A timeout leaves the intention
//! `uncertain`; it is never resent; a later status webhook (real, signed,
//! posted to `unavez serve`) resolves it; without one it goes to `review`
//! after the policy window.

mod dispatch_support;

use std::time::Duration;

use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez::sim::cloud_fake::{CloudBehavior, CloudFake, CloudFakeOptions};
use unavez_testkit::{Backend, on_both};

fn cloud_timeout_stays_uncertain_is_never_resent_and_is_resolved_by_a_status_or_reviewed(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let fake = rt
        .block_on(CloudFake::spawn(CloudFakeOptions {
            log: Some(log.path().to_path_buf()),
            hold_ms: 1500,
            ..Default::default()
        }))
        .unwrap();
    fake.set_default(CloudBehavior::TimeoutAfterRecord);
    let env = Env::with(backend, &Cfg::cloud(&fake.base_url()));
    env.import("agenda.jsonl", &[scheduled("cita-70", 70)]);

    // The send is processed (the fake records it) but the answer is lost.
    env.ok(&["dispatch", "--until-idle"]);
    let key = "cita-70:aviso-reserva:v1";
    let i = env.by_key()[key].clone();
    assert_eq!(i.state, IntentionState::Uncertain);
    assert_eq!(fake.received().len(), 1);

    // More dispatcher and reconciler runs: still uncertain, not resent.
    env.ok(&["dispatch", "--until-idle"]);
    std::thread::sleep(Duration::from_millis(1100));
    env.ok(&["dispatch", "--until-idle"]);
    assert_eq!(env.by_key()[key].state, IntentionState::Uncertain);
    assert_eq!(
        fake.received().len(),
        1,
        "a Cloud API send must never be repeated automatically"
    );
    let h = env.history(i.id);
    assert!(
        h.iter()
            .any(|r| r.signal == "reconcile" && r.note.as_deref().unwrap_or("").contains("never resending"))
    );

    // A real status webhook, signed with the app secret, posted to the HTTP
    // server of `unavez serve`, correlated by biz_opaque_callback_data and
    // wamid, resolves it.
    let wamid = fake.received()[0].wamid.clone().expect("the fake assigned a wamid");
    let body = &fake.received()[0].body;
    assert_eq!(body["biz_opaque_callback_data"], key);
    let port = free_port();
    let served = env.alt_config("serve.toml", &{
        let mut c = Cfg::cloud(&fake.base_url());
        c.server_listen = format!("127.0.0.1:{port}");
        c
    });
    let mut serve = Proc(Some(
        env.command_with(&served, &["serve"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let hook = unavez::sim::cloud_fake::status_webhook("1234567890", &wamid, "delivered", &phone(70), Some(key));
    let raw = serde_json::to_vec(&hook).unwrap();
    let signature = unavez::channel::motor_event::sign(CLOUD_SECRET.as_bytes(), &raw);
    let url = format!("http://127.0.0.1:{port}/webhooks/whatsapp");
    let client = reqwest::Client::new();
    let mut status = None;
    assert!(wait_until(Duration::from_secs(20), || {
        let r = rt.block_on(
            client
                .post(&url)
                .header("Content-Type", "application/json")
                .header("X-Hub-Signature-256", &signature)
                .body(raw.clone())
                .send(),
        );
        status = r.ok().map(|r| r.status().as_u16());
        status.is_some()
    }));
    assert_eq!(status, Some(200), "webhook refused");
    assert!(wait_until(Duration::from_secs(20), || env.by_key()[key].state
        == IntentionState::Delivered));
    serve.terminate();
    let h = env.history(i.id);
    let resolved = h.iter().rev().find(|r| r.applied).unwrap();
    assert_eq!(resolved.cause, "webhook", "{resolved:?}");
    env.ok(&["dispatch", "--until-idle"]);
    assert_eq!(env.by_key()[key].state, IntentionState::Delivered);
    assert_eq!(fake.received().len(), 1);

    // Without a status: after the window (0 minutes here) → review, still
    // sent exactly once.
    let quick = env.alt_config("quick.toml", &{
        let mut c = Cfg::cloud(&fake.base_url());
        c.uncertain_review_minutes = 0;
        c
    });
    env.import("agenda2.jsonl", &[scheduled("cita-71", 71)]);
    env.ok_with(&quick, &["dispatch", "--until-idle"]);
    let key2 = "cita-71:aviso-reserva:v1";
    let j = env.by_key()[key2].clone();
    assert_eq!(j.state, IntentionState::Review, "{:#?}", env.history(j.id));
    let sent_to_fake = fake
        .received()
        .iter()
        .filter(|r| r.body["biz_opaque_callback_data"] == key2)
        .count();
    assert_eq!(sent_to_fake, 1);
    assert!(wait_until(Duration::from_secs(5), || sent_keys(log.path()).len() == 2));
    assert_no_duplicates(log.path());
    rt.block_on(fake.shutdown());
}

on_both!(cloud_timeout_stays_uncertain_is_never_resent_and_is_resolved_by_a_status_or_reviewed,);
