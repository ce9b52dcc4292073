//! The Cloud API client against the local fake Cloud API over real HTTP.

use unavez::channel::cloud::CloudChannel;
use unavez::channel::{CancelOutcome, Channel, LookupOutcome, SendOutcome, SendRequest};
use unavez::config::CloudConfig;
use unavez::sim::cloud_fake::{self, CloudBehavior, CloudFake, CloudFakeOptions};

fn channel(fake: &CloudFake, timeout_ms: u64) -> CloudChannel {
    let cfg = CloudConfig {
        base_url: fake.base_url(),
        phone_number_id: "1234567890".into(),
        timeout_ms,
        ..CloudConfig::default()
    };
    CloudChannel::with_token(&cfg, "tok").unwrap()
}

fn req(key: &str, window: bool) -> SendRequest {
    SendRequest {
        key: key.into(),
        recipient: "+51987654321".into(),
        body: "Hola Ana".into(),
        template: "cita_recordatorio".into(),
        language: "es_PE".into(),
        parameters: vec!["Ana".into(), "09:30".into()],
        expires_at: None,
        correlation_id: "c".into(),
        in_service_window: window,
    }
}

#[tokio::test]
async fn accepted_with_wamid_and_logged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cloud.jsonl");
    let fake = CloudFake::spawn(CloudFakeOptions {
        log: Some(log.clone()),
        token: Some("tok".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    let ch = channel(&fake, 5_000);
    assert_eq!(ch.kind(), "cloud");
    let caps = ch.capabilities();
    assert!(!caps.idempotent_keys && !caps.command_lookup && !caps.cancel);
    let SendOutcome::Accepted {
        message_id: Some(wamid),
        command_id: None,
        ..
    } = ch.send(&req("k1", true)).await
    else {
        panic!()
    };
    let SendOutcome::Accepted { .. } = ch.send(&req("k2", false)).await else {
        panic!()
    };
    let rec = fake.received();
    assert_eq!(rec[0].wamid.as_deref(), Some(wamid.as_str()));
    assert_eq!(rec[0].phone_number_id, "1234567890");
    assert_eq!(rec[0].body["type"], "text");
    assert_eq!(rec[0].body["biz_opaque_callback_data"], "k1");
    assert_eq!(rec[1].body["type"], "template");
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(lines.lines().count(), 2);
    assert_eq!(fake.sent()[1].text, "[cita_recordatorio] Ana | 09:30");
    assert_eq!(fake.sent()[0].key, "k1");
    // No lookup and no cancel on this channel.
    assert!(matches!(
        ch.lookup(&req("k1", true), None).await,
        LookupOutcome::Unavailable { .. }
    ));
    assert_eq!(ch.cancel("x").await, CancelOutcome::Unsupported);
    // A wrong token is the channel's failure, not the message's (Graph 190:
    // docs/design.md, "A channel that refuses us").
    let bad = CloudChannel::with_token(
        &CloudConfig {
            base_url: fake.base_url(),
            phone_number_id: "1234567890".into(),
            ..CloudConfig::default()
        },
        "wrong",
    )
    .unwrap();
    assert!(matches!(
        bad.send(&req("k3", true)).await,
        SendOutcome::ChannelDown {
            fault: unavez::domain::fault::ChannelFault::CredentialRejected,
            ..
        }
    ));
    fake.shutdown().await;
}

#[tokio::test]
async fn graph_error_codes_are_classified() {
    let fake = CloudFake::spawn(CloudFakeOptions::default()).await.unwrap();
    let ch = channel(&fake, 5_000);
    for (status, code, want) in [
        (400, 131026, "failed"),
        (400, 131049, "failed"),
        (400, 131047, "failed"),
        (429, 130429, "retry"),
        (429, 131056, "retry"),
        (400, 132000, "failed"),
    ] {
        fake.push(CloudBehavior::error(status, code, "Título del error"));
        let got = ch.send(&req("e", false)).await;
        match (want, &got) {
            ("failed", SendOutcome::Failed { code: c, detail, .. }) => {
                assert_eq!(c, &code.to_string());
                assert!(detail.contains("Título del error"), "{detail}");
            }
            ("retry", SendOutcome::Retry { .. }) => {}
            _ => panic!("{code}: {got:?}"),
        }
    }
    assert!(fake.sent().is_empty(), "errors send nothing");
    fake.shutdown().await;
}

#[tokio::test]
async fn timeout_after_recording_is_uncertain_and_the_message_went_out() {
    let fake = CloudFake::spawn(CloudFakeOptions {
        hold_ms: 5_000,
        ..Default::default()
    })
    .await
    .unwrap();
    let ch = channel(&fake, 300);
    fake.push(CloudBehavior::TimeoutAfterRecord);
    let SendOutcome::Uncertain { detail } = ch.send(&req("t1", true)).await else {
        panic!()
    };
    assert!(detail.contains("not resent"), "{detail}");
    assert_eq!(fake.sent().len(), 1);
    let wamid = fake.received()[0].wamid.clone().unwrap();
    // The status webhook a test can post to the webhook server.
    let hook = cloud_fake::status_webhook("1234567890", &wamid, "delivered", "+51987654321", Some("t1"));
    assert_eq!(
        hook["entry"][0]["changes"][0]["value"]["statuses"][0]["id"],
        wamid.as_str()
    );
    assert_eq!(
        hook["entry"][0]["changes"][0]["value"]["statuses"][0]["biz_opaque_callback_data"],
        "t1"
    );
    assert!(
        hook["entry"][0]["changes"][0]["value"]["statuses"][0]
            .get("errors")
            .is_none()
    );
    let failed = cloud_fake::status_webhook("1234567890", &wamid, "failed", "+51987654321", None);
    assert_eq!(
        failed["entry"][0]["changes"][0]["value"]["statuses"][0]["errors"][0]["code"],
        131026
    );
    fake.shutdown().await;
}

#[tokio::test]
async fn unreachable_is_retry() {
    let fake = CloudFake::spawn(CloudFakeOptions::default()).await.unwrap();
    let ch = channel(&fake, 2_000);
    fake.shutdown().await;
    assert!(matches!(
        ch.send(&req("u1", true)).await,
        SendOutcome::Retry { http_status: None, .. }
    ));
}
