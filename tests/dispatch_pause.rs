//! Pausing the embedded services (the console's `p`): a paused dispatcher
//! claims nothing, resumes on request, and its activity notification lets
//! the console refresh without waiting for its tick.

mod dispatch_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dispatch_support::*;
use unavez::channel::motor::MotorChannel;
use unavez::config::Config;
use unavez::dispatch::{Control, ServiceState, Services, Settings};
use unavez::domain::state::IntentionState;
use unavez::tui::refresh::Refresh;
use unavez_testkit::{Backend, on_both};

fn a_paused_dispatcher_claims_nothing_until_resumed_and_then_notifies(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 5);
    let cfg = Cfg::motor(&sim.base_url());
    let env = Env::with(backend, &cfg);
    let events: Vec<String> = (0..5).map(|n| scheduled(&format!("cita-p{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    let due_now = env
        .intentions()
        .iter()
        .filter(|i| i.state == IntentionState::Planned && i.due_at <= chrono::Utc::now())
        .count();
    assert!(due_now > 0, "{:?}", env.state_counts());

    let config = Config::load(&env.config).unwrap();
    let channel = Arc::new(MotorChannel::with_api_key(&config.channel.motor, "clave").unwrap());
    let control = Control::new();
    assert!(control.pause());
    let services = {
        let _rt = rt.enter();
        Services::start_with(&env.db, Settings::from_config(&config), channel, control.clone()).unwrap()
    };
    assert_eq!(services.control().status().state, ServiceState::Paused);

    // A negative check needs some wall time: at a 100 ms poll the paused
    // loop comes round many times; were it claiming, the sends would show.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(sim.stats().requests, 0);
    assert!(
        env.intentions()
            .iter()
            .all(|i| i.attempt_count == 0 && i.state == IntentionState::Planned),
        "{:?}",
        env.state_counts()
    );

    // The console's refresh schedule: an hour-long tick, so only activity
    // can make it due.
    let t0 = Instant::now();
    let mut refresh = Refresh::new(
        Duration::from_secs(3600),
        Duration::from_millis(250),
        Some(control.activity().subscribe()),
        t0,
    );
    assert!(!refresh.due(t0 + Duration::from_millis(300)));

    assert!(control.resume());
    assert_eq!(control.status().state, ServiceState::Running);
    assert!(wait_until(Duration::from_secs(40), || env.settled() && sim.stats().requests > 0));
    assert!(
        refresh.due(t0 + Duration::from_millis(600)),
        "committed results must notify the console before its tick"
    );
    assert_no_duplicates(log.path());

    rt.block_on(services.stop()).unwrap();
    assert_eq!(control.status().state, ServiceState::Stopped);
}

fn pausing_mid_run_lets_the_send_in_flight_finish_and_takes_no_more(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    // Each send spends 0.8 s in the engine, one at a time.
    let sim = start_sim(&rt, log.path(), "latency_ms=800", 6);
    let mut cfg = Cfg::motor(&sim.base_url()).with_motor_timeout(10_000);
    cfg.concurrency = 1;
    cfg.batch_size = 1;
    cfg.lease_seconds = 60;
    let env = Env::with(backend, &cfg);
    let events: Vec<String> = (0..6).map(|n| scheduled(&format!("cita-m{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    let config = Config::load(&env.config).unwrap();
    let channel = Arc::new(MotorChannel::with_api_key(&config.channel.motor, "clave").unwrap());
    let services = {
        let _rt = rt.enter();
        Services::start(&env.db, Settings::from_config(&config), channel).unwrap()
    };
    let control = services.control();
    let dispatching = || {
        env.intentions()
            .iter()
            .filter(|i| i.state == IntentionState::Dispatching)
            .count()
    };
    assert!(wait_until(Duration::from_secs(20), || dispatching() == 1));
    control.pause();
    // The send in flight is answered and recorded, not abandoned.
    assert!(wait_until(Duration::from_secs(20), || dispatching() == 0));
    let rows = env.intentions();
    assert!(
        rows.iter().all(|i| i.state != IntentionState::Uncertain),
        "{:?}",
        env.state_counts()
    );
    let sent = rows.iter().filter(|i| i.attempt_count > 0).count();
    assert!(
        rows.iter().any(|i| i.state == IntentionState::Planned),
        "{:?}",
        env.state_counts()
    );
    std::thread::sleep(Duration::from_millis(1500));
    let after = env.intentions().iter().filter(|i| i.attempt_count > 0).count();
    assert_eq!(after, sent, "no claims while paused: {:?}", env.state_counts());

    control.resume();
    assert!(wait_until(Duration::from_secs(40), || env.settled()));
    assert_no_duplicates(log.path());
    rt.block_on(services.stop()).unwrap();
}

on_both!(
    a_paused_dispatcher_claims_nothing_until_resumed_and_then_notifies,
    pausing_mid_run_lets_the_send_in_flight_finish_and_takes_no_more,
);
