//! Issue 24, clock edges, with the real binary: quiet hours whose end
//! falls in a repeated hour (a DST fall-back) under `faketime`, and
//! appointment dates far ahead (refused at the door) or in another year
//! (the year said in the message).

mod edges_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use edges_support::{BIN, Site};

/// A site in `tz` with `policy` lines in its `[policy]` table; the engine
/// is unreachable, so nothing is ever sent.
fn site(tz: &str, policy: &str) -> Site {
    let site = Site::new("", "");
    let port = site.port;
    std::fs::write(
        &site.config,
        format!(
            r#"database = "{db}"
timezone = "{tz}"

[policy]
lease_seconds = 3
reminder_offsets_minutes = []
confirm_reminder_offsets_minutes = []
{policy}

[dispatcher]
poll_ms = 200

[server]
listen = "127.0.0.1:{port}"

[channel]
kind = "motor"
[channel.motor]
base_url = "http://127.0.0.1:9"
instance_id = "clinica-test"
api_key_env = "UNAVEZ_TEST_MOTOR_KEY"
"#,
            db = site.db.display()
        ),
    )
    .unwrap();
    site
}

/// libfaketime, which the DST test needs (`.ci/run` installs the
/// `faketime` package): a missing one fails the test, it is never skipped.
/// Preloaded straight into `unavez` (not through the `faketime` wrapper,
/// which would stand between the test and the process it signals).
fn libfaketime() -> std::path::PathBuf {
    let dirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
        "/usr/local/lib",
    ];
    dirs.iter()
        .map(|d| std::path::Path::new(d).join("faketime/libfaketime.so.1"))
        .find(|p| p.exists())
        .expect("libfaketime is not installed: apt-get install -y faketime (.ci/run does)")
}

/// `unavez ARGS` whose clock starts at `utc` and runs on from there.
fn faked(site: &Site, utc: &str, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--config")
        .arg(&site.config)
        .args(args)
        .env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", format!("@{utc}"))
        // The date is read in UTC; the process's own zone is the config's.
        .env("TZ", "UTC")
        // Timers (tokio's, the lease's) run on the real monotonic clock.
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("UNAVEZ_TEST_MOTOR_KEY", "clave")
        .env("UNAVEZ_MOTOR_WEBHOOK_SECRET", edges_support::MOTOR_SECRET)
        .env_remove("UNAVEZ_DB")
        .env_remove("UNAVEZ_CONFIG")
        .env_remove("RUST_LOG");
    c
}

fn query(site: &Site, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(&site.db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn quiet_hours_ending_in_a_repeated_hour_defer_once_strictly_forward() {
    // Santiago falls back at 2026-04-05 03:00 UTC (00:00 -03 → 23:00 -04):
    // 23:00–23:59 of the 4th happens twice. At 03:10 UTC the wall clock
    // says 23:10 again, inside 22:00–23:30; the first 23:30 (02:30 UTC) is
    // already past, the second (03:30 UTC) is the end.
    let site = site(
        "America/Santiago",
        r#"quiet_hours = { start = "22:00", end = "23:30" }"#,
    );
    site.ok(&["init"]);
    let agenda = site.path("agenda.jsonl");
    std::fs::write(
        &agenda,
        r#"{"event_id":"e1","type":"appointment.scheduled","ref":"cita-dst","starts_at":"2026-04-06T10:00:00-04:00","contact":{"phone":"+56961234567","name":"Ana"},"service":"Control"}
"#,
    )
    .unwrap();
    let out = faked(&site, "2026-04-05 03:09:00", &["import", agenda.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        query(&site, "SELECT count(*) FROM intentions WHERE state = 'planned'"),
        1
    );

    let mut serve = faked(&site, "2026-04-05 03:10:00", &["serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for dozens of claim rounds (poll 200 ms): the old code
    // deferred to 02:30 UTC, was due again at once and wrote a row a round.
    std::thread::sleep(Duration::from_secs(6));
    let _ = Command::new("kill").arg("-TERM").arg(serve.id().to_string()).status();
    let done = edges_support::wait_until(Duration::from_secs(20), || serve.try_wait().unwrap().is_some());
    if !done {
        let _ = serve.kill();
    }
    let out = serve.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);

    let deferred = query(
        &site,
        "SELECT count(*) FROM intention_history WHERE signal = 'deferred'",
    );
    assert_eq!(deferred, 1, "deferred rows (one deferral, not a loop)\n{log}");
    // Due again at the second 23:30 (03:30 UTC), strictly after the claim.
    let next = query(&site, "SELECT next_attempt_at FROM intentions");
    let second_end = chrono::DateTime::parse_from_rfc3339("2026-04-05T03:30:00Z").unwrap();
    assert_eq!(next, second_end.timestamp_millis(), "{log}");
    assert_eq!(
        query(&site, "SELECT count(*) FROM attempts"),
        0,
        "nothing was tried in quiet hours"
    );
}

#[test]
fn a_start_past_the_horizon_is_refused_at_both_doors_and_another_year_is_named() {
    use chrono::Datelike;
    let site = site("America/Lima", "");
    site.ok(&["init"]);
    // Next year's 5 January is always ahead and within the default 400 days.
    let next = chrono::Utc::now().year() + 1;
    let agenda = site.path("agenda.jsonl");
    let line = |id: &str, r: &str, starts: &str| {
        format!(
            r#"{{"event_id":"{id}","type":"appointment.scheduled","ref":"{r}","starts_at":"{starts}","contact":{{"phone":"+51987654321","name":"Ana"}},"service":"Control"}}"#
        )
    };
    std::fs::write(
        &agenda,
        format!(
            "{}\n{}\n",
            line("e1", "cita-enero", &format!("{next}-01-05T09:30:00-05:00")),
            line("e2", "cita-9999", "9999-12-31T09:00:00-05:00")
        ),
    )
    .unwrap();
    let out = site.run(&["import", agenda.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("{}:2: starts_at: 9999-12-31", agenda.display())) && err.contains("400 days"),
        "{err}"
    );
    assert_eq!(
        query(&site, "SELECT count(*) FROM commitments"),
        0,
        "nothing stored: {err}"
    );

    // --skip-invalid stores the good row; its notice names the year.
    let out = site.run(&["import", agenda.to_str().unwrap(), "--skip-invalid"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("agenda.jsonl:2: starts_at"), "{err}");
    assert_eq!(query(&site, "SELECT count(*) FROM commitments"), 1, "{err}");
    let conn = rusqlite::Connection::open(&site.db).unwrap();
    let body: String = conn
        .query_row(
            "SELECT body FROM intentions WHERE key = 'cita-enero:aviso-reserva:v1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(body.contains(&format!("5 de enero de {next}")), "{body}");

    // The booking API: the same refusal, naming the field.
    let serve = site.serve_with(&[("UNAVEZ_INGEST_TOKEN", "tok")]);
    let (status, answer) = serve
        .request(
            "POST",
            "/v1/bookings/events",
            &[("Authorization", "Bearer tok"), ("Content-Type", "application/json")],
            line("e3", "cita-lejana", "9999-12-31T09:00:00-05:00").as_bytes(),
        )
        .unwrap();
    assert_eq!(status, 422, "{answer}");
    assert!(answer.contains("starts_at") && answer.contains("400 days"), "{answer}");
    serve.stop();
    assert_eq!(query(&site, "SELECT count(*) FROM commitments"), 1);
}
