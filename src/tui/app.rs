//! The console's state and its update function.
//!
//! `App` never touches the database: [`App::on_action`] and
//! [`App::on_response`] change the state and return the [`Request`]s the
//! worker should run. Tests drive it with [`super::worker::handle`] and a
//! fixed clock; the running console feeds it keys and the worker's answers.

use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;

use super::keys::{Access, Action, Mode, Screen};
use super::worker::{PendingOp, Request, Response};
use crate::config::Role;
use crate::dispatch::reprocess;
use crate::domain::state::IntentionState;
use crate::i18n::{Strings, fill};
use crate::ops::{OpKind, OpOutcome, OpReport, VerifyOutcome, allowed};
use crate::store::{AttentionQuery, AttentionRow, Board, CounterQuery, IntentionDetail, Page, RowKind, UpcomingRow};

/// A paginated list with a cursor.
#[derive(Debug, Clone)]
pub struct Rows<T> {
    pub rows: Vec<T>,
    pub total: i64,
    pub offset: u32,
    pub selected: usize,
    pub loading: bool,
    pub loaded: bool,
}

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Rows {
            rows: Vec::new(),
            total: 0,
            offset: 0,
            selected: 0,
            loading: false,
            loaded: false,
        }
    }
}

impl<T> Rows<T> {
    fn set(&mut self, page: Page<T>) {
        self.rows = page.rows;
        self.total = page.total;
        self.offset = page.offset;
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
        self.loading = false;
        self.loaded = true;
    }
    pub fn current(&self) -> Option<&T> {
        self.rows.get(self.selected)
    }
    fn up(&mut self) {
        self.selected = self.selected.saturating_sub(1);
    }
    fn down(&mut self) {
        if self.selected + 1 < self.rows.len() {
            self.selected += 1;
        }
    }
}

/// What an action is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub intention_id: Option<i64>,
    pub key: Option<String>,
    pub state: Option<String>,
    pub commitment_id: i64,
    pub commitment_ref: String,
}

/// An open action form: the reason is mandatory, the responsible is the
/// signed-in operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    pub op: OpKind,
    pub target: Target,
    pub reason: String,
    /// Verify only: index into [`App::verify_choices`].
    pub outcome: usize,
    pub error: Option<&'static str>,
}

/// Manual verification outcomes offered by the form.
pub const VERIFY_OUTCOMES: [VerifyOutcome; 2] = [VerifyOutcome::Received, VerifyOutcome::NotReceived];

/// What a verification records: a person's evidence, or the channel's
/// answer to a lookup made now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyChoice {
    Manual(VerifyOutcome),
    Channel,
}

/// The second step: exactly what will happen, waiting for `s`.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    pub op: PendingOp,
    pub reason: String,
    pub scope: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashKind {
    Info,
    Success,
    Refused,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    pub kind: FlashKind,
    pub text: String,
}

/// The embedded dispatcher as the header shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatcherView {
    /// `None`: not embedded (`--no-dispatch`).
    pub running: Option<bool>,
    pub last_error: Option<String>,
    pub queue: Option<i64>,
}

/// One Tablero counter and the rows behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardItem {
    pub label: String,
    pub value: String,
    pub query: Option<CounterQuery>,
}

/// The Reproceso screen: a day, the states to act on, the dry run.
#[derive(Debug, Clone, Default)]
pub struct ReprocessView {
    /// Index into `IntentionState::ALL`.
    pub cursor: usize,
    pub states: Vec<IntentionState>,
    pub plan: Option<Vec<reprocess::Item>>,
    /// After a real run: the report (items carry their resulting state).
    pub done: Option<Box<reprocess::Report>>,
    pub error: Option<String>,
}

/// The whole console state.
pub struct App {
    /// A channel is configured: verification can ask it.
    pub channel_verify: bool,
    pub reprocess: ReprocessView,
    pub t: &'static Strings,
    pub operator: String,
    pub access: Access,
    pub tz: Tz,
    pub now: DateTime<Utc>,
    pub screen: Screen,
    pub back: Vec<Screen>,
    pub mode: Mode,
    pub attention: Rows<AttentionRow>,
    pub upcoming: Rows<UpcomingRow>,
    pub counter: Rows<AttentionRow>,
    pub counter_query: Option<CounterQuery>,
    pub board: Option<Board>,
    pub board_selected: usize,
    pub day: NaiveDate,
    pub detail: Option<Box<IntentionDetail>>,
    pub detail_loading: bool,
    pub detail_scroll: u16,
    pub filter: String,
    pub input: String,
    pub form: Option<Form>,
    pub confirm: Option<Confirmation>,
    pub flash: Option<Flash>,
    pub dispatcher: DispatcherView,
    pub quit: bool,
    pub page_size: u32,
    /// Próximas citas shows `[now - 1 h, now + this]`.
    pub upcoming_hours: i64,
    pub ops_in_flight: usize,
}

impl App {
    pub fn new(t: &'static Strings, operator: &str, access: Access, tz: Tz, now: DateTime<Utc>) -> App {
        App {
            channel_verify: false,
            reprocess: ReprocessView {
                states: vec![IntentionState::Planned, IntentionState::Uncertain],
                ..ReprocessView::default()
            },
            t,
            operator: operator.to_string(),
            access,
            tz,
            now,
            screen: Screen::Attention,
            back: Vec::new(),
            mode: Mode::Normal,
            attention: Rows::default(),
            upcoming: Rows::default(),
            counter: Rows::default(),
            counter_query: None,
            board: None,
            board_selected: 0,
            day: now.with_timezone(&tz).date_naive(),
            detail: None,
            detail_loading: false,
            detail_scroll: 0,
            filter: String::new(),
            input: String::new(),
            form: None,
            confirm: None,
            flash: None,
            dispatcher: DispatcherView::default(),
            quit: false,
            page_size: 50,
            upcoming_hours: 72,
            ops_in_flight: 0,
        }
    }

    pub fn role(&self) -> Role {
        self.access.role
    }

    /// The verification outcomes the form offers (the channel lookup only
    /// when a channel is configured).
    pub fn verify_choices(&self) -> Vec<VerifyChoice> {
        let mut v: Vec<VerifyChoice> = VERIFY_OUTCOMES.iter().map(|o| VerifyChoice::Manual(*o)).collect();
        if self.channel_verify {
            v.push(VerifyChoice::Channel);
        }
        v
    }

    pub fn choice_label(&self, c: VerifyChoice) -> &'static str {
        match c {
            VerifyChoice::Manual(o) => self.t.outcome(o),
            VerifyChoice::Channel => self.t.outcome_channel,
        }
    }

    /// The requests that (re)load the current screen, plus the status line.
    pub fn load(&mut self) -> Vec<Request> {
        let mut out = vec![Request::Status { now: self.now }];
        out.extend(self.load_screen(self.screen));
        out
    }

    fn filter_opt(&self) -> Option<String> {
        let f = self.filter.trim();
        (!f.is_empty()).then(|| f.to_string())
    }

    fn load_screen(&mut self, screen: Screen) -> Vec<Request> {
        match screen {
            Screen::Attention => {
                self.attention.loading = true;
                let mut q = AttentionQuery::new(self.now);
                q.filter = self.filter_opt();
                q.limit = self.page_size;
                q.offset = self.attention.offset;
                vec![Request::Attention(q)]
            }
            Screen::Upcoming => {
                self.upcoming.loading = true;
                vec![Request::Upcoming {
                    from: self.now - Duration::hours(1),
                    to: self.now + Duration::hours(self.upcoming_hours),
                    filter: self.filter_opt(),
                    limit: self.page_size,
                    offset: self.upcoming.offset,
                }]
            }
            Screen::Board => vec![Request::Board {
                day: self.day.format("%Y-%m-%d").to_string(),
            }],
            Screen::Counter => match &self.counter_query {
                Some(q) => {
                    self.counter.loading = true;
                    vec![Request::Counter {
                        query: q.clone(),
                        limit: self.page_size,
                        offset: self.counter.offset,
                    }]
                }
                None => vec![],
            },
            Screen::Detail => match self.detail.as_ref().map(|d| d.intention.id) {
                Some(id) => vec![Request::Detail {
                    id_or_key: id.to_string(),
                }],
                None => vec![],
            },
            Screen::Reprocess => vec![Request::ReprocessPlan {
                day: self.day.format("%Y-%m-%d").to_string(),
                states: self.reprocess.states.clone(),
            }],
        }
    }

    /// A clock tick: move `now` and refresh what is on screen unless a load
    /// is still running (so a slow database never piles requests up).
    pub fn tick(&mut self, now: DateTime<Utc>) -> Vec<Request> {
        self.now = now;
        let busy = match self.screen {
            Screen::Attention => self.attention.loading,
            Screen::Upcoming => self.upcoming.loading,
            Screen::Counter => self.counter.loading,
            Screen::Detail => self.detail_loading,
            _ => false,
        };
        if busy || self.mode != Mode::Normal {
            vec![Request::Status { now }]
        } else {
            self.load()
        }
    }

    fn flash(&mut self, kind: FlashKind, text: String) {
        self.flash = Some(Flash { kind, text });
    }

    fn goto(&mut self, screen: Screen) -> Vec<Request> {
        if screen == self.screen {
            return self.load_screen(screen);
        }
        if matches!(
            screen,
            Screen::Attention | Screen::Upcoming | Screen::Board | Screen::Reprocess
        ) {
            self.back.clear();
            self.filter.clear();
        } else {
            self.back.push(self.screen);
        }
        self.screen = screen;
        self.load_screen(screen)
    }

    /// The breadcrumb trail, e.g. `Atención › Detalle`.
    pub fn breadcrumbs(&self) -> String {
        let mut parts: Vec<&str> = self.back.iter().map(|s| s.title(self.t)).collect();
        parts.push(self.screen.title(self.t));
        parts.join(" › ")
    }

    /// What an action would apply to on the current screen.
    pub fn target(&self) -> Option<Target> {
        let from_row = |r: &AttentionRow| Target {
            intention_id: r.intention_id,
            key: r.key.clone(),
            state: Some(r.state.clone()),
            commitment_id: r.commitment_id,
            commitment_ref: r.commitment_ref.clone(),
        };
        match self.screen {
            Screen::Attention => self.attention.current().map(from_row),
            Screen::Counter => self.counter.current().map(from_row),
            Screen::Upcoming => self.upcoming.current().map(|u| Target {
                intention_id: None,
                key: None,
                state: None,
                commitment_id: u.commitment_id,
                commitment_ref: u.commitment_ref.clone(),
            }),
            Screen::Detail => self.detail.as_ref().map(|d| Target {
                intention_id: Some(d.intention.id),
                key: Some(d.intention.key.clone()),
                state: Some(d.intention.state.to_string()),
                commitment_id: d.intention.commitment_id,
                commitment_ref: d.intention.commitment_ref.clone(),
            }),
            Screen::Board | Screen::Reprocess => None,
        }
    }

    /// The Tablero's counters in display order.
    pub fn board_items(&self) -> Vec<BoardItem> {
        let Some(b) = &self.board else { return Vec::new() };
        let t = self.t;
        let count = |states: &[&str]| -> i64 {
            b.by_state
                .iter()
                .filter(|(s, _)| states.contains(&s.as_str()))
                .map(|(_, n)| n)
                .sum()
        };
        let q = |states: &[&str], reason: Option<&str>| {
            Some(CounterQuery {
                day: b.day.clone(),
                states: states.iter().map(|s| s.to_string()).collect(),
                reason: reason.map(str::to_string),
            })
        };
        let mut items = Vec::new();
        for (label, states) in [
            (t.board_planned, &["planned"][..]),
            (t.board_uncertain, &["uncertain"][..]),
            (t.board_review, &["review"][..]),
            (t.board_failed, &["failed"][..]),
            (t.board_in_flight, &["dispatching", "accepted", "sent"][..]),
            (t.board_delivered, &["delivered"][..]),
            (t.board_read, &["read"][..]),
        ] {
            items.push(BoardItem {
                label: label.to_string(),
                value: count(states).to_string(),
                query: q(states, None),
            });
        }
        for (reason, n) in &b.closures {
            items.push(BoardItem {
                label: format!("{} {}", t.board_cancelled_by, t.reason(reason)),
                value: n.to_string(),
                query: q(&["cancelled"], Some(reason)),
            });
        }
        items.push(BoardItem {
            label: t.board_dup_keys.into(),
            value: b.duplicate_keys.to_string(),
            query: None,
        });
        items.push(BoardItem {
            label: t.board_dup_events.into(),
            value: b.duplicate_events.to_string(),
            query: None,
        });
        items.push(BoardItem {
            label: t.board_opt_outs.into(),
            value: b.opt_outs.to_string(),
            query: None,
        });
        let latency = match b.latency_ms_median {
            Some(ms) => format!("{:.1} s (n={})", ms as f64 / 1000.0, b.latency_samples),
            None => t.detail_none.to_string(),
        };
        items.push(BoardItem {
            label: t.board_latency.into(),
            value: latency,
            query: None,
        });
        items
    }

    /// Applies one action; returns the database work it calls for.
    pub fn on_action(&mut self, a: Action) -> Vec<Request> {
        match self.mode {
            Mode::Filter | Mode::Command => return self.on_input(a),
            Mode::Form => return self.on_form(a),
            Mode::Confirm => return self.on_confirm(a),
            Mode::Help => {
                match a {
                    Action::Quit => self.quit = true,
                    _ => self.mode = Mode::Normal,
                }
                return vec![];
            }
            Mode::Normal => {}
        }
        match a {
            Action::Quit => {
                self.quit = true;
                vec![]
            }
            Action::Help => {
                self.mode = Mode::Help;
                vec![]
            }
            Action::Back => self.back_action(),
            Action::Refresh => {
                self.flash(FlashKind::Info, self.t.flash_refreshed.into());
                self.load()
            }
            Action::OpenFilter => {
                self.mode = Mode::Filter;
                self.input = self.filter.clone();
                vec![]
            }
            Action::OpenCommand => {
                self.mode = Mode::Command;
                self.input.clear();
                vec![]
            }
            Action::NextScreen | Action::PrevScreen => {
                let tabs = Screen::tabs(self.role());
                let i = tabs.iter().position(|s| *s == self.screen).unwrap_or(0);
                let n = tabs.len();
                let next = if a == Action::NextScreen {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.goto(tabs[next])
            }
            Action::Goto(s) => self.goto(s),
            Action::Up | Action::Down => {
                let up = a == Action::Up;
                match self.screen {
                    Screen::Attention => {
                        if up {
                            self.attention.up()
                        } else {
                            self.attention.down()
                        }
                    }
                    Screen::Upcoming => {
                        if up {
                            self.upcoming.up()
                        } else {
                            self.upcoming.down()
                        }
                    }
                    Screen::Counter => {
                        if up {
                            self.counter.up()
                        } else {
                            self.counter.down()
                        }
                    }
                    Screen::Board => {
                        let n = self.board_items().len();
                        self.board_selected = if up {
                            self.board_selected.saturating_sub(1)
                        } else {
                            (self.board_selected + 1).min(n.saturating_sub(1))
                        };
                    }
                    Screen::Detail => {
                        self.detail_scroll = if up {
                            self.detail_scroll.saturating_sub(1)
                        } else {
                            self.detail_scroll + 1
                        }
                    }
                    Screen::Reprocess => {
                        let n = IntentionState::ALL.len();
                        let c = self.reprocess.cursor;
                        self.reprocess.cursor = if up { c.saturating_sub(1) } else { (c + 1).min(n - 1) };
                    }
                }
                vec![]
            }
            Action::PageUp | Action::PageDown => self.page(a == Action::PageDown),
            Action::Open => self.open(),
            Action::DayPrev | Action::DayNext => {
                self.day += Duration::days(if a == Action::DayNext { 1 } else { -1 });
                self.load_screen(self.screen)
            }
            Action::ToggleState => {
                let st = IntentionState::ALL[self.reprocess.cursor.min(IntentionState::ALL.len() - 1)];
                match self.reprocess.states.iter().position(|s| *s == st) {
                    Some(i) => {
                        self.reprocess.states.remove(i);
                    }
                    None => self.reprocess.states.push(st),
                }
                self.reprocess.states.sort();
                self.load_screen(Screen::Reprocess)
            }
            Action::Op(op) => self.open_form(op),
            Action::Refused(op) => {
                let role = self.t.role(self.role());
                let msg = fill(
                    self.t.flash_role_refused,
                    &[("role", role), ("action", self.t.op_label(op))],
                );
                self.flash(FlashKind::Refused, msg);
                vec![]
            }
            Action::ReadOnly => {
                self.flash(FlashKind::Refused, self.t.flash_read_only.into());
                vec![]
            }
            Action::Input(_)
            | Action::Backspace
            | Action::NextField
            | Action::Submit
            | Action::Confirm
            | Action::Abort => vec![],
        }
    }

    fn back_action(&mut self) -> Vec<Request> {
        if !self.filter.is_empty() && matches!(self.screen, Screen::Attention | Screen::Upcoming) {
            self.filter.clear();
            self.reset_offset();
            return self.load_screen(self.screen);
        }
        match self.back.pop() {
            Some(prev) => {
                self.screen = prev;
                self.load_screen(prev)
            }
            None => vec![],
        }
    }

    fn reset_offset(&mut self) {
        match self.screen {
            Screen::Attention => (self.attention.offset, self.attention.selected) = (0, 0),
            Screen::Upcoming => (self.upcoming.offset, self.upcoming.selected) = (0, 0),
            Screen::Counter => (self.counter.offset, self.counter.selected) = (0, 0),
            _ => {}
        }
    }

    fn page(&mut self, forward: bool) -> Vec<Request> {
        let size = self.page_size;
        let (offset, total) = match self.screen {
            Screen::Attention => (&mut self.attention.offset, self.attention.total),
            Screen::Upcoming => (&mut self.upcoming.offset, self.upcoming.total),
            Screen::Counter => (&mut self.counter.offset, self.counter.total),
            _ => return vec![],
        };
        let next = if forward {
            if i64::from(*offset + size) >= total {
                return vec![];
            }
            *offset + size
        } else {
            if *offset == 0 {
                return vec![];
            }
            offset.saturating_sub(size)
        };
        *offset = next;
        match self.screen {
            Screen::Attention => self.attention.selected = 0,
            Screen::Upcoming => self.upcoming.selected = 0,
            _ => self.counter.selected = 0,
        }
        self.load_screen(self.screen)
    }

    fn open(&mut self) -> Vec<Request> {
        match self.screen {
            Screen::Attention | Screen::Counter => {
                let id = match self.screen {
                    Screen::Attention => self.attention.current().and_then(|r| r.intention_id),
                    _ => self.counter.current().and_then(|r| r.intention_id),
                };
                match id {
                    Some(id) => self.open_detail(id.to_string()),
                    None => {
                        self.flash(FlashKind::Info, self.t.flash_no_selection.into());
                        vec![]
                    }
                }
            }
            Screen::Upcoming => {
                // The latest notification is the one the desk asks about.
                let id = self
                    .upcoming
                    .current()
                    .and_then(|u| u.notifications.last())
                    .map(|n| n.intention_id);
                match id {
                    Some(id) => self.open_detail(id.to_string()),
                    None => {
                        self.flash(FlashKind::Info, self.t.flash_no_selection.into());
                        vec![]
                    }
                }
            }
            Screen::Board => {
                let item = self.board_items().into_iter().nth(self.board_selected);
                match item.and_then(|i| i.query) {
                    Some(q) => {
                        self.counter_query = Some(q);
                        self.counter = Rows::default();
                        self.goto(Screen::Counter)
                    }
                    None => vec![],
                }
            }
            Screen::Detail | Screen::Reprocess => vec![],
        }
    }

    fn open_detail(&mut self, id_or_key: String) -> Vec<Request> {
        self.detail_scroll = 0;
        self.detail_loading = true;
        if self.screen != Screen::Detail {
            self.back.push(self.screen);
            self.screen = Screen::Detail;
        }
        vec![Request::Detail { id_or_key }]
    }

    fn open_form(&mut self, op: OpKind) -> Vec<Request> {
        if op == OpKind::Reprocess {
            if self.reprocess.plan.is_none() {
                let why = self
                    .reprocess
                    .error
                    .clone()
                    .unwrap_or_else(|| self.t.reprocess_unavailable.into());
                self.flash(FlashKind::Refused, why);
                return vec![];
            }
            let day = self.day.format("%Y-%m-%d").to_string();
            let target = Target {
                intention_id: None,
                key: None,
                state: None,
                commitment_id: 0,
                commitment_ref: day,
            };
            self.form = Some(Form {
                op,
                target,
                reason: String::new(),
                outcome: 0,
                error: None,
            });
            self.mode = Mode::Form;
            return vec![];
        }
        let target = match self.target() {
            Some(t) if op == OpKind::ManualContact || t.intention_id.is_some() => t,
            _ => {
                self.flash(FlashKind::Info, self.t.flash_no_selection.into());
                return vec![];
            }
        };
        self.form = Some(Form {
            op,
            target,
            reason: String::new(),
            outcome: 0,
            error: None,
        });
        self.mode = Mode::Form;
        vec![]
    }

    fn on_input(&mut self, a: Action) -> Vec<Request> {
        match a {
            Action::Input(c) => self.input.push(c),
            Action::Backspace => {
                self.input.pop();
            }
            Action::Abort => {
                self.mode = Mode::Normal;
                self.input.clear();
            }
            Action::Submit => {
                let text = std::mem::take(&mut self.input);
                let was = self.mode;
                self.mode = Mode::Normal;
                if was == Mode::Filter {
                    self.filter = text.trim().to_string();
                    self.reset_offset();
                    return self.load_screen(self.screen);
                }
                return self.run_command(text.trim());
            }
            Action::Quit => self.quit = true,
            _ => {}
        }
        vec![]
    }

    /// `:` commands: screen names (Spanish or English), `q`, and
    /// `detalle <id|key>` to jump to one intention.
    fn run_command(&mut self, cmd: &str) -> Vec<Request> {
        let (word, arg) = cmd.split_once(' ').map(|(w, a)| (w, a.trim())).unwrap_or((cmd, ""));
        match word.to_lowercase().as_str() {
            "" => vec![],
            "q" | "quit" | "salir" => {
                self.quit = true;
                vec![]
            }
            "atencion" | "atención" | "attention" => self.goto(Screen::Attention),
            "citas" | "proximas" | "próximas" | "upcoming" => self.goto(Screen::Upcoming),
            "tablero" | "board" => self.goto(Screen::Board),
            "reproceso" | "reprocess" if Screen::tabs(self.role()).contains(&Screen::Reprocess) => {
                self.goto(Screen::Reprocess)
            }
            "detalle" | "detail" | "d" if !arg.is_empty() => self.open_detail(arg.to_string()),
            _ => {
                self.flash(FlashKind::Refused, fill(self.t.flash_unknown_command, &[("cmd", cmd)]));
                vec![]
            }
        }
    }

    fn on_form(&mut self, a: Action) -> Vec<Request> {
        let Some(form) = self.form.as_mut() else {
            self.mode = Mode::Normal;
            return vec![];
        };
        match a {
            Action::Input(c) => {
                form.reason.push(c);
                form.error = None;
            }
            Action::Backspace => {
                form.reason.pop();
            }
            Action::NextField if form.op == OpKind::Verify => {
                form.outcome = (form.outcome + 1) % if self.channel_verify { 3 } else { 2 }
            }
            Action::Abort => {
                self.form = None;
                self.mode = Mode::Normal;
                self.flash(FlashKind::Info, self.t.flash_aborted.into());
            }
            Action::Submit => {
                if form.reason.trim().is_empty() {
                    form.error = Some(self.t.form_reason_required);
                    return vec![];
                }
                let form = form.clone();
                self.form = None;
                self.confirm = Some(self.confirmation(&form));
                self.mode = Mode::Confirm;
            }
            Action::Quit => self.quit = true,
            _ => {}
        }
        vec![]
    }

    /// The exact scope of an action, in words, for the confirmation step.
    fn confirmation(&self, f: &Form) -> Confirmation {
        let t = self.t;
        let target = &f.target;
        let id = target.intention_id.map(|i| i.to_string()).unwrap_or_default();
        let key = target.key.clone().unwrap_or_default();
        let state = target.state.as_deref().map(|s| t.state(s)).unwrap_or("");
        let reason = f.reason.trim().to_string();
        let choices = self.verify_choices();
        let choice = choices[f.outcome % choices.len()];
        let outcome_label = self.choice_label(choice);
        let vals = [
            ("id", id.as_str()),
            ("key", key.as_str()),
            ("state", state),
            ("reason", reason.as_str()),
            ("operator", self.operator.as_str()),
            ("commitment", target.commitment_ref.as_str()),
            ("outcome", outcome_label),
        ];
        let iid = target.intention_id.unwrap_or_default();
        let (op, scope) = match f.op {
            OpKind::Cancel => (PendingOp::Cancel { intention_id: iid }, fill(t.scope_cancel, &vals)),
            OpKind::Verify => (
                match choice {
                    VerifyChoice::Manual(outcome) => PendingOp::Verify {
                        intention_id: iid,
                        outcome,
                    },
                    VerifyChoice::Channel => PendingOp::VerifyChannel { intention_id: iid },
                },
                fill(t.scope_verify, &vals),
            ),
            OpKind::AuthorizeResend => (PendingOp::Resend { intention_id: iid }, fill(t.scope_resend, &vals)),
            OpKind::ManualContact => (
                PendingOp::ManualContact {
                    commitment_id: target.commitment_id,
                    intention_id: target.intention_id,
                },
                fill(t.scope_manual_contact, &vals),
            ),
            OpKind::Reprocess => {
                let states = self
                    .reprocess
                    .states
                    .iter()
                    .map(|s| t.state(s.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ");
                let count = self.reprocess.plan.as_ref().map(|p| p.len()).unwrap_or(0).to_string();
                let plan = summary_text(self.reprocess.plan.as_deref().unwrap_or(&[]));
                let scope = fill(
                    t.scope_reprocess,
                    &[
                        ("day", target.commitment_ref.as_str()),
                        ("states", states.as_str()),
                        ("count", count.as_str()),
                        ("reason", reason.as_str()),
                    ],
                );
                (
                    PendingOp::Reprocess {
                        day: target.commitment_ref.clone(),
                        states: self.reprocess.states.clone(),
                    },
                    format!("{scope} — {plan}"),
                )
            }
        };
        Confirmation { op, reason, scope }
    }

    fn on_confirm(&mut self, a: Action) -> Vec<Request> {
        match a {
            Action::Confirm => {
                self.mode = Mode::Normal;
                let Some(c) = self.confirm.take() else { return vec![] };
                // The library checks again; this only avoids a pointless trip.
                if !allowed(self.role(), c.op.kind()) || self.access.read_only {
                    self.flash(FlashKind::Refused, self.t.flash_read_only.into());
                    return vec![];
                }
                self.ops_in_flight += 1;
                if let PendingOp::Reprocess { day, states } = c.op {
                    return vec![Request::Reprocess {
                        day,
                        states,
                        operator: self.operator.clone(),
                        role: self.role(),
                        reason: c.reason,
                    }];
                }
                vec![Request::Op {
                    op: c.op,
                    operator: self.operator.clone(),
                    role: self.role(),
                    reason: c.reason,
                    now: self.now,
                }]
            }
            Action::Abort => {
                self.confirm = None;
                self.mode = Mode::Normal;
                self.flash(FlashKind::Info, self.t.flash_aborted.into());
                vec![]
            }
            Action::Quit => {
                self.quit = true;
                vec![]
            }
            _ => vec![],
        }
    }

    /// Applies one answer of the worker.
    pub fn on_response(&mut self, r: Response) -> Vec<Request> {
        match r {
            Response::ReprocessPlan(Ok(items)) => {
                self.reprocess.plan = Some(items);
                self.reprocess.error = None;
            }
            Response::ReprocessPlan(Err(e)) => {
                self.reprocess.plan = None;
                self.reprocess.error = Some(if e.is_empty() {
                    self.t.reprocess_unavailable.to_string()
                } else {
                    e
                });
            }
            Response::Reprocessed(r) => {
                self.ops_in_flight = self.ops_in_flight.saturating_sub(1);
                match r {
                    Ok(report) => {
                        let what = format!(
                            "{} {}: {}",
                            self.t.act_reprocess,
                            report.day,
                            summary_text(&report.items)
                        );
                        self.flash(FlashKind::Success, fill(self.t.flash_done, &[("what", &what)]));
                        self.reprocess.done = Some(report);
                    }
                    Err(e) => self.flash(FlashKind::Error, fill(self.t.flash_error, &[("why", &e)])),
                }
                return self.load();
            }
            Response::Attention(Ok(p)) => self.attention.set(p),
            Response::Upcoming(Ok(p)) => self.upcoming.set(p),
            Response::Counter(Ok(p)) => self.counter.set(p),
            Response::Board(Ok(b)) => {
                self.board = Some(b);
                self.board_selected = self.board_selected.min(self.board_items().len().saturating_sub(1));
            }
            Response::Detail(Ok(d)) => {
                self.detail = Some(d);
                self.detail_loading = false;
            }
            Response::Status { queue, last_error } => {
                self.dispatcher.queue = queue;
                // A start-up error (channel unavailable) stays until restart.
                if self.dispatcher.running.is_some() {
                    self.dispatcher.last_error = last_error;
                }
            }
            Response::Attention(Err(e))
            | Response::Upcoming(Err(e))
            | Response::Counter(Err(e))
            | Response::Board(Err(e))
            | Response::Detail(Err(e)) => {
                self.attention.loading = false;
                self.upcoming.loading = false;
                self.counter.loading = false;
                self.detail_loading = false;
                self.flash(FlashKind::Error, fill(self.t.flash_error, &[("why", &e)]));
            }
            Response::Op(r) => {
                self.ops_in_flight = self.ops_in_flight.saturating_sub(1);
                match r {
                    Ok(report) => self.op_flash(&report),
                    Err(e) => self.flash(FlashKind::Error, fill(self.t.flash_error, &[("why", &e)])),
                }
                return self.load();
            }
        }
        vec![]
    }

    fn op_flash(&mut self, r: &OpReport) {
        let t = self.t;
        let target = match (&r.intention_id, &r.intention_key) {
            (Some(id), Some(key)) => format!("#{id} {key}"),
            _ => r.commitment_ref.clone(),
        };
        let action = t.op_label(r.op);
        let (kind, text) = match &r.outcome {
            OpOutcome::Done {
                new_intention: Some((id, key)),
                ..
            } => {
                let what = fill(
                    t.done_new,
                    &[
                        ("action", action),
                        ("target", &target),
                        ("id", &id.to_string()),
                        ("key", key),
                    ],
                );
                (FlashKind::Success, fill(t.flash_done, &[("what", &what)]))
            }
            OpOutcome::Done { state: Some(s), .. } => {
                let what = fill(
                    t.done_state,
                    &[("action", action), ("target", &target), ("state", t.state(s.as_str()))],
                );
                (FlashKind::Success, fill(t.flash_done, &[("what", &what)]))
            }
            OpOutcome::Done { closed, .. } => {
                let what = fill(
                    t.done_closed,
                    &[("action", action), ("target", &target), ("n", &closed.to_string())],
                );
                (FlashKind::Success, fill(t.flash_done, &[("what", &what)]))
            }
            OpOutcome::Recorded { state } => (
                FlashKind::Info,
                fill(
                    t.recorded_only,
                    &[
                        ("action", action),
                        ("target", &target),
                        ("state", t.state(state.as_str())),
                    ],
                ),
            ),
            OpOutcome::Refused(why) => (FlashKind::Refused, fill(t.flash_refused, &[("why", &t.refusal(why))])),
        };
        self.flash(kind, text);
    }
}

/// `dispatch 3 · reconcile 2 · keep_evidence 10`, in plan order.
pub fn summary_text(items: &[reprocess::Item]) -> String {
    let mut counts: Vec<(reprocess::Action, usize)> = Vec::new();
    for i in items {
        match counts.iter_mut().find(|(a, _)| *a == i.action) {
            Some((_, n)) => *n += 1,
            None => counts.push((i.action, 1)),
        }
    }
    counts
        .iter()
        .map(|(a, n)| format!("{} {n}", a.as_str()))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Compact age: `45 s`, `12 min`, `3 h`, `2 d`.
pub fn age(now: DateTime<Utc>, since: DateTime<Utc>) -> String {
    let s = (now - since).num_seconds().max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

/// Whether a row is an intention (actions apply) or a reschedule request.
pub fn is_intention(r: &AttentionRow) -> bool {
    r.kind == RowKind::Intention
}
