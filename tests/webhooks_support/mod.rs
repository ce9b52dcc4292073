//! Shared setup for the webhook server tests: a real SQLite file, the real
//! server on 127.0.0.1 with an ephemeral port, real HTTP with reqwest.
#![allow(dead_code)]

use std::path::PathBuf;

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use unavez::channel::motor_event;
use unavez::config::Config;
use unavez::domain::event::BookingEvent;
use unavez::domain::state::Signal;
use unavez::ingest::{Outcome, ingest};
use unavez::planner::Planner;
use unavez::server::{self, AppState, Secrets, ServerHandle};
use unavez::store::{Cause, Entry, IntentionRow, Store, StoreError, Tx};
use unavez::templates::Templates;

pub const APP_SECRET: &str = "app-secret-de-prueba";
pub const VERIFY_TOKEN: &str = "verify-token-de-prueba";
pub const MOTOR_SECRET: &str = "motor-secret-de-prueba";
pub const INGEST_TOKEN: &str = "ingest-token-de-prueba";
pub const PHONE: &str = "+51987654321";

/// The wamid and key used in the fixtures under `tests/fixtures/meta/`.
pub const FIXTURE_WAMID: &str = "wamid.HBgLNTE5ODc2NTQzMjEVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3RTcA";
pub const FIXTURE_KEY: &str = "cita-1042:recordatorio-24h:v1";

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub base: String,
    pub config: Config,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<ServerHandle>,
    /// The server's state: rejections are counted in memory and flushed
    /// in batches, so `counter` stores them first.
    state: AppState,
    /// The PostgreSQL schema the ledger lives in, dropped with the harness.
    schema: Option<unavez_testkit::TestLedger>,
}

impl Harness {
    /// A server on a fresh ledger on `backend` (the conformance suite's
    /// parameter, see `unavez_testkit::on_both!`).
    pub async fn start(backend: unavez_testkit::Backend) -> Harness {
        Self::start_with(backend, |_| {}).await
    }

    pub async fn start_with(backend: unavez_testkit::Backend, tweak: impl FnOnce(&mut Config)) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        match backend {
            unavez_testkit::Backend::Sqlite => {
                let db = dir.path().join("ledger.db");
                Self::start_on(dir, db, tweak).await
            }
            unavez_testkit::Backend::Postgres => {
                let ledger = backend.ledger();
                let mut h = Self::start_on(dir, ledger.db.clone(), tweak).await;
                h.schema = Some(ledger);
                h
            }
        }
    }

    /// A server on an existing ledger file (`dir` is kept alive with it).
    pub async fn start_on(dir: tempfile::TempDir, db: PathBuf, tweak: impl FnOnce(&mut Config)) -> Harness {
        let mut config = Config::default();
        tweak(&mut config);
        let secrets = Secrets {
            cloud_app_secret: Some(APP_SECRET.into()),
            cloud_verify_token: Some(VERIFY_TOKEN.into()),
            motor_webhook_secret: Some(MOTOR_SECRET.into()),
            ingest_token: Some(INGEST_TOKEN.into()),
        };
        let state = AppState::new(config.clone(), Templates::embedded(), db.clone(), secrets).unwrap();
        let listener = server::bind("127.0.0.1:0").await.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = server::spawn(state.clone(), listener, async move {
            let _ = rx.await;
        })
        .unwrap();
        let base = format!("http://{}", handle.addr);
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .unwrap();
        Harness {
            dir,
            db,
            base,
            config,
            client,
            stop: Some(tx),
            handle: Some(handle),
            state,
            schema: None,
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            h.wait().await.unwrap();
        }
    }

    pub fn store(&self) -> TestStore {
        TestStore(tokio::task::block_in_place(|| Store::open(&self.db).unwrap()))
    }

    /// The `/metrics` page's text (asserting it answered 200).
    pub async fn metrics(&self) -> String {
        let r = self.client.get(format!("{}/metrics", self.base)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.text().await.unwrap()
    }

    /// POSTs a Cloud API notification signed with the app secret.
    pub async fn post_cloud(&self, body: &str) -> reqwest::Response {
        let sig = motor_event::sign(APP_SECRET.as_bytes(), body.as_bytes());
        self.client
            .post(format!("{}/webhooks/whatsapp", self.base))
            .header("Content-Type", "application/json")
            .header("X-Hub-Signature-256", sig)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    }

    pub async fn post_motor(&self, body: &str) -> reqwest::Response {
        let sig = motor_event::sign(MOTOR_SECRET.as_bytes(), body.as_bytes());
        self.client
            .post(format!("{}/webhooks/motor", self.base))
            .header("Content-Type", "application/json")
            .header(motor_event::SIGNATURE_HEADER, sig)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    }

    pub async fn post_bookings(&self, body: &str) -> reqwest::Response {
        self.client
            .post(format!("{}/v1/bookings/events", self.base))
            .header("Content-Type", "application/json")
            .bearer_auth(INGEST_TOKEN)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    }

    /// Schedules appointment `reference` `days` ahead through the real
    /// ingest path; returns the planned intentions.
    pub fn schedule(&self, reference: &str, days: i64) -> Vec<IntentionRow> {
        let starts = Utc::now() + Duration::days(days);
        let ev = BookingEvent::from_json(&format!(
            r#"{{"event_id":"evt-{reference}-1","type":"appointment.scheduled","ref":"{reference}",
                "starts_at":"{}","contact":{{"phone":"{PHONE}","name":"Ana"}},
                "service":"Odontología","location":"Sede Miraflores"}}"#,
            starts.to_rfc3339_opts(SecondsFormat::Secs, true)
        ))
        .unwrap();
        self.ingest(&ev);
        self.intentions(reference)
    }

    pub fn ingest(&self, ev: &BookingEvent) -> Outcome {
        let templates = Templates::embedded();
        let planner = Planner {
            policy: &self.config.policy,
            templates: &templates,
            tz: self.config.tz(),
        };
        let mut store = self.store();
        store.write(|tx| ingest(tx, &planner, ev, "test", Utc::now())).unwrap()
    }

    pub fn intentions(&self, reference: &str) -> Vec<IntentionRow> {
        let mut store = self.store();
        store
            .read(|tx| {
                tx.list_intentions(&unavez::store::IntentFilter {
                    commitment_ref: Some(reference.into()),
                    ..Default::default()
                })
            })
            .unwrap()
    }

    pub fn intention(&self, key: &str) -> IntentionRow {
        let mut store = self.store();
        store.read(|tx| tx.find_intention(key)).unwrap()
    }

    /// Moves a planned intention to `accepted` as the dispatcher would,
    /// recording the provider message id (test setup only).
    pub fn accept(&self, key: &str, wamid: Option<&str>) -> i64 {
        let mut store = self.store();
        store
            .write(|tx| {
                let id = tx.intention_id(key)?.unwrap();
                let now = Utc::now();
                let e = Entry {
                    signal: "claim",
                    cause: Cause::Dispatcher,
                    evidence: None,
                    note: None,
                    commitment_version: None,
                };
                tx.signal(id, Signal::Claim, &e, now)?;
                let e = Entry {
                    signal: "accepted",
                    cause: Cause::Dispatcher,
                    evidence: wamid,
                    note: None,
                    commitment_version: None,
                };
                tx.signal(id, Signal::Accepted, &e, now)?;
                if let Some(w) = wamid {
                    tx.set_provider_refs(id, None, Some(w), now)?;
                }
                Ok::<_, unavez::store::StoreError>(id)
            })
            .unwrap()
    }

    pub fn counter(&self, name: &str) -> i64 {
        let mut store = self.store();
        tokio::task::block_in_place(|| self.state.store_rejections(&mut store.0)).unwrap();
        store.read(|tx| tx.counter(name)).unwrap()
    }

    pub fn history(&self, id: i64) -> Vec<unavez::store::HistoryRow> {
        let mut store = self.store();
        store.read(|tx| tx.history(id)).unwrap()
    }
}

/// The ledger as a test on tokio's threads uses it: each call leaves the
/// runtime's thread first (`block_in_place`), as the server's handlers do
/// with `spawn_blocking`, because PostgreSQL's synchronous client must not
/// block a runtime thread (SQLite does not mind).
pub struct TestStore(pub Store);

impl TestStore {
    pub fn read<T, E>(&mut self, f: impl FnOnce(&Tx<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        tokio::task::block_in_place(|| self.0.read(f))
    }

    pub fn write<T, E>(&mut self, f: impl FnMut(&Tx<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        tokio::task::block_in_place(|| self.0.write(f))
    }
}

/// A fixture file's text.
pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/meta/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// A fixture with its wamid and key replaced (and, optionally, the timestamp).
pub fn status_fixture(name: &str, wamid: &str, key: &str) -> String {
    fixture(name).replace(FIXTURE_WAMID, wamid).replace(FIXTURE_KEY, key)
}

pub fn unix(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}
