//! Shared fixture for the console tests: a seeded demo clinic at a fixed
//! clock, and helpers to drive `App` synchronously through the worker.
#![allow(dead_code)]

pub mod pty;

use std::path::PathBuf;

use chrono::{DateTime, TimeZone, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use unavez::config::{Config, Role};
use unavez::demo::{self, DemoOptions};
use unavez::planner::Planner;
use unavez::store::Store;
use unavez::templates::Templates;
use unavez::tui::app::App;
use unavez::tui::keys::{Access, Action};
use unavez::tui::worker::{Request, WorkerCtx, handle};

/// 08:00 in Lima on a Tuesday: the desk opens.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 13, 0, 0).unwrap()
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub store: Store,
    pub ctx: WorkerCtx,
}

/// A clinic of `appointments` appointments with showcase outcomes, on the
/// fixed day of [`now`] (what snapshots need).
pub fn clinic(appointments: usize) -> Fixture {
    clinic_at(appointments, now())
}

/// The same clinic around `now`: for a test that runs the real binary,
/// which checks validity on the wall clock (a fixture on a fixed day
/// would hold only past appointments once that day is over).
pub fn clinic_at(appointments: usize, now: DateTime<Utc>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("console.db");
    let mut store = Store::open(&db).unwrap();
    let mut config = Config::default();
    // Nobody dispatches in these tests, so messages due at 08:00 would be
    // an alert: off here, so the screens keep their full height in every
    // snapshot (tests/tui_alerts.rs shows the banner).
    config.alerts.due_unsent = 0;
    let templates = Templates::embedded();
    {
        let planner = Planner {
            policy: &config.policy,
            templates: &templates,
            tz: config.tz(),
        };
        // A clinic whose morning already went by: cases have waited.
        let opts = DemoOptions {
            appointments,
            seed: 7,
            replay: demo::Replay::AtEventTimes,
        };
        demo::seed_clinic(&mut store, &planner, now, opts).unwrap();
    }
    demo::showcase_outcomes(&mut store, now).unwrap();
    // A customer replied REPROGRAMAR: the request lands in Atención.
    store
        .write(|tx| match tx.commitment("cita-1012")? {
            Some(c) => tx.request_reschedule(
                c.id,
                "REPROGRAMAR",
                "fixture-inbound-1",
                now - chrono::Duration::minutes(10),
            ),
            None => Ok(()),
        })
        .unwrap();
    Fixture {
        dir,
        db,
        store,
        ctx: WorkerCtx {
            config,
            templates,
            reprocess: None,
            control: None,
        },
    }
}

impl Fixture {
    pub fn app(&self, operator: &str, role: Role) -> App {
        let mut app = App::new(
            unavez::i18n::strings(self.ctx.config.language),
            operator,
            Access { role, read_only: false },
            self.ctx.config.tz(),
            now(),
        );
        app.due_grace_minutes = self.ctx.config.alerts.thresholds().due_grace.num_minutes();
        app
    }

    /// Runs requests (and the requests their answers call for) to the end.
    pub fn run(&mut self, app: &mut App, reqs: Vec<Request>) {
        let mut queue: std::collections::VecDeque<Request> = reqs.into();
        while let Some(r) = queue.pop_front() {
            let resp = handle(&mut self.store, &self.ctx, r);
            queue.extend(app.on_response(resp));
        }
    }

    /// Applies an action and runs what it asks of the database.
    pub fn act(&mut self, app: &mut App, a: Action) {
        let reqs = app.on_action(a);
        self.run(app, reqs);
    }

    /// A console for `operator` in `role` with its screens loaded.
    pub fn loaded(&mut self, role: Role, operator: &str) -> App {
        let mut app = self.app(operator, role);
        let reqs = app.load();
        self.run(&mut app, reqs);
        app
    }

    /// Types `text` into `/` and submits it.
    pub fn search(&mut self, app: &mut App, text: &str) {
        self.act(app, Action::OpenFilter);
        self.type_text(app, text);
        self.act(app, Action::Submit);
    }

    /// Types `text` into `:` and submits it.
    pub fn command(&mut self, app: &mut App, text: &str) {
        self.act(app, Action::OpenCommand);
        self.type_text(app, text);
        self.act(app, Action::Submit);
    }

    pub fn type_text(&mut self, app: &mut App, text: &str) {
        for c in text.chars() {
            self.act(app, Action::Input(c));
        }
    }
}

/// Renders the app at a fixed size and returns the screen as text.
pub fn render(app: &App, width: u16, height: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(width, height)).unwrap();
    term.draw(|f| unavez::tui::view::draw(f, app)).unwrap();
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
