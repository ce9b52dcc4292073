//! The webhook server embedded in the demo console notifies it after every
//! accepted POST, so the panels refresh before the tick; reads and refused
//! requests do not wake it.

use chrono::{Duration, SecondsFormat, Utc};
use serde_json::json;
use unavez::config::Config;
use unavez::dispatch::Activity;
use unavez::server::{self, AppState, Secrets};
use unavez::templates::Templates;

const TOKEN: &str = "ingest-token-de-prueba";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_post_bumps_the_activity_counter() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.db");
    let secrets = Secrets {
        ingest_token: Some(TOKEN.into()),
        ..Default::default()
    };
    let state = AppState::new(Config::default(), Templates::embedded(), db, secrets).unwrap();
    let listener = server::bind("127.0.0.1:0").await.unwrap();
    let activity = Activity::new();
    let rx = activity.subscribe();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = server::spawn_notifying(
        state,
        listener,
        async move {
            let _ = stopped.await;
        },
        Some(activity),
    )
    .unwrap();
    let base = format!("http://{}", handle.addr);
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap();

    let r = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert!(r.status().is_success());
    let starts = (Utc::now() + Duration::days(3)).to_rfc3339_opts(SecondsFormat::Secs, true);
    let body = json!({"event_id": "evt-a1", "type": "appointment.scheduled", "ref": "cita-a1",
                      "starts_at": starts, "contact": {"phone": "+51987654321", "name": "Ana"}})
    .to_string();
    let refused = client
        .post(format!("{base}/v1/bookings/events"))
        .bearer_auth("wrong")
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(!rx.has_changed().unwrap(), "reads and refusals do not notify");

    let ok = client
        .post(format!("{base}/v1/bookings/events"))
        .bearer_auth(TOKEN)
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // The bump happens before the response is written: no waiting needed.
    assert!(rx.has_changed().unwrap());

    let _ = stop.send(());
    handle.wait().await.unwrap();
}
