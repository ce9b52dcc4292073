//! The console's state and its update function.
//!
//! `App` never touches the database: [`App::on_action`] and
//! [`App::on_response`] change the state and return the [`Request`]s the
//! worker should run. Tests drive it with [`super::worker::handle`] and a
//! fixed clock; the running console feeds it keys and the worker's answers.
//!
//! `update.rs` holds navigation, `dialogs.rs` typing, forms, the two-step
//! confirmation and the worker's answers, `command.rs` the `:` command
//! line, `board.rs` the Tablero's counters.

mod board;
mod calls;
mod command;
mod dialogs;
mod feeds;
pub mod guard;
mod load;
mod patient;
mod rows;
mod update;

pub use board::{BoardItem, duration_text};
pub use calls::{CallsView, Deferred, GRACE_SECONDS, LOG_LINES};
pub use feeds::FeedsView;
pub use patient::{CARD_AHEAD_DAYS, CARD_BEHIND_HOURS, PatientView, SavedCursor};
pub use rows::{RowIdentity, Rows};

use chrono::{DateTime, Duration, NaiveDate, Utc};
use chrono_tz::Tz;

use super::failure::Failure;
use super::keys::{Access, Action, Mode, Screen};
use super::theme::{self, Palette};
use super::worker::{OpError, PendingOp, Request, Response};
use crate::board::DayFigures;
use crate::config::Role;
use crate::dispatch::{ServiceState, reprocess};
use crate::domain::alert::{BlockedTemplate, Reading};
use crate::domain::attention::{AttentionRule, Situation};
use crate::domain::heartbeat::Heartbeat;
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;
use crate::i18n::{Strings, fill};
use crate::ops::{Case, OpKind, OpOutcome, OpReport, ResendEvidence, VerifyOutcome, allowed};
use crate::store::{
    AttentionQuery, AttentionRow, AttentionView, Board, CounterQuery, HourCount, IntentionDetail, RowKind, UpcomingRow,
};

/// What an action is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The Atención case the action is on, if it is one.
    pub case: Option<Case>,
    /// When the case's situation began as the operator saw it.
    pub seen: Option<DateTime<Utc>>,
    pub intention_id: Option<i64>,
    pub key: Option<String>,
    /// What the operator saw the case as, typed (named by i18n's
    /// exhaustive match).
    pub state: Option<Situation>,
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

/// The second step: exactly what will happen, waiting for `s` (or, for
/// a resend of a message the customer already has, the typed word).
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    pub op: PendingOp,
    /// The target's situation as the form saw it.
    pub seen: Option<DateTime<Utc>>,
    pub reason: String,
    pub scope: String,
    /// Resends only: the evidence shown before anything is decided.
    pub resend: Option<ResendConfirm>,
}

/// A resend's confirmation: the family's evidence (loading until the
/// worker answers) and the acknowledgement being typed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResendConfirm {
    pub evidence: Option<Box<ResendEvidence>>,
    pub word: String,
    pub error: Option<String>,
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
    /// When it was shown: it fades after [`FLASH_SECONDS`].
    pub at: DateTime<Utc>,
}

/// How long a flash message stays on the line.
pub const FLASH_SECONDS: i64 = 6;

/// How often the Tablero re-reads its day figures while it is shown
/// (`ctrl-r` and another day re-read them at once).
pub const BOARD_DAY_SECONDS: i64 = 60;

/// The embedded dispatcher as the header shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatcherView {
    /// `None`: not embedded (`--no-dispatch`).
    pub running: Option<bool>,
    /// Running but not claiming (an operator paused it).
    pub paused: bool,
    pub last_error: Option<String>,
    pub queue: Option<i64>,
    /// The live dispatchers of other processes, from their heartbeat rows
    /// (`None`: not read yet).
    pub others: Option<Vec<Heartbeat>>,
    /// Another process holds the ledger's write lock: actions wait.
    pub locked: bool,
    /// Why the embedded dispatcher could not start, in the operator's
    /// words in the header (issue 25 §5).
    pub stopped_because: Option<StopCause>,
}

/// Why the embedded dispatcher is stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCause {
    /// The channel's key is not in its environment variable.
    MissingKey { var: String },
    /// Anything else, as the error said it (`:error` shows it whole).
    Other(String),
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
    /// Why there is no plan (not available here, the ledger failed…).
    pub error: Option<Failure>,
    /// A real run in progress: how far it is (the gauge).
    pub running: Option<reprocess::Progress>,
}

/// The whole console state.
pub struct App {
    /// A channel is configured: verification can ask it.
    pub channel_verify: bool,
    /// Which intentions are Atención's cases (`Config::attention_rule`).
    pub attention_rule: AttentionRule,
    pub reprocess: ReprocessView,
    pub t: &'static Strings,
    pub operator: String,
    /// Operators are mapped to OS accounts and this session's account is
    /// not the operator's (`--operator` on a shared account): `?` help says
    /// so, once. A single-user installation is not "unverified": identity
    /// does not matter there (issue 25 §5).
    pub identity_unverified: bool,
    /// The OS account running the console, for that line.
    pub os_account: String,
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
    /// The Tablero's chart data.
    pub board_hours: Vec<HourCount>,
    pub board_selected: usize,
    pub day: NaiveDate,
    pub detail: Option<Box<IntentionDetail>>,
    pub detail_loading: bool,
    pub detail_scroll: u16,
    /// Detalle shows the channel's own words (`e`), not the plain history.
    pub detail_technical: bool,
    pub filter: String,
    /// Atención shows the day's handled cases instead of the open ones.
    pub show_handled: bool,
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
    /// `NO_COLOR` is set: draw without colours (highlights stay).
    pub no_color: bool,
    /// This session's actions, newest last: what `L` lists.
    pub log: Vec<(DateTime<Utc>, String)>,
    /// The call list, its chooser and the action waiting out its grace.
    pub calls: CallsView,
    // tablero, themes, progress, errors
    /// The colours every view draws with (`[console] theme`).
    pub palette: &'static Palette,
    /// The Tablero's day figures: latency and queue depth by the hour.
    pub board_day: Option<DayFigures>,
    /// Which day they were asked for, and when: an hourly picture is
    /// re-read every [`BOARD_DAY_SECONDS`], not on every tick (at a
    /// million intentions the read costs tens of milliseconds).
    pub board_day_asked: Option<(NaiveDate, DateTime<Utc>)>,
    /// The last error a request met, whole: `enter` while its flash is on
    /// the line, or `:error`, shows it.
    pub failure: Option<Failure>,
    /// `:doctor`'s last report (`None`: asked, not answered yet).
    pub doctor: Option<Vec<crate::doctor::Check>>,
    /// `:calendario`'s held disappearances (issue 27 §2).
    pub feeds: FeedsView,
    /// Crossed alert thresholds (the header's banner), most urgent first,
    /// and the blocked templates behind `template_blocked`.
    pub alerts: Vec<Reading>,
    pub blocked_templates: Vec<BlockedTemplate>,
    /// The channels paused behind `channel_paused`.
    pub paused_channels: Vec<crate::domain::fault::ChannelPause>,
    /// The calendar feeds' health, so the banner names the feed that
    /// lost appointments or stopped answering, not just a count.
    pub feed_health: Vec<crate::domain::alert::FeedHealth>,
    /// Frames drawn: what a spinner turns by.
    pub frame: u64,
    // --- §1/§7 (issue 25): patient card, chooser, kept filter, help ---
    /// The patient card and the `:paciente` chooser.
    pub patient: PatientView,
    /// Where the lists' cursors were before a search began: `esc` puts
    /// them back.
    pub before_filter: Option<SavedCursor>,
    /// The `?` help's first line shown.
    pub help_scroll: u16,
    /// `[policy] max_resends_per_day`: what the hints' resend guard reads
    /// (issue 25 §3).
    pub max_resends_per_day: u32,
    /// `[alerts]`'s grace before a due message counts as late, in minutes:
    /// what the banner's count is about (issue 25 §5).
    pub due_grace_minutes: i64,
    /// `[alerts] feed_stale_minutes`, for the banner's words.
    pub feed_stale_minutes: u32,
}

impl App {
    pub fn new(t: &'static Strings, operator: &str, access: Access, tz: Tz, now: DateTime<Utc>) -> App {
        App {
            channel_verify: false,
            attention_rule: AttentionRule::default(),
            reprocess: ReprocessView {
                states: vec![IntentionState::Planned, IntentionState::Uncertain],
                ..ReprocessView::default()
            },
            t,
            operator: operator.to_string(),
            identity_unverified: false,
            os_account: String::new(),
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
            board_hours: Vec::new(),
            board_selected: 0,
            day: now.with_timezone(&tz).date_naive(),
            detail: None,
            detail_loading: false,
            detail_scroll: 0,
            detail_technical: false,
            filter: String::new(),
            show_handled: false,
            input: String::new(),
            form: None,
            confirm: None,
            flash: None,
            dispatcher: DispatcherView::default(),
            quit: false,
            page_size: 50,
            upcoming_hours: 72,
            ops_in_flight: 0,
            log: Vec::new(),
            calls: CallsView::default(),
            no_color: false,
            palette: &theme::DARK,
            board_day: None,
            board_day_asked: None,
            failure: None,
            doctor: None,
            feeds: FeedsView::default(),
            alerts: Vec::new(),
            blocked_templates: Vec::new(),
            paused_channels: Vec::new(),
            feed_health: Vec::new(),
            frame: 0,
            patient: PatientView::default(),
            before_filter: None,
            help_scroll: 0,
            max_resends_per_day: 2,
            due_grace_minutes: 15,
            feed_stale_minutes: 30,
        }
    }

    /// The guards' facts of the case under the cursor, where the console
    /// shows them (Atención and a counter's rows).
    pub fn guard_facts(&self) -> Option<crate::domain::guard::Facts> {
        let row = match self.screen {
            Screen::Attention => self.attention.current(),
            Screen::Counter => self.counter.current(),
            Screen::Patient => return self.patient_facts(),
            _ => None,
        }?;
        Some(guard::row_facts(self.role(), row, self.resend_ctx()))
    }

    /// What the resend guard reads besides the case.
    pub fn resend_ctx(&self) -> guard::ResendCtx {
        guard::ResendCtx {
            max_per_day: self.max_resends_per_day,
            tz: self.tz,
            now: self.now,
        }
    }

    /// Whether `op`'s guard accepts it on the case under the cursor (see
    /// `guard.rs` for what the console can judge before the action does).
    pub fn key_verdict(&self, op: OpKind) -> crate::domain::guard::Verdict {
        if self.screen == Screen::Detail {
            return self.detail_verdict(op);
        }
        guard::verdict(op, self.guard_facts().as_ref())
    }

    /// Detalle knows the intention, not its commitment nor its family: it
    /// judges before any form only what the intention's state decides (a
    /// cancel, a verification); the rest the action judges.
    fn detail_verdict(&self, op: OpKind) -> crate::domain::guard::Verdict {
        let Some(d) = &self.detail else { return Ok(()) };
        if !matches!(op, OpKind::Cancel | OpKind::Verify) {
            return Ok(());
        }
        let i = &d.intention;
        let facts = crate::domain::guard::Facts {
            role: self.role(),
            state: i.state,
            state_reason: i.state_reason.clone(),
            commitment: crate::domain::guard::CommitmentState::Open,
            appointment: true,
            resend: crate::domain::guard::ResendFacts::single(i.state, self.max_resends_per_day),
            ask: crate::domain::guard::ResendAsk::None,
        };
        guard::verdict(op, Some(&facts))
    }

    /// Lines the header's banner takes under the title line: one while an
    /// alert is crossed or the ledger is locked, else none.
    pub fn banner_lines(&self) -> u16 {
        u16::from(self.dispatcher.locked || !self.alerts.is_empty())
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

    /// The start of today in the configured zone.
    pub fn day_start(&self) -> DateTime<Utc> {
        let today = self.now.with_timezone(&self.tz).date_naive();
        today
            .and_hms_opt(0, 0, 0)
            .and_then(|t| t.and_local_timezone(self.tz).earliest())
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or(self.now)
    }

    fn flash(&mut self, kind: FlashKind, text: String) {
        self.flash = Some(Flash {
            kind,
            text,
            at: self.now,
        });
    }

    /// The breadcrumb trail, e.g. `Atención › Detalle`.
    pub fn breadcrumbs(&self) -> String {
        let title = |s: &Screen| match s {
            Screen::Patient => self.patient_title(),
            // A Tablero counter's rows are named by the counter ("Tablero ›
            // Leídas"), not by the Tablero again.
            Screen::Counter => self.counter_label().unwrap_or_else(|| s.title(self.t).to_string()),
            s => s.title(self.t).to_string(),
        };
        let mut parts: Vec<String> = self.back.iter().map(title).collect();
        parts.push(title(&self.screen));
        parts.join(" › ")
    }

    /// The label of the Tablero counter whose rows are shown.
    fn counter_label(&self) -> Option<String> {
        let q = self.counter_query.as_ref()?;
        self.board_items()
            .into_iter()
            .find(|i| i.query.as_ref() == Some(q))
            .map(|i| i.label)
    }

    /// What an action would apply to on the current screen.
    pub fn target(&self) -> Option<Target> {
        let from_row = |r: &AttentionRow| Target {
            case: Some(Case {
                kind: r.kind,
                subject_id: r.subject_id,
            }),
            seen: Some(r.since),
            intention_id: r.intention_id,
            key: r.key.clone(),
            state: Some(r.state),
            // Only a technician's channel event may have no commitment,
            // and no action of a technician's needs one.
            commitment_id: r.commitment_id.unwrap_or_default(),
            commitment_ref: r.commitment_ref.clone(),
        };
        match self.screen {
            Screen::Attention => self.attention.current().map(from_row),
            Screen::Counter => self.counter.current().map(from_row),
            Screen::Upcoming => self.upcoming.current().map(|u| Target {
                case: None,
                seen: None,
                intention_id: None,
                key: None,
                state: None,
                commitment_id: u.commitment_id,
                commitment_ref: u.commitment_ref.clone(),
            }),
            Screen::Detail => self.detail.as_ref().map(|d| Target {
                case: Some(Case::intention(d.intention.id)),
                seen: Some(d.intention.state_changed_at),
                intention_id: Some(d.intention.id),
                key: Some(d.intention.key.clone()),
                state: Some(Situation::State(d.intention.state)),
                commitment_id: d.intention.commitment_id,
                commitment_ref: d.intention.commitment_ref.clone(),
            }),
            Screen::Patient => self.patient_target(),
            Screen::Board | Screen::Reprocess => None,
        }
    }
}

/// `dispatch 3 · reconcile 2 · keep_evidence 10`, in plan order.
pub fn summary_text(t: &Strings, items: &[reprocess::Item]) -> String {
    let mut counts: Vec<(reprocess::Action, usize)> = Vec::new();
    for i in items {
        match counts.iter_mut().find(|(a, _)| *a == i.action) {
            Some((_, n)) => *n += 1,
            None => counts.push((i.action, 1)),
        }
    }
    counts
        .iter()
        .map(|(a, n)| format!("{} {n}", t.reprocess_action(*a)))
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
