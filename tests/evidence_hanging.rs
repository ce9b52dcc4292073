//! Issue 24 §6: evidence is never left hanging.
//!
//! - A PostgreSQL restart mid-dispatch (`pg_ctl restart -m immediate`, on
//!   a private cluster, never the shared server): answers recorded while
//!   the server was down are lost, the engine's webhooks move the
//!   intentions on, and recovery closes every attempt they left open.
//! - A ledger that is down: the loops that fail on every poll log each
//!   repeated warning once, not every 100 ms.
//! - An engine whose webhooks never arrive: the status poll asks for each
//!   quiet command and the ledger ends where the engine's own commands are.
//! - The Cloud API, which cannot be asked: its quiet accepted messages are
//!   Atención cases ("sin confirmación de entrega").

mod dispatch_support;
mod tui_support;

use std::collections::BTreeMap;
use std::time::Duration;

use dispatch_support::*;
use tui_support::pty::Console;
use unavez::domain::state::IntentionState;
use unavez_testkit::PrivatePg;

/// Adds `lines` to the `[policy]` table of the env's configuration.
fn with_policy(env: &Env, lines: &str) {
    let text = std::fs::read_to_string(&env.config).unwrap();
    std::fs::write(
        &env.config,
        text.replacen("[policy]\n", &format!("[policy]\n{lines}\n"), 1),
    )
    .unwrap();
}

fn client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// `(outcome, how many)` of the attempts still open (no end recorded).
fn open_attempts(url: &str) -> Vec<(String, i64)> {
    client(url)
        .query(
            "SELECT outcome, count(*) FROM attempts WHERE ended_at IS NULL GROUP BY outcome ORDER BY outcome",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn a_postgresql_restart_mid_dispatch_leaves_no_attempt_started() {
    let pg = PrivatePg::start();
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let port = free_port();
    let hook = format!("http://127.0.0.1:{port}/webhooks/motor");
    // Slow enough that sends are always in flight when the server goes.
    let sim = start_sim_with_webhook(&rt, log.path(), "latency_ms=40..120", 24, &hook);
    let mut cfg = Cfg::motor(&sim.base_url()).with_lease(2);
    cfg.server_listen = format!("127.0.0.1:{port}");
    let env = Env::postgres(&cfg, &pg.url);
    let total = 240;
    let events: Vec<String> = (0..total).map(|n| scheduled(&format!("cita-pgr{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let mut serve = env.spawn(&["serve"]);
    let mut restarts = 0;
    for at in [40, 120] {
        assert!(
            wait_until(Duration::from_secs(30), || sent_keys(log.path()).len() >= at),
            "serve sent {} of {at} before the restart",
            sent_keys(log.path()).len()
        );
        pg.restart_immediate();
        restarts += 1;
    }
    assert!(
        wait_until(Duration::from_secs(60), || sent_keys(log.path()).len() >= total
            && env.settled()),
        "after {restarts} restarts serve sent {} of {total} ({:?})\n{}",
        sent_keys(log.path()).len(),
        env.state_counts(),
        pg.log()
    );
    // Recovery closes what the lost answers left open: an attempt open for
    // two leases on an intention nobody holds is no send in flight.
    let closed = wait_until(Duration::from_secs(20), || open_attempts(&pg.url).is_empty());
    let left = open_attempts(&pg.url);
    let out = serve.terminate();
    assert!(closed, "attempts left open after recovery: {left:?}\n{out}");
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), total);
    // Closed with what is known: an acknowledged intention's orphan says
    // so, and no intention the engine sent is short of an acknowledged
    // attempt.
    let mut c = client(&pg.url);
    let orphans: Vec<(String, String)> = c
        .query(
            "SELECT a.outcome, i.state FROM attempts a JOIN intentions i ON i.id = a.intention_id
             WHERE a.error_detail LIKE 'closed by recovery%'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    eprintln!("{restarts} restarts; orphaned attempts closed by recovery: {orphans:?}");
    for (outcome, state) in &orphans {
        let acknowledged = ["accepted", "sent", "delivered", "read"].contains(&state.as_str());
        assert_eq!(outcome == "accepted", acknowledged, "{outcome} on a {state} intention");
    }
    rt.block_on(sim.shutdown());
}

/// WARN lines of a log, by message (the text after the target).
fn warnings(text: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in text.lines().filter(|l| l.contains(" WARN ")) {
        let msg = l.split_once(": ").map_or(l, |(_, m)| m);
        // The error's own words vary (refused, reset, shutting down): the
        // loop that logged it is what repeats.
        let head: String = msg.chars().take(50).collect();
        *m.entry(head).or_insert(0) += 1;
    }
    m
}

#[test]
fn a_ledger_that_stays_down_logs_each_repeated_warning_once() {
    let pg = PrivatePg::start();
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 25);
    let mut cfg = Cfg::motor(&sim.base_url());
    // Every loop fails on every turn: the dispatcher polls every 50 ms,
    // the heartbeat follows every change of its last error.
    cfg.poll_ms = 50;
    let env = Env::postgres(&cfg, &pg.url);
    env.import("agenda.jsonl", &[scheduled("cita-down1", 1)]);
    let stderr = env.path("serve.log");
    let mut serve = Proc(Some(
        env.command(&["serve"])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap(),
    ));
    assert!(
        wait_until(Duration::from_secs(20), || sent_keys(log.path()).len() == 1),
        "serve sent nothing"
    );
    pg.stop();
    std::thread::sleep(Duration::from_secs(5));
    let text = std::fs::read_to_string(&stderr).unwrap();
    let by_message = warnings(&text);
    pg.resume();
    serve.terminate();
    let total: usize = by_message.values().sum();
    eprintln!("{total} WARN line(s) in 5 s down: {by_message:#?}");
    assert!(total > 0, "nothing logged while the ledger was down:\n{text}");
    let heartbeat: usize = by_message
        .iter()
        .filter(|(m, _)| m.contains("heartbeat"))
        .map(|(_, n)| n)
        .sum();
    assert!(heartbeat >= 1, "the heartbeat's failure was never logged:\n{text}");
    // One line per loop and kind of failure, not one per poll (100 of them).
    for (msg, n) in &by_message {
        assert!(*n <= 3, "{n} lines of {msg:?} in 5 s:\n{text}");
    }
    rt.block_on(sim.shutdown());
}

/// The intention state an engine command's `estado` is evidence of.
fn state_of(estado: &str) -> IntentionState {
    match estado {
        "en_cola" => IntentionState::Accepted,
        "enviado" => IntentionState::Sent,
        "entregado" => IntentionState::Delivered,
        "leido" => IntentionState::Read,
        "fallido" => IntentionState::Failed,
        "cancelado" => IntentionState::Cancelled,
        other => panic!("unexpected estado {other}"),
    }
}

#[test]
fn without_webhooks_the_status_poll_brings_the_ledger_to_the_engines_states() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    // The engine never posts a webhook: it has no URL to post to.
    let sim = start_sim(&rt, log.path(), "", 26);
    let env = Env::new(&Cfg::motor(&sim.base_url()));
    with_policy(&env, "status_poll_minutes = 0");
    let total = 12;
    let events: Vec<String> = (0..total).map(|n| scheduled(&format!("cita-poll{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let mut serve = env.spawn(&["serve"]);
    let engine_says = || -> BTreeMap<String, IntentionState> {
        sim.commands()
            .into_iter()
            .map(|c| (c.idempotency_key, state_of(&c.estado)))
            .collect()
    };
    let ledger_says =
        || -> BTreeMap<String, IntentionState> { env.intentions().into_iter().map(|i| (i.key, i.state)).collect() };
    let agreed = wait_until(Duration::from_secs(30), || {
        let engine = engine_says();
        engine.len() == total && engine.values().all(|s| *s == IntentionState::Read) && ledger_says() == engine
    });
    let out = serve.terminate();
    assert!(
        agreed,
        "the ledger did not reach the engine's states:\nledger {:?}\nengine {:?}\n{out}",
        ledger_says(),
        engine_says()
    );
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), total);
    // The evidence says where it came from: the reconciler's status poll.
    let i = &env.intentions()[0];
    let h = env.history(i.id);
    assert!(
        h.iter().any(|r| r.cause == "reconciler"
            && r.note.as_deref().unwrap_or("").starts_with("status poll")
            && r.signal == "read"),
        "{h:#?}"
    );
    rt.block_on(sim.shutdown());
}

#[test]
fn a_quiet_cloud_message_is_an_attention_case_after_the_window() {
    use unavez::sim::cloud_fake::{CloudFake, CloudFakeOptions};
    use unavez::store::AttentionQuery;
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    // The fake Cloud API accepts (a wamid) and never posts a status.
    let fake = rt
        .block_on(CloudFake::spawn(CloudFakeOptions {
            log: Some(log.path().to_path_buf()),
            ..Default::default()
        }))
        .unwrap();
    let env = Env::new(&Cfg::cloud(&fake.base_url()));
    with_policy(&env, "status_poll_minutes = 1");
    env.import(
        "agenda.jsonl",
        &[scheduled("cita-cloud1", 1), scheduled("cita-cloud2", 2)],
    );
    env.ok(&["dispatch", "--until-idle"]);
    assert_eq!(fake.received().len(), 2);
    let config = unavez::config::Config::load(&env.config).unwrap();
    let rule = config.attention_rule();
    let cases = |now: chrono::DateTime<chrono::Utc>| {
        let mut q = AttentionQuery::new(now);
        q.rule = rule;
        env.store().read(|tx| tx.attention(&q)).unwrap().rows
    };
    let now = chrono::Utc::now();
    for i in env.intentions() {
        assert_eq!(i.state, IntentionState::Accepted, "{}", i.key);
    }
    // Within the window: not a case yet.
    assert!(cases(now).is_empty(), "{:?}", cases(now));
    // A minute without news: both are cases, shown as unconfirmed, and the
    // desk is told to call.
    let later = now + chrono::Duration::seconds(61);
    let rows = cases(later);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        assert_eq!(r.state.as_str(), "unconfirmed", "{r:?}");
    }
    // The console, in a real terminal, lists them in those words (on a
    // configuration whose window has already passed).
    let text = std::fs::read_to_string(&env.config).unwrap();
    let now_config = env.path("now.toml");
    std::fs::write(
        &now_config,
        text.replace("status_poll_minutes = 1\n", "status_poll_minutes = 0\n"),
    )
    .unwrap();
    let config_arg = now_config.to_str().unwrap();
    let console = Console::spawn_with(
        &["--config", config_arg, "tui", "--read-only", "--operator", "recepcion"],
        env.dir.path(),
        &[(CLOUD_TOKEN_ENV, "token-de-prueba")],
    );
    console.wait_for("¿entregada?");
    console.wait_for("llamar: ¿llegó?");
    console.quit();
    assert_eq!(unavez::i18n::ES.reason("unconfirmed"), "sin confirmación de entrega");
    // The engine is asked instead: no such case with the same policy.
    let motor = unavez::config::Config {
        channel: unavez::config::ChannelConfig::default(),
        ..config.clone()
    };
    assert_eq!(motor.attention_rule().unconfirmed_window, None);
}
