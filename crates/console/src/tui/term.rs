//! The terminal and the event loop.
//!
//! `ratatui::try_init` enables raw mode and the alternate screen and chains
//! a panic hook that restores the terminal before the panic message is
//! printed; [`run`] restores it again on every exit path. The loop only
//! draws, reads keys and exchanges messages with the database worker: it
//! never waits on SQLite.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use chrono::Utc;
use crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind, MouseButton, MouseEventKind,
};

use super::app::App;
use super::keys::{Access, action_for};
use super::listen;
use super::refresh::Refresh;
use super::theme::{Palette, shade};
use super::view;
use super::worker::{self, ReprocessCtx, Request, Response, WorkerCtx};
use crate::channel::Channel;
use crate::config::{Config, Role};
use crate::dispatch::{Control, Settings};
use crate::ledger::Ledger;
use crate::store::{Store, StoreError};
use crate::templates::Templates;
use std::sync::Arc;

/// Everything `unavez tui` needs.
pub struct ConsoleOptions {
    pub config: Config,
    pub templates: Templates,
    /// The process's one handle to the ledger (shared with the embedded
    /// dispatcher and server, when there are).
    pub ledger: Ledger,
    pub operator: String,
    pub role: Role,
    /// The OS account vouches for `operator` (see `ops::identity`), or
    /// identity does not matter (no operator is mapped to an account);
    /// `?` help says so when neither holds.
    pub identity_verified: bool,
    /// The OS account running the console.
    pub account: String,
    pub read_only: bool,
    /// How often visible panels refresh.
    pub refresh: Duration,
    /// `Some(true)`: the dispatcher runs embedded; `None`: not embedded.
    pub dispatcher_running: Option<bool>,
    /// Why the embedded dispatcher could not start, for the header.
    pub dispatcher_error: Option<String>,
    /// The same, typed, for the header's words.
    pub dispatcher_stop: Option<super::app::StopCause>,
    /// The channel reprocessing sends through (`None`: dry runs only).
    pub channel: Option<Arc<dyn Channel>>,
    /// The runtime the channel lives on: the console's async work (channel
    /// calls, reprocessing) runs there, from its database thread.
    pub runtime: tokio::runtime::Handle,
    /// The embedded services' switch, status and activity (`None`: not
    /// embedded): `p` pauses through it, panels refresh on its activity.
    /// (On a PostgreSQL ledger they also refresh on the ledger's change
    /// notices, see `listen`.)
    pub control: Option<Control>,
}

/// At most one activity-driven refresh per this interval.
pub const ACTIVITY_DEBOUNCE: Duration = Duration::from_millis(250);

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the console's database thread stopped unexpectedly")]
    WorkerGone,
}

/// Runs the console until the operator quits.
pub fn run(opts: ConsoleOptions) -> Result<(), ConsoleError> {
    // The ledger the command opened, on a connection of the console's own
    // (attached, not migrated: another process holding the write lock must
    // not keep the screen blank), with generic plans on PostgreSQL.
    let store = Store::attach_location(&opts.ledger.location().for_console())?;
    let (req_tx, req_rx) = mpsc::channel::<Request>();
    let (resp_tx, resp_rx) = mpsc::channel();
    // What says the ledger changed: the embedded services' activity, and
    // on PostgreSQL the ledger's own notices, whoever committed the change
    // (another host's dispatcher, an import, another console). The
    // listener's thread ends once the schedule is dropped.
    let activity = opts.control.as_ref().map(|c| c.activity().subscribe());
    let mut refresh = Refresh::new(opts.refresh, ACTIVITY_DEBOUNCE, activity, Instant::now());
    if let Some(notices) = listen::start(opts.ledger.location())? {
        refresh = refresh.also(notices.changes);
    }
    let mut app = new_app(&opts);
    let worker = worker::spawn(store, worker_ctx(opts, resp_tx.clone()), req_rx, resp_tx)?;
    let mut terminal = ratatui::try_init()?;
    // Click selects a row or a tab, the wheel scrolls.
    crossterm::execute!(std::io::stdout(), EnableMouseCapture)?;
    let result = event_loop(&mut app, &mut terminal, &req_tx, &resp_rx, refresh);
    let _ = crossterm::execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
    drop(req_tx);
    let _ = worker.join();
    result
}

/// What the database worker needs: the config and templates, and for
/// reprocessing the ledger, the channel and the runtime it runs on
/// (progress reports come back on `progress`).
fn worker_ctx(opts: ConsoleOptions, progress: mpsc::Sender<Response>) -> WorkerCtx {
    WorkerCtx {
        reprocess: Some(ReprocessCtx {
            ledger: opts.ledger.clone(),
            settings: Arc::new(Settings::from_config(&opts.config)),
            channel: opts.channel.clone(),
            runtime: opts.runtime.clone(),
            progress: Some(progress),
        }),
        config: opts.config,
        templates: opts.templates,
        control: opts.control.clone(),
    }
}

/// The console's state for the operator, role and terminal at hand
/// (`NO_COLOR`, `COLORFGBG`).
fn new_app(opts: &ConsoleOptions) -> App {
    let t = crate::i18n::strings(opts.config.language);
    let mut app = App::new(
        t,
        &opts.operator,
        Access {
            role: opts.role,
            read_only: opts.read_only,
        },
        opts.config.tz(),
        Utc::now(),
    );
    app.identity_unverified = !opts.identity_verified;
    app.os_account = opts.account.clone();
    app.dispatcher.running = opts.dispatcher_running;
    // https://no-color.org: present and not empty.
    app.no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let colorfgbg = std::env::var("COLORFGBG").ok();
    app.palette = Palette::of(shade(opts.config.console.theme, colorfgbg.as_deref()));
    app.channel_verify = opts.channel.is_some();
    app.attention_rule = opts.config.attention_rule();
    app.dispatcher.last_error = opts.dispatcher_error.clone();
    app.dispatcher.stopped_because = opts.dispatcher_stop.clone();
    app.max_resends_per_day = opts.config.policy.max_resends_per_day;
    app.due_grace_minutes = opts.config.alerts.thresholds().due_grace.num_minutes();
    app.feed_stale_minutes = opts.config.alerts.feed_stale_minutes;
    app
}

/// Hands requests to the database worker.
fn send(req_tx: &mpsc::Sender<Request>, reqs: Vec<Request>) -> Result<(), ConsoleError> {
    for r in reqs {
        req_tx.send(r).map_err(|_| ConsoleError::WorkerGone)?;
    }
    Ok(())
}

/// Draws, reads the terminal's events, applies the worker's answers and
/// refreshes when due, until the operator quits.
fn event_loop(
    app: &mut App,
    terminal: &mut ratatui::DefaultTerminal,
    req_tx: &mpsc::Sender<Request>,
    resp_rx: &mpsc::Receiver<Response>,
    mut refresh: Refresh,
) -> Result<(), ConsoleError> {
    send(req_tx, app.load())?;
    while !app.quit {
        app.frame = app.frame.wrapping_add(1);
        terminal.draw(|f| view::draw(f, app))?;
        if event::poll(Duration::from_millis(100))? {
            let reqs = on_event(app, terminal, event::read()?)?;
            send(req_tx, reqs)?;
        }
        loop {
            match resp_rx.try_recv() {
                Ok(r) => {
                    let reqs = app.on_response(r);
                    send(req_tx, reqs)?;
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return Err(ConsoleError::WorkerGone),
            }
        }
        send(req_tx, app.grace_clock(Utc::now()))?;
        if refresh.due(Instant::now()) {
            let reqs = app.tick(Utc::now());
            send(req_tx, reqs)?;
        }
    }
    Ok(())
}

/// A key press, a click or the wheel, as the app's actions.
fn on_event(app: &mut App, terminal: &ratatui::DefaultTerminal, ev: Event) -> Result<Vec<Request>, ConsoleError> {
    Ok(match ev {
        Event::Key(k) if k.kind != KeyEventKind::Release => match action_for(&k, app.screen, app.access, app.mode) {
            Some(a) => app.on_action(a),
            None => vec![],
        },
        Event::Mouse(m) if app.mode == super::keys::Mode::Normal => match m.kind {
            MouseEventKind::ScrollDown => app.on_action(super::keys::Action::Down),
            MouseEventKind::ScrollUp => app.on_action(super::keys::Action::Up),
            MouseEventKind::Down(MouseButton::Left) => {
                let size = terminal.size()?;
                app.on_click(m.column, m.row, size.width, size.height)
            }
            _ => vec![],
        },
        _ => vec![],
    })
}
