//! Dispatcher heartbeats (issue 10: "a second console on the same ledger
//! shows the real state of the dispatcher that is running"): a real
//! `unavez serve` process is seen as running by a console that runs no
//! dispatcher of its own, read exactly as the console reads it; killed, it
//! stops counting as running once its beats are three intervals old;
//! stopped cleanly, it says so at once. In-process services write a change
//! of state at once, not at their next beat.

mod dispatch_support;
mod tui_support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use dispatch_support::*;
use unavez::channel::motor::MotorChannel;
use unavez::config::{Config, Role};
use unavez::dispatch::{Control, Services, Settings};
use unavez::domain::heartbeat::{DispatcherState, Heartbeat, Liveness};
use unavez::store::Store;
use unavez::templates::Templates;
use unavez::tui::app::App;
use unavez::tui::keys::Access;
use unavez::tui::worker::{Request, Response, WorkerCtx, handle};
use unavez_testkit::{Backend, on_both};

/// A ledger whose dispatchers beat every `beat_ms` (a dead engine: there
/// is nothing to send, only to be seen running).
fn env_beating(backend: Backend, beat_ms: u64) -> Env {
    let env = Env::with(backend, &Cfg::motor("http://127.0.0.1:9"));
    let text = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace("[dispatcher]\n", &format!("[dispatcher]\nheartbeat_ms = {beat_ms}\n"));
    std::fs::write(&env.config, text).unwrap();
    env
}

/// The header status exactly as a console with no dispatcher of its own
/// reads it (its database worker, `Request::Status`), and the header it
/// draws from it at 100 columns.
fn console_view(db: &Path, config: &Config) -> (Vec<Heartbeat>, String) {
    let mut store = Store::open(db).unwrap();
    let ctx = WorkerCtx {
        config: config.clone(),
        templates: Templates::embedded(),
        reprocess: None,
        control: None,
    };
    let now = Utc::now();
    let resp = handle(&mut store, &ctx, Request::Status { now });
    let Response::Status { others, .. } = &resp else {
        panic!("{resp:?}")
    };
    let others = others.clone().expect("the heartbeat rows were read");
    let mut app = App::new(
        unavez::i18n::strings(config.language),
        "tecnico",
        Access {
            role: Role::Technician,
            read_only: true,
        },
        config.tz(),
        now,
    );
    app.on_response(resp);
    let header = tui_support::render(&app, 100, 24).lines().next().unwrap().to_string();
    (others, header)
}

fn rows(db: &Path) -> Vec<Heartbeat> {
    let mut store = Store::open(db).unwrap();
    store
        .read(|tx| tx.heartbeats(Utc::now() - chrono::Duration::hours(1)))
        .unwrap()
}

fn a_serve_process_is_running_for_a_second_console_until_it_is_killed(backend: Backend) {
    let env = env_beating(backend, 500);
    let config = Config::load(&env.config).unwrap();
    let mut serve = env.spawn(&["serve", "--no-server"]);
    let pid = serve.pid();
    let mut seen = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            let (others, header) = console_view(&env.db, &config);
            let mine = others
                .iter()
                .any(|h| h.pid == pid && h.state == DispatcherState::Running);
            seen = Some(header);
            mine
        }),
        "no running dispatcher with pid {pid}; header: {seen:?}"
    );
    let (_, header) = console_view(&env.db, &config);
    let host = unavez::dispatch::heartbeat::host_name();
    assert!(
        header.contains(&format!("● despachador: en marcha · {host} {pid}")),
        "{header}"
    );
    let row = rows(&env.db).into_iter().find(|h| h.pid == pid).unwrap();
    assert_eq!(row.host, host);
    assert!(row.owner.is_some(), "the OS account runs it: {row:?}");

    // Killed: no goodbye. Within three beats (1.5 s) and a margin it is
    // no longer shown as running, and the console says nothing dispatches.
    serve.kill();
    let killed_at = std::time::Instant::now();
    assert!(wait_until(Duration::from_secs(10), || console_view(&env.db, &config)
        .0
        .is_empty()));
    assert!(
        killed_at.elapsed() >= Duration::from_millis(500),
        "gone before it could have missed a beat"
    );
    let (_, header) = console_view(&env.db, &config);
    assert!(header.contains("■ despachador: detenido"), "{header}");
    // The row itself still says running: it is the beat's age that tells.
    let row = rows(&env.db).into_iter().find(|h| h.pid == pid).unwrap();
    assert_eq!(row.state, DispatcherState::Running);
    assert_eq!(row.liveness(Utc::now()), Liveness::Gone);
}

fn a_clean_shutdown_says_stopped_at_once(backend: Backend) {
    // Beats a minute apart: only the goodbye can make it stopped in time.
    let env = env_beating(backend, 60_000);
    let config = Config::load(&env.config).unwrap();
    let mut serve = env.spawn(&["serve", "--no-server"]);
    let pid = serve.pid();
    assert!(wait_until(Duration::from_secs(30), || {
        console_view(&env.db, &config).0.iter().any(|h| h.pid == pid)
    }));
    serve.terminate();
    let row = rows(&env.db).into_iter().find(|h| h.pid == pid).unwrap();
    assert_eq!(row.state, DispatcherState::Stopped);
    assert_eq!(row.liveness(Utc::now()), Liveness::Stopped);
    assert!(console_view(&env.db, &config).0.is_empty());
}

fn a_one_shot_dispatch_leaves_a_stopped_row(backend: Backend) {
    let env = env_beating(backend, 500);
    env.ok(&["dispatch", "--until-idle"]);
    let all = rows(&env.db);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].state, DispatcherState::Stopped);
}

fn embedded_services_write_a_pause_at_once_and_stop_last(backend: Backend) {
    let rt = runtime();
    let env = env_beating(backend, 60_000);
    let config = Config::load(&env.config).unwrap();
    let channel = Arc::new(MotorChannel::with_api_key(&config.channel.motor, "clave").unwrap());
    let control = Control::new();
    let mut settings = Settings::from_config(&config);
    settings.run_by = Some("supervisora".into());
    let services = {
        let _rt = rt.enter();
        Services::start_with(&env.db, settings, channel, control.clone()).unwrap()
    };
    let id = control.run_id().expect("the services' heartbeat id");
    let state = || {
        rows(&env.db)
            .into_iter()
            .find(|h| h.id == id)
            .map(|h| (h.state, h.owner))
    };
    assert!(wait_until(Duration::from_secs(10), || state()
        == Some((DispatcherState::Running, Some("supervisora".into())))));
    assert!(control.pause());
    // The next beat is a minute away: only the change writes this.
    assert!(
        wait_until(Duration::from_secs(5), || state().map(|s| s.0)
            == Some(DispatcherState::Paused)),
        "{:?}",
        state()
    );
    // A console embedding these services leaves its own row out.
    let mut store = Store::open(&env.db).unwrap();
    let ctx = WorkerCtx {
        config: config.clone(),
        templates: Templates::embedded(),
        reprocess: None,
        control: Some(control.clone()),
    };
    match handle(&mut store, &ctx, Request::Status { now: Utc::now() }) {
        Response::Status { others, .. } => assert_eq!(others, Some(vec![])),
        r => panic!("{r:?}"),
    }
    rt.block_on(services.stop()).unwrap();
    assert_eq!(state().map(|s| s.0), Some(DispatcherState::Stopped));
}

on_both!(
    a_serve_process_is_running_for_a_second_console_until_it_is_killed,
    a_clean_shutdown_says_stopped_at_once,
    a_one_shot_dispatch_leaves_a_stopped_row,
    embedded_services_write_a_pause_at_once_and_stop_last,
);
