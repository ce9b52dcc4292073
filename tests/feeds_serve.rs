//! A calendar feed polled by a real `unavez serve` (issue 27 §1–§2): the
//! feed is served over real HTTP on loopback by an axum server of the
//! test's own, with ETags; the engine simulator receives what goes out.
//!
//! Changes, reschedules and a vanished event apply; a 500, an empty body
//! and a 40 % disappearance cancel nothing and raise the alert; confirm and
//! discard work and are audited; a 304 writes nothing but the feed's row;
//! an event that comes back gets no second booking notice.

mod dispatch_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use dispatch_support::{Cfg, Env, Proc, free_port, runtime, start_sim, wait_until};
use unavez::domain::lifecycle::CommitmentStatus;

const URL_ENV: &str = "UNAVEZ_TEST_FEED_URL";
/// The secret part of the URL: it must never show anywhere.
const TOKEN: &str = "private-7f3a9c1e";

/// What the feed server answers now.
#[derive(Default)]
struct Feed {
    status: u16,
    body: String,
    etag: String,
    /// Answers by status code.
    served: BTreeMap<u16, usize>,
}

type Shared = Arc<Mutex<Feed>>;

async fn serve_feed(State(feed): State<Shared>, headers: HeaderMap) -> Response {
    let mut f = feed.lock().unwrap();
    let code = if f.status != 200 {
        f.status
    } else if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(f.etag.as_str()) {
        304
    } else {
        200
    };
    *f.served.entry(code).or_default() += 1;
    let status = StatusCode::from_u16(code).unwrap();
    match code {
        200 => (status, [(header::ETAG, f.etag.clone())], f.body.clone()).into_response(),
        304 => (status, [(header::ETAG, f.etag.clone())]).into_response(),
        _ => (status, "upstream trouble").into_response(),
    }
}

/// One appointment as a calendar has it, `days` ahead at 15:00 UTC.
fn vevent(n: usize, days: i64, service: &str) -> String {
    let start = (Utc::now() + chrono::Duration::days(days)).format("%Y%m%dT150000Z");
    format!(
        "BEGIN:VEVENT\r\nUID:cita-{n}\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:{start}\r\nDURATION:PT30M\r\n\
         SUMMARY:{service}\r\nX-UNAVEZ-NAME:Paciente {n}\r\nX-UNAVEZ-PHONE:+5199{n:07}\r\nEND:VEVENT\r\n"
    )
}

fn calendar(events: &[String]) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//unavez tests//feed//ES\r\n{}END:VCALENDAR\r\n",
        events.concat()
    )
}

/// Events `ns`, each `n + 2` days ahead.
fn agenda(ns: &[usize]) -> String {
    calendar(
        &ns.iter()
            .map(|n| vevent(*n, *n as i64 + 2, "Odontología"))
            .collect::<Vec<_>>(),
    )
}

fn set(feed: &Shared, status: u16, body: &str, etag: &str) {
    let mut f = feed.lock().unwrap();
    f.status = status;
    f.body = body.to_string();
    f.etag = etag.to_string();
}

fn served(feed: &Shared, code: u16) -> usize {
    feed.lock().unwrap().served.get(&code).copied().unwrap_or(0)
}

fn status_of(env: &Env, n: usize) -> Option<CommitmentStatus> {
    let c = env.store().read(|tx| tx.commitment(&format!("cita-{n}"))).unwrap();
    c.map(|c| c.commitment.status)
}

fn starts_of(env: &Env, n: usize) -> Option<DateTime<Utc>> {
    let c = env.store().read(|tx| tx.commitment(&format!("cita-{n}"))).unwrap();
    c.and_then(|c| c.commitment.starts_at)
}

fn cancelled(env: &Env) -> Vec<usize> {
    (0..10)
        .filter(|n| status_of(env, *n) == Some(CommitmentStatus::Cancelled))
        .collect()
}

fn feed_json(env: &Env) -> serde_json::Value {
    let out = env.ok(&["feeds", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    doc["feeds"][0].clone()
}

/// Everything a poll could write besides the feed's status row.
fn import_digest(env: &Env) -> (i64, i64, String, String) {
    let c = rusqlite::Connection::open(&env.db).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    let one = |sql: &str| -> String { c.query_row(sql, [], |r| r.get::<_, String>(0)).unwrap() };
    (
        c.query_row("SELECT count(*) FROM commitment_events", [], |r| r.get(0))
            .unwrap(),
        c.query_row("SELECT count(*) FROM intentions", [], |r| r.get(0))
            .unwrap(),
        one("SELECT coalesce(group_concat(ref || '@' || starts_at), '') FROM (SELECT * FROM feed_seen ORDER BY ref)"),
        one(
            "SELECT coalesce(group_concat(ref || ':' || version || ':' || updated_at), '') FROM (SELECT * FROM commitments ORDER BY ref)",
        ),
    )
}

fn metrics(port: u16) -> String {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let rt = runtime();
    rt.block_on(async { reqwest::get(&url).await.unwrap().text().await.unwrap() })
}

fn wait(what: &str, cond: impl FnMut() -> bool) {
    assert!(
        wait_until(Duration::from_secs(30), cond),
        "timed out waiting for: {what}"
    );
}

#[test]
fn a_feed_polled_by_serve_applies_changes_and_never_cancels_by_accident() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 5);
    let feed: Shared = Arc::new(Mutex::new(Feed::default()));
    set(&feed, 200, &agenda(&(0..10).collect::<Vec<_>>()), "\"v1\"");
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let feed_addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .route(&format!("/calendar/{TOKEN}/basic.ics"), axum::routing::get(serve_feed))
        .with_state(feed.clone());
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });

    let port = free_port();
    let mut cfg = Cfg::motor(&sim.base_url());
    cfg.server_listen = format!("127.0.0.1:{port}");
    let env = Env::new(&cfg);
    let mut text = std::fs::read_to_string(&env.config).unwrap();
    text.push_str(&format!(
        "\n[alerts]\nfeed_stale_minutes = 30\n\n[[import.feed]]\nname = \"agenda\"\nurl_env = \"{URL_ENV}\"\nevery = \"1s\"\nwindow_days = 60\n"
    ));
    std::fs::write(&env.config, text).unwrap();
    let url = format!("http://{feed_addr}/calendar/{TOKEN}/basic.ics?key=s3cret");
    let log_path = env.path("serve.log");
    let child = env
        .command(&["serve"])
        .env(URL_ENV, &url)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let mut serve = Proc(Some(child));

    // The first poll imports the agenda.
    wait("ten appointments", || {
        (0..10).all(|n| status_of(&env, n) == Some(CommitmentStatus::Scheduled))
    });
    wait("the booking notices to settle", || env.settled());

    // Unchanged: each poll is one 304 and writes nothing but the feed's row.
    let before = import_digest(&env);
    let polls = served(&feed, 304);
    wait("three 304s", || served(&feed, 304) >= polls + 3);
    assert_eq!(
        import_digest(&env),
        before,
        "a 304 wrote more than the feed's status row"
    );

    // A reschedule, a change of service and a vanished event (1 of 10).
    let moved_from = starts_of(&env, 1).unwrap();
    let mut v2: Vec<String> = (0..10)
        .filter(|n| *n != 3)
        .map(|n| match n {
            1 => vevent(1, 20, "Odontología"),
            2 => vevent(2, 4, "Ortodoncia"),
            n => vevent(n, n as i64 + 2, "Odontología"),
        })
        .collect();
    set(&feed, 200, &calendar(&v2), "\"v2\"");
    wait("cita-3 cancelled", || {
        status_of(&env, 3) == Some(CommitmentStatus::Cancelled)
    });
    wait("cita-1 moved", || starts_of(&env, 1) != Some(moved_from));
    let reason: String = rusqlite::Connection::open(&env.db)
        .unwrap()
        .query_row(
            "SELECT payload FROM commitment_events WHERE commitment_ref = 'cita-3' AND type = 'appointment.cancelled'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(reason.contains("desapareció del calendario"), "{reason}");
    assert_eq!(cancelled(&env), [3]);

    // A 500 and an empty body cancel nothing; the feed says why.
    set(&feed, 500, "", "\"v3\"");
    wait("the 500 recorded", || {
        feed_json(&env)["last_failure"]
            .as_str()
            .is_some_and(|f| f.contains("HTTP 500"))
    });
    set(&feed, 200, "", "\"v4\"");
    wait("the empty body recorded", || {
        feed_json(&env)["last_failure"]
            .as_str()
            .is_some_and(|f| f.contains("empty body"))
    });
    assert_eq!(cancelled(&env), [3], "a failed poll cancelled something");
    // Failing for longer than feed_stale_minutes is an alert (the clock is
    // moved back instead of waiting half an hour).
    let c = rusqlite::Connection::open(&env.db).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    c.execute("UPDATE feeds SET failing_since = failing_since - 31 * 60000", [])
        .unwrap();
    drop(c);
    let m = metrics(port);
    assert!(m.contains("unavez_alert{kind=\"feed_stale\"} 1"), "{m}");
    assert!(m.contains("unavez_feed_last_failure_seconds{feed=\"agenda\"}"), "{m}");

    // 4 of the 9 upcoming vanish at once (44 %): held, nothing cancelled.
    v2.retain(|e| {
        ["cita-5", "cita-6", "cita-7", "cita-8", "cita-9"]
            .iter()
            .any(|r| e.contains(&format!("UID:{r}\r")))
    });
    set(&feed, 200, &calendar(&v2), "\"v5\"");
    wait("four held", || feed_json(&env)["held"] == 4);
    assert_eq!(cancelled(&env), [3]);
    let m = metrics(port);
    assert!(m.contains("unavez_alert{kind=\"feed_held\"} 1"), "{m}");
    assert!(m.contains("unavez_feed_held{feed=\"agenda\"} 4"), "{m}");
    assert!(
        m.contains("unavez_alert{kind=\"feed_stale\"} 0"),
        "a good poll ends the staleness: {m}"
    );
    assert!(m.contains("unavez_feed_events_seen{feed=\"agenda\"} 5"), "{m}");

    // Discard keeps them; the body is the baseline.
    let out = env.ok(&[
        "feeds",
        "discard",
        "agenda",
        "--operator",
        "tecnico",
        "--reason",
        "la agenda se sincronizaba",
    ]);
    assert!(out.contains("discarded"), "{out}");
    assert_eq!(feed_json(&env)["held"], 0);
    assert_eq!(cancelled(&env), [3]);
    // Nothing held any more: a second answer is refused (exit 3).
    let again = env.run(&["feeds", "confirm", "agenda", "--operator", "tecnico", "--reason", "x"]);
    assert_eq!(again.status.code(), Some(3));

    // 3 of 5 vanish (60 %): held; confirm cancels them.
    v2.retain(|e| e.contains("UID:cita-5\r") || e.contains("UID:cita-6\r"));
    set(&feed, 200, &calendar(&v2), "\"v6\"");
    wait("three held", || feed_json(&env)["held"] == 3);
    let denied = env.run(&["feeds", "confirm", "agenda", "--operator", "recepcion", "--reason", "x"]);
    assert_eq!(denied.status.code(), Some(3), "the front desk may not confirm");
    let out = env.ok(&[
        "feeds",
        "confirm",
        "agenda",
        "--operator",
        "supervisora",
        "--reason",
        "cancelaciones reales",
    ]);
    assert!(out.contains("3 appointment(s) cancelled"), "{out}");
    assert_eq!(cancelled(&env), [3, 7, 8, 9]);
    let actions = env.store().read(|tx| tx.operator_actions(10)).unwrap();
    let words: Vec<(&str, &str)> = actions
        .iter()
        .map(|a| (a.action.as_str(), a.operator.as_str()))
        .collect();
    assert!(words.contains(&("feed_confirm", "supervisora")), "{words:?}");
    assert!(words.contains(&("feed_discard", "tecnico")), "{words:?}");

    // An event that comes back follows the version rules: no second
    // booking notice.
    v2.push(vevent(7, 9, "Odontología"));
    set(&feed, 200, &calendar(&v2), "\"v7\"");
    wait("cita-7 back", || {
        status_of(&env, 7) == Some(CommitmentStatus::Scheduled)
    });
    let bookings = env
        .intentions()
        .into_iter()
        .filter(|i| i.commitment_ref == "cita-7" && i.key.contains("aviso-reserva"))
        .count();
    assert_eq!(bookings, 1, "one booking notice for cita-7, ever");
    let updates = env
        .intentions()
        .into_iter()
        .filter(|i| i.commitment_ref == "cita-7" && i.key.contains("aviso-cambio"))
        .count();
    assert_eq!(updates, 1, "its return is an update notice");

    // The secret never shows: not in the listing, the metrics or the logs.
    let listing = env.ok(&["feeds"]);
    let m = metrics(port);
    serve.terminate();
    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(logs.contains("feed agenda"), "serve logs its feed: {logs}");
    for (what, text) in [("feeds", listing), ("metrics", m), ("logs", logs)] {
        assert!(
            !text.contains(TOKEN) && !text.contains("s3cret"),
            "{what} shows the URL: {text}"
        );
    }
    let c = rusqlite::Connection::open(&env.db).unwrap();
    let origin: String = c.query_row("SELECT origin FROM feeds", [], |r| r.get(0)).unwrap();
    assert_eq!(origin, format!("http://{feed_addr}"));
    rt.block_on(sim.shutdown());
}

/// Starts the loopback feed server; returns its state and the feed's URL.
fn feed_server(rt: &tokio::runtime::Runtime, body: &str) -> (Shared, String) {
    let feed: Shared = Arc::new(Mutex::new(Feed::default()));
    set(&feed, 200, body, "\"v1\"");
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new()
        .route(&format!("/calendar/{TOKEN}/basic.ics"), axum::routing::get(serve_feed))
        .with_state(feed.clone());
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
    (feed, format!("http://{addr}/calendar/{TOKEN}/basic.ics"))
}

fn owner(env: &Env) -> Option<String> {
    feed_json(env)["lease_owner"].as_str().map(str::to_string)
}

/// Two `serve` processes on one PostgreSQL ledger: one polls the feed at a
/// time; when it stops, the other takes the feed over.
#[test]
fn on_a_shared_ledger_one_serve_polls_a_feed_and_another_takes_it_over() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 6);
    let (feed, url) = feed_server(&rt, &agenda(&[0, 1, 2]));
    let env = Env::with(unavez_testkit::Backend::Postgres, &Cfg::motor(&sim.base_url()));
    let mut text = std::fs::read_to_string(&env.config).unwrap();
    text.push_str(&format!(
        "\n[[import.feed]]\nname = \"agenda\"\nurl_env = \"{URL_ENV}\"\nevery = \"1s\"\n"
    ));
    std::fs::write(&env.config, text).unwrap();
    let start = || {
        let child = env
            .command(&["serve", "--no-server"])
            .env(URL_ENV, &url)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Proc(Some(child))
    };
    let mut a = start();
    wait("the first serve holds the feed", || owner(&env).is_some());
    let first = owner(&env).unwrap();
    wait("the agenda imported", || {
        status_of(&env, 2) == Some(CommitmentStatus::Scheduled)
    });
    let mut b = start();
    let requests = || served(&feed, 200) + served(&feed, 304);
    let before = requests();
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        owner(&env).as_deref(),
        Some(first.as_str()),
        "the lease moved while its holder lives"
    );
    // One poller polls about once a second; two would double that.
    let polls = requests() - before;
    assert!(
        polls <= 6,
        "{polls} requests in 4 s: more than one serve polls the feed"
    );
    a.terminate();
    wait("the second serve takes the feed over", || {
        owner(&env).is_some_and(|o| o != first)
    });
    let after = requests();
    wait("the new owner polls", || requests() > after);
    b.terminate();
    assert_eq!(owner(&env), None, "a graceful stop gives the lease up");
    rt.block_on(sim.shutdown());
}
