//! Issue 11, the HTTP server under attack: the real `unavez serve` on
//! loopback, raw sockets for slow and oversized clients, another process
//! holding the ledger's write lock, a ledger that cannot be written.

mod edges_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use edges_support::{MOTOR_SECRET, Serve, Site, parse_response, rss_kib, wait_until};
use unavez::store::Store;

/// The tests here measure latency and memory of one server under attack:
/// they run one at a time so that they do not measure each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const LIMITS: &str = "header_read_timeout_ms = 1500\nbody_read_timeout_ms = 2000\nidle_timeout_ms = 4000\n\
                      bodies_in_flight_bytes = 8388608\n";

/// Reads until EOF or `limit`; returns what arrived and when it ended.
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (Vec<u8>, Option<Instant>) {
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let end = Instant::now() + limit;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        match s.read(&mut buf) {
            Ok(0) => return (out, Some(Instant::now())),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return (out, Some(Instant::now())),
        }
    }
    (out, None)
}

fn timed(f: impl FnOnce() -> Option<(u16, String)>) -> (Duration, Option<(u16, String)>) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

/// Polls `/healthz` every 100 ms from another thread until `stop`; returns
/// the slowest answer and any non-200.
fn watch_health(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(Duration, Vec<String>)> {
    std::thread::spawn(move || {
        let serve = Serve { child: None, port };
        let mut worst = Duration::ZERO;
        let mut bad = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let (took, r) = timed(|| serve.get("/healthz"));
            worst = worst.max(took);
            match r {
                Some((200, _)) => {}
                other => bad.push(format!("{other:?}")),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (worst, bad)
    })
}

#[test]
fn slow_and_oversized_clients_are_cut_while_healthz_answers_and_memory_stays_bounded() {
    let _serial = serial();
    let site = Site::new(LIMITS, "");
    site.ok(&["init"]);
    let serve = site.serve();
    let port = serve.port;
    let baseline = rss_kib(serve.pid());
    let stop = Arc::new(AtomicBool::new(false));
    let health = watch_health(port, stop.clone());
    let started = Instant::now();

    // 200 clients that never finish their headers.
    let mut slow_heads: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"POST /webhooks/motor HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();

    // 100 unauthenticated 2 MB bodies, each stalled after 1 MB: 100 MB if
    // the server held them all.
    let bodies: Vec<_> = (0..100)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                let head = "POST /webhooks/motor HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\
                            X-Unavez-Signature: sha256=00\r\n\r\n";
                s.write_all(head.as_bytes()).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                let _ = s.write_all(&vec![b'x'; 1_000_000]);
                let t0 = Instant::now();
                let (answer, closed) = read_until_closed(&mut s, Duration::from_secs(8));
                (parse_response(&answer).map(|r| r.0), closed.map(|c| c - t0))
            })
        })
        .collect();

    // A body that trickles one byte every 100 ms: a per-read timeout would
    // never fire; the total one must.
    let trickle = std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"POST /webhooks/motor HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
            .unwrap();
        let t0 = Instant::now();
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut buf = [0u8; 1024];
        let mut got = Vec::new();
        while t0.elapsed() < Duration::from_secs(8) {
            if s.write_all(b"y").is_err() {
                break;
            }
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
            if !got.is_empty() {
                break;
            }
        }
        (parse_response(&got).map(|r| r.0), t0.elapsed())
    });

    std::thread::sleep(Duration::from_millis(1200));
    let peak = rss_kib(serve.pid());

    // Slow headers: cut at the header timeout (1.5 s), not kept.
    for s in &mut slow_heads {
        let (_, closed) = read_until_closed(s, Duration::from_secs(6).saturating_sub(started.elapsed()));
        let at = closed.map(|c| c - started);
        assert!(
            at.is_some_and(|t| t < Duration::from_millis(4000)),
            "a slow-header client was not cut within the header timeout: {at:?}"
        );
    }
    let mut refused_busy = 0;
    let mut cut_slow = 0;
    for b in bodies {
        let (status, closed) = b.join().unwrap();
        assert!(closed.is_some(), "a stalled body kept its connection");
        match status {
            Some(503) => refused_busy += 1,
            Some(408) => cut_slow += 1,
            other => panic!("unexpected answer to a stalled body: {other:?}"),
        }
    }
    let (status, took) = trickle.join().unwrap();
    assert!(
        matches!(status, Some(408) | Some(503)),
        "a trickling body: {status:?} after {took:?}"
    );
    assert!(
        took < Duration::from_millis(3500),
        "a trickling body was cut late: {took:?}"
    );
    stop.store(true, Ordering::SeqCst);
    let (worst, bad) = health.join().unwrap();

    assert!(refused_busy > 0 && cut_slow > 0, "503 {refused_busy}, 408 {cut_slow}");
    // 8 MiB of budget: at most four 2 MB bodies read at once.
    assert!(cut_slow <= 5, "more bodies held than the budget allows: {cut_slow}");
    assert!(bad.is_empty(), "/healthz failed during the attack: {bad:?}");
    assert!(worst < Duration::from_secs(2), "/healthz slowest answer {worst:?}");
    let grew_mib = peak.saturating_sub(baseline) / 1024;
    assert!(
        grew_mib < 48,
        "memory grew {grew_mib} MiB under 100 MB of stalled bodies"
    );

    // The rejections are counted by reason.
    let (_, metrics) = serve.get("/metrics").unwrap();
    assert!(
        metrics.contains("unavez_webhook_rejected_total{source=\"motor\",reason=\"busy\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("unavez_webhook_rejected_total{source=\"motor\",reason=\"slow_body\"}"),
        "{metrics}"
    );
    serve.stop();
}

#[test]
fn a_kept_alive_connection_waits_the_idle_timeout_not_the_header_one() {
    let _serial = serial();
    let site = Site::new(LIMITS, "");
    site.ok(&["init"]);
    let serve = site.serve();
    let mut s = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    // The response, then nothing: idle.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let idle_from = Instant::now();
    // Past the header timeout (1.5 s) the connection still serves.
    std::thread::sleep(Duration::from_millis(2500));
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let n = s.read(&mut buf).unwrap();
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
        "kept-alive connection closed before the idle timeout"
    );
    // Then idle again: closed after about 4 s.
    let idle_from2 = Instant::now();
    let (_, closed) = read_until_closed(&mut s, Duration::from_secs(10));
    let after = closed.map(|c| c - idle_from2);
    assert!(
        after.is_some_and(|t| t >= Duration::from_millis(3500) && t < Duration::from_millis(6500)),
        "idle connection closed after {after:?} (idle timeout 4 s); first wait {:?}",
        idle_from.elapsed()
    );
    serve.stop();
}

#[test]
fn rejections_metrics_and_healthz_answer_within_100ms_while_another_process_holds_the_write_lock() {
    let _serial = serial();
    let site = Site::new("", "");
    site.ok(&["init"]);
    let serve = site.serve();
    // Warm: one answer of each kind before the lock.
    assert_eq!(serve.get("/metrics").unwrap().0, 200);
    std::thread::sleep(Duration::from_millis(2500));

    let db = site.db.clone();
    let locked = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let holder = {
        let (locked, release) = (locked.clone(), release.clone());
        std::thread::spawn(move || {
            let mut store = Store::open(&db).unwrap();
            store
                .write(|tx| {
                    tx.set_counter("test_lock_holder", 1)?;
                    locked.store(true, Ordering::SeqCst);
                    while !release.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Ok::<_, unavez::store::StoreError>(())
                })
                .unwrap();
        })
    };
    assert!(wait_until(Duration::from_secs(5), || locked.load(Ordering::SeqCst)));
    let lock_from = Instant::now();

    let body = br#"{"bad":"signature"}"#;
    let rejections = std::cell::Cell::new(0);
    let reject = || {
        rejections.set(rejections.get() + 1);
        serve.request(
            "POST",
            "/webhooks/motor",
            &[("X-Unavez-Signature", "sha256=0000")],
            body,
        )
    };
    let metrics = || serve.get("/metrics");
    let health = || serve.get("/healthz");
    // Every answer is timed. One over 100 ms is asked again at once: a
    // request that waits for the ledger's lock would be slow again (the
    // lock is held throughout), a scheduler hiccup on a loaded test
    // machine would not. So every kind of answer must come within 100 ms.
    let limit = Duration::from_millis(100);
    let mut slow = Vec::new();
    let mut timed_ok = |what: &str, expect: u16, ask: &dyn Fn() -> Option<(u16, String)>| {
        let (t, r) = timed(ask);
        assert_eq!(r.as_ref().map(|r| r.0), Some(expect), "{what}");
        if t >= limit {
            let (again, r) = timed(ask);
            assert_eq!(r.as_ref().map(|r| r.0), Some(expect), "{what}");
            slow.push((what.to_string(), t, again));
        }
        r
    };
    let mut health_busy = None;
    for _ in 0..20 {
        timed_ok("rejection", 401, &reject);
        timed_ok("/metrics", 200, &metrics);
        if lock_from.elapsed() < Duration::from_millis(2000) {
            health_busy = timed_ok("/healthz", 200, &health);
        }
    }
    for (what, first, again) in &slow {
        assert!(
            *again < limit && *first < Duration::from_secs(1),
            "{what} under the lock took {first:?}, then {again:?}"
        );
    }
    assert!(slow.len() <= 3, "too many slow answers under the lock: {slow:?}");
    let (status, text) = health_busy.unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("busy"), "{text}");
    // The metrics already count every rejection (pending in memory).
    let (_, metrics) = serve.get("/metrics").unwrap();
    let counted = format!(
        "unavez_webhook_rejected_total{{source=\"motor\",reason=\"signature\"}} {}",
        rejections.get()
    );
    assert!(metrics.contains(&counted), "{counted} not in {metrics}");

    // Past the lease (3 s) without a write of its own: 503, saying why.
    let wait = Duration::from_millis(3600).saturating_sub(lock_from.elapsed());
    std::thread::sleep(wait);
    let (t, r) = timed(|| serve.get("/healthz"));
    let (status, text) = r.unwrap();
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("busy"), "{text}");
    assert!(t < Duration::from_secs(1), "{t:?}");

    release.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || serve
            .get("/healthz")
            .is_some_and(|r| r.0 == 200)),
        "healthy again once the lock is released"
    );
    // Flushed in a batch once the lock is free.
    let mut store = Store::open(&site.db).unwrap();
    let mut seen = 0;
    let sent = rejections.get();
    let stored = wait_until(Duration::from_secs(5), || {
        seen = store.read(|tx| tx.counter("webhook_rejected:motor:signature")).unwrap();
        seen == sent
    });
    if !stored {
        let m = serve.get("/metrics").unwrap().1;
        let snap = store.read(|tx| tx.metrics_snapshot()).unwrap();
        eprintln!(
            "metrics: {}\nstored: {:?}",
            m.lines()
                .filter(|l| l.contains("rejected"))
                .collect::<Vec<_>>()
                .join("\n"),
            snap.counters
        );
        let err = serve.stop();
        let mut fresh = Store::open(&site.db).unwrap();
        eprintln!(
            "after stop: {:?}",
            fresh.read(|tx| tx.metrics_snapshot()).unwrap().counters
        );
        panic!("rejections were not flushed to the ledger: {seen}\n{err}");
    }
    serve.stop();
}

#[test]
fn healthz_is_503_with_the_reason_when_the_ledger_cannot_be_written() {
    let _serial = serial();
    let site = Site::new("", "");
    // On every address, so that a caller from outside loopback can ask.
    std::fs::write(
        &site.config,
        std::fs::read_to_string(&site.config)
            .unwrap()
            .replace("listen = \"127.0.0.1:", "listen = \"0.0.0.0:"),
    )
    .unwrap();
    site.ok(&["init"]);
    // The child's file size limit makes the ledger "full" soon after the
    // start: every file it writes may not grow past it (SIGXFSZ ignored, so
    // the write fails with EFBIG as on a full disk).
    let size = std::fs::metadata(&site.db).unwrap().len();
    let limit_blocks = size / 512 + 64;
    let script = format!("trap '' XFSZ; ulimit -f {limit_blocks}; exec \"$0\" \"$@\"",);
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(edges_support::BIN)
        .arg("--config")
        .arg(&site.config)
        .arg("serve")
        .env("UNAVEZ_TEST_MOTOR_KEY", "clave")
        .env("UNAVEZ_INGEST_TOKEN", "tok")
        .env_remove("UNAVEZ_DB")
        .env_remove("UNAVEZ_CONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let serve = Serve {
        child: Some(child),
        port: site.port,
    };
    assert!(wait_until(Duration::from_secs(30), || serve
        .get("/healthz")
        .is_some_and(|r| r.0 == 200)));
    // Fill it: booking events until a write fails.
    let mut n = 0;
    let starts = (chrono::Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    let failed = wait_until(Duration::from_secs(60), || {
        n += 1;
        let events: Vec<String> = (0..50)
            .map(|i| {
                format!(
                    r#"{{"event_id":"evt-{n}-{i}","type":"appointment.scheduled","ref":"cita-{n}-{i}","starts_at":"{starts}","contact":{{"phone":"+5198765{:04}","name":"{}"}}}}"#,
                    i,
                    "N".repeat(100)
                )
            })
            .collect();
        let body = format!("[{}]", events.join(","));
        let r = serve.request(
            "POST",
            "/v1/bookings/events",
            &[("Authorization", "Bearer tok"), ("Content-Type", "application/json")],
            body.as_bytes(),
        );
        let full = !matches!(r, Some((200, _)));
        if full {
            eprintln!("post {n}: {r:?}");
        }
        full
    });
    assert!(failed, "the ledger never filled");
    std::thread::sleep(Duration::from_millis(1100));
    let (status, text) = serve.get("/healthz").unwrap();
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains("cannot be written") || text.contains("last write failed"),
        "{text}"
    );
    // That reason is for loopback and for the token's holder; anyone else
    // reads the status and a short code (issue 24).
    let code = text
        .trim()
        .strip_prefix("unhealthy: ")
        .and_then(|r| r.split(':').next())
        .unwrap_or_default()
        .to_string();
    assert!(
        !code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
        "{text}"
    );
    let short = format!("unhealthy: {code}");
    let proxied = [("X-Forwarded-For", "203.0.113.9")];
    let (s, body) = serve.request("GET", "/healthz", &proxied, b"").unwrap();
    assert_eq!((s, body.trim()), (503, short.as_str()));
    let (s, body) = serve
        .request("GET", "/healthz", &[proxied[0], ("Authorization", "Bearer wrong")], b"")
        .unwrap();
    assert_eq!((s, body.trim()), (503, short.as_str()));
    let (s, body) = serve
        .request("GET", "/healthz", &[proxied[0], ("Authorization", "Bearer tok")], b"")
        .unwrap();
    assert_eq!(s, 503);
    assert!(
        body.contains("cannot be written") || body.contains("last write failed"),
        "{body}"
    );
    match outside_address() {
        Some(ip) => {
            let (s, body) = request_at((ip, site.port).into(), "/healthz").unwrap();
            assert_eq!((s, body.trim()), (503, short.as_str()), "from {ip}");
        }
        None => eprintln!("no address but loopback on this host: strangers checked through a proxy's header only"),
    }
    let log = serve.stop();
    assert!(log.contains("health check failed") && log.contains(&code), "{log}");
}

/// A local address other than loopback, if this host has one.
fn outside_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// One GET to `addr`: (status, body).
fn request_at(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    parse_response(&out)
}

#[test]
fn logs_have_no_colour_codes_and_an_unconfigured_endpoint_warns_once() {
    let _serial = serial();
    let site = Site::new("", "");
    site.ok(&["init"]);
    let serve = site.serve();
    for _ in 0..5 {
        // No UNAVEZ_INGEST_TOKEN in serve's environment.
        let r = serve.request("POST", "/v1/bookings/events", &[("Authorization", "Bearer x")], b"[]");
        assert_eq!(r.map(|r| r.0), Some(503));
    }
    std::thread::sleep(Duration::from_millis(300));
    let err = serve.stop();
    assert!(!err.contains('\u{1b}'), "ANSI codes in a non-terminal log:\n{err}");
    assert_eq!(err.matches("ingest token is not configured").count(), 1, "{err}");
    assert!(!err.contains("ERROR"), "{err}");
    assert!(err.contains("WARN"), "{err}");
    let _ = MOTOR_SECRET;
}
