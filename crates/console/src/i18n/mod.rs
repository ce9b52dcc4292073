//! The console's string table: every word a person reads on screen lives
//! here, Spanish by default and English with `language = "en"`.
//!
//! One struct of `&'static str` per language (rather than lookups by string
//! key) so that a missing translation is a compile error, not a blank label.
//! Templates with placeholders use `{name}` and are filled with [`fill`].

use crate::config::{Language, Role};
use crate::domain::attention::{NextStep, Situation};
use crate::domain::channel_event::EventStatus;
use crate::domain::state::IntentionState;
use crate::ops::VerifyOutcome;
use crate::tui::colon::ColonCommand;

/// Every label, hint and message of the console.
#[derive(Debug)]
pub struct Strings {
    pub app_title: &'static str,
    pub screen_attention: &'static str,
    pub screen_upcoming: &'static str,
    pub screen_board: &'static str,
    pub screen_detail: &'static str,
    pub screen_reprocess: &'static str,
    pub screen_help: &'static str,
    pub read_only: &'static str,
    /// Header mark of a console whose operator no OS account vouches for.
    pub identity_unverified: &'static str,
    pub dispatcher: &'static str,
    pub dispatcher_off: &'static str,
    pub dispatcher_running: &'static str,
    pub dispatcher_paused: &'static str,
    pub dispatcher_stopped: &'static str,
    pub queue: &'static str,
    pub last_error: &'static str,
    pub loading: &'static str,
    pub empty_list: &'static str,
    pub filter: &'static str,
    pub page: &'static str,
    // Columns.
    pub col_commitment: &'static str,
    pub col_time: &'static str,
    pub col_customer: &'static str,
    pub col_purpose: &'static str,
    pub col_state: &'static str,
    pub col_age: &'static str,
    pub col_evidence: &'static str,
    pub col_status: &'static str,
    pub col_notifications: &'static str,
    pub col_counter: &'static str,
    pub col_value: &'static str,
    pub col_action: &'static str,
    pub col_count: &'static str,
    pub col_why: &'static str,
    pub reschedule_request: &'static str,
    pub needs_call: &'static str,
    pub confirmed: &'static str,
    pub manual_contact_done: &'static str,
    pub cancelled_appt: &'static str,
    pub scheduled: &'static str,
    pub no_evidence: &'static str,
    // Board.
    pub board_day: &'static str,
    pub board_planned: &'static str,
    pub board_uncertain: &'static str,
    pub board_review: &'static str,
    pub board_failed: &'static str,
    pub board_delivered: &'static str,
    pub board_read: &'static str,
    pub board_in_flight: &'static str,
    pub board_cancelled_by: &'static str,
    pub board_dup_keys: &'static str,
    pub board_dup_events: &'static str,
    pub board_opt_outs: &'static str,
    pub board_latency: &'static str,
    pub board_hint: &'static str,
    // Detail.
    pub detail_content: &'static str,
    pub detail_history: &'static str,
    pub detail_attempts: &'static str,
    pub detail_related: &'static str,
    pub detail_to: &'static str,
    pub detail_due: &'static str,
    pub detail_text: &'static str,
    pub detail_template: &'static str,
    pub detail_authorized: &'static str,
    pub detail_recorded_only: &'static str,
    pub detail_none: &'static str,
    // Reprocess.
    pub reprocess_day: &'static str,
    pub reprocess_states: &'static str,
    pub reprocess_hint: &'static str,
    pub reprocess_unavailable: &'static str,
    pub reprocess_preview: &'static str,
    // Actions (labels used by the registry, the footer and help).
    pub act_cancel: &'static str,
    pub act_verify: &'static str,
    pub act_resend: &'static str,
    pub act_manual_contact: &'static str,
    pub act_reprocess: &'static str,
    /// The `p` key: pauses or resumes, whichever applies.
    pub act_pause_toggle: &'static str,
    pub act_pause_dispatch: &'static str,
    pub act_resume_dispatch: &'static str,
    pub act_filter: &'static str,
    pub act_command: &'static str,
    pub act_help: &'static str,
    pub act_back: &'static str,
    pub act_refresh: &'static str,
    pub act_quit: &'static str,
    pub act_open: &'static str,
    pub act_next_screen: &'static str,
    pub act_prev_screen: &'static str,
    pub act_move: &'static str,
    pub act_page: &'static str,
    pub act_day: &'static str,
    // Forms and confirmation.
    pub form_reason: &'static str,
    pub form_responsible: &'static str,
    pub form_outcome: &'static str,
    pub form_submit_hint: &'static str,
    pub form_reason_required: &'static str,
    pub outcome_received: &'static str,
    pub outcome_not_received: &'static str,
    pub outcome_channel: &'static str,
    pub confirm_title: &'static str,
    pub confirm_hint: &'static str,
    pub scope_cancel: &'static str,
    pub scope_verify: &'static str,
    pub scope_resend: &'static str,
    pub scope_manual_contact: &'static str,
    pub scope_reprocess: &'static str,
    pub scope_pause: &'static str,
    pub scope_resume: &'static str,
    // Flash messages.
    pub flash_role_refused: &'static str,
    pub flash_read_only: &'static str,
    pub flash_no_selection: &'static str,
    pub flash_aborted: &'static str,
    pub flash_done: &'static str,
    pub flash_refused: &'static str,
    pub flash_error: &'static str,
    pub flash_unknown_command: &'static str,
    pub flash_refreshed: &'static str,
    pub flash_no_dispatcher: &'static str,
    pub done_paused: &'static str,
    pub done_resumed: &'static str,
    pub help_title: &'static str,
    pub help_roles: &'static str,
    pub role_front_desk: &'static str,
    pub role_supervisor: &'static str,
    pub role_technician: &'static str,
    pub done_state: &'static str,
    pub done_new: &'static str,
    pub done_closed: &'static str,
    pub recorded_only: &'static str,
    pub ref_in_flight: &'static str,
    pub ref_uncertain: &'static str,
    pub ref_channel_has_it: &'static str,
    pub ref_delivered: &'static str,
    pub ref_closed: &'static str,
    pub ref_not_sent: &'static str,
    pub ref_resend_pending: &'static str,
    /// The same, naming who authorized the pending resend and when.
    pub ref_resend_pending_by: &'static str,
    pub ref_stale: &'static str,
    pub ref_commitment_cancelled: &'static str,
    pub ref_expired: &'static str,
    pub ref_not_appointment: &'static str,
    pub ref_no_lookup: &'static str,
    pub ref_channel_unsure: &'static str,
    pub ref_channel_no_record: &'static str,
    pub ref_no_command_id: &'static str,
    pub ref_channel_unavailable: &'static str,
    /// `(code, label)` for intention states and row kinds.
    pub states: &'static [(&'static str, &'static str)],
    /// Atención's pseudo-states ([`Situation`]), by an exhaustive match in
    /// [`Strings::situation`]: a dispatch whose lease expired, a message
    /// the channel took and never confirmed, a reschedule request, a
    /// refused booking event.
    pub situation_stuck: &'static str,
    pub situation_unconfirmed: &'static str,
    pub situation_reschedule: &'static str,
    pub situation_refused_event: &'static str,
    /// `(code, label)` for closure reasons.
    pub reasons: &'static [(&'static str, &'static str)],
    // Resend guard (issue 9): refusals, the confirmation's evidence, the
    // typed acknowledgement word, and the command line's lines.
    pub ref_acknowledge_delivery: &'static str,
    pub ref_daily_cap: &'static str,
    pub resend_word: &'static str,
    pub resend_evidence_title: &'static str,
    pub resend_evidence_loading: &'static str,
    pub resend_original: &'static str,
    pub resend_nth: &'static str,
    pub resend_accepted: &'static str,
    pub resend_delivered: &'static str,
    pub resend_read: &'static str,
    pub resend_no_evidence: &'static str,
    pub resend_authorized_by: &'static str,
    pub resend_by_system: &'static str,
    pub resend_cap_line: &'static str,
    pub resend_would_refuse: &'static str,
    pub resend_reached_warning: &'static str,
    pub resend_type_word: &'static str,
    pub resend_word_mismatch: &'static str,
    pub cli_resend_created: &'static str,
    pub cli_resend_acknowledged: &'static str,
    pub cli_refused: &'static str,
    /// The "message" column of an Atención row that is a booking event
    /// refused as a conflict.
    pub refused_event: &'static str,
    // The work queue (issue 10).
    pub act_resolve: &'static str,
    pub act_toggle_handled: &'static str,
    pub act_top: &'static str,
    pub act_bottom: &'static str,
    pub scope_resolve: &'static str,
    pub flash_changed: &'static str,
    pub no_results: &'static str,
    pub handled_none: &'static str,
    pub handled_title: &'static str,
    pub handled_by: &'static str,
    pub reopened: &'static str,
    pub col_next: &'static str,
    pub col_name: &'static str,
    pub col_phone: &'static str,
    pub cli_done: &'static str,
    pub cli_resolved: &'static str,
    pub today: &'static str,
    pub tomorrow: &'static str,
    pub yesterday: &'static str,
    pub too_small: &'static str,
    pub too_small_hint: &'static str,
    pub no_error: &'static str,
    pub act_log: &'static str,
    pub log_title: &'static str,
    pub log_empty: &'static str,
    /// `(code, label)` for history signals (`intention_history.signal`);
    /// `webhook:{status}` is said as `webhook_signal` with the status.
    pub signals: &'static [(&'static str, &'static str)],
    pub webhook_signal: &'static str,
    /// `(code, label)` for history causes.
    pub causes: &'static [(&'static str, &'static str)],
    /// `(code, label)` for reprocessing actions.
    pub reprocess_actions: &'static [(&'static str, &'static str)],
    pub board_chart: &'static str,
    /// `(code, label)` for `domain::attention::NextStep`.
    pub next_steps: &'static [(&'static str, &'static str)],
    // tablero, themes, progress, errors
    pub board_latency_chart: &'static str,
    pub board_queue_chart: &'static str,
    /// The day's highest queue: `{n}` waiting at `{hour}`.
    pub board_peak: &'static str,
    pub board_no_data: &'static str,
    /// Row labels of the narrow Tablero's one-line charts.
    pub board_spark_messages: &'static str,
    pub board_spark_latency: &'static str,
    pub board_spark_queue: &'static str,
    /// A real reprocess run's gauge: `{done}` of `{total}`.
    pub reprocess_running: &'static str,
    pub reprocess_starting: &'static str,
    /// The error overlay (`enter` on an error's flash, or `:error`).
    pub error_title: &'static str,
    pub error_console: &'static str,
    pub error_dispatcher: &'static str,
    pub error_technical: &'static str,
    /// After an error's sentence on the flash line.
    pub error_more: &'static str,
    pub failure_busy: &'static str,
    pub failure_disk_full: &'static str,
    pub failure_read_only: &'static str,
    pub failure_ledger: &'static str,
    pub failure_upgraded: &'static str,
    pub failure_not_found: &'static str,
    pub failure_changed: &'static str,
    pub failure_not_allowed: &'static str,
    pub failure_channel: &'static str,
    pub failure_no_channel: &'static str,
    pub failure_no_dispatcher: &'static str,
    pub failure_other: &'static str,
    // --- §1/§7 (issue 25): patient card, chooser, help scrolling, footer ---
    /// The card's screen title, followed by the patient's name.
    pub screen_patient: &'static str,
    pub patient_usage: &'static str,
    /// `{text}`: what was searched.
    pub patient_none: &'static str,
    pub patient_many: &'static str,
    pub patient_window: &'static str,
    pub patient_empty: &'static str,
    pub patient_actions: &'static str,
    pub patient_no_actions: &'static str,
    pub patient_open: &'static str,
    pub chooser_title: &'static str,
    pub chooser_hint: &'static str,
    pub help_scroll: &'static str,
    /// The label before the help's `:` commands (the commands themselves
    /// come from `tui::colon`, so the line cannot drift from the parser).
    pub help_commands: &'static str,
    /// Each `:` command's word and argument placeholder in this language
    /// (an exhaustive match, one per language).
    pub colon: fn(ColonCommand) -> (&'static str, &'static str),
    /// A message's state as one sentence for the patient card, by state
    /// code (see `tui::sentence`).
    pub message_sentences: &'static [(&'static str, &'static str)],
    /// Short footer labels for the main actions on a narrow screen.
    pub hint_cancel: &'static str,
    pub hint_resend: &'static str,
    pub hint_resolve: &'static str,
    pub hint_manual_contact: &'static str,
    // alerts and heartbeat
    /// Another process's live dispatcher: `{state} · {host} {pid}`.
    pub dispatcher_elsewhere: &'static str,
    /// More live dispatchers than the one named: ` (+{n})`.
    pub dispatcher_more: &'static str,
    /// `:despachadores`: every live dispatcher, its state, host and pid,
    /// since when and its last beat; this console's own; none.
    pub dispatchers_title: &'static str,
    pub dispatchers_row: &'static str,
    pub dispatchers_this_console: &'static str,
    pub dispatchers_none: &'static str,
    /// The banner while another process holds the ledger's write lock.
    pub ledger_locked: &'static str,
    /// The banner's alerts (`domain::alert::AlertKind`).
    pub alert_template_blocked: &'static str,
    pub alert_due_unsent: &'static str,
    pub alert_oldest_uncertain: &'static str,
    pub alert_review: &'static str,
    pub alert_refused_events: &'static str,
    /// The last periodic backup failed.
    pub alert_backup_failing: &'static str,
    /// No good backup for `{age}`.
    pub alert_backup_stale: &'static str,
    /// `{n}` appointments a calendar feed lost at once.
    pub alert_feed_held: &'static str,
    /// The same for a single appointment (Spanish and English agree in
    /// number).
    pub alert_feed_held_one: &'static str,
    /// `{n}` feeds failing for over `{minutes}` minutes.
    pub alert_feed_stale: &'static str,
    /// A dispatcher paused its channel (`channel_paused`), by fault: the
    /// credential (`{env}`: the variable it came from), the engine
    /// instance, TLS. The words say whether a restart is needed.
    pub alert_channel_credential: &'static str,
    pub alert_channel_instance_unknown: &'static str,
    pub alert_channel_instance_disconnected: &'static str,
    pub alert_channel_tls: &'static str,
    /// A ledger file that does not exist (`unavez tui`, the read-only
    /// commands): `{path}`.
    pub missing_ledger: &'static str,
    /// An Atención row that is a parked or refused channel event: its
    /// "message" column and its state.
    pub channel_event: &'static str,
    pub channel_event_parked: &'static str,
    pub channel_event_refused: &'static str,
    /// `(reason code, a few words)` for a channel event's row: the full
    /// reason is in `reasons`.
    pub channel_event_reasons: &'static [(&'static str, &'static str)],
    // issue 25 §2 (words): the verdict, Detalle's header and the
    // translated history.
    pub words: &'static words::Words,
    // issue 25 §8 (words): the command line's errors and summaries.
    pub cli: &'static cli::CliWords,
    pub templates: &'static templates::TemplateWords,
    pub doctor: &'static doctor::DoctorWords,
    // --- issue 25 §3 (guards): hints from guards, dimmed keys, "pedir reenvío" ---
    pub act_request_resend: &'static str,
    pub act_decline_resend: &'static str,
    pub scope_request_resend: &'static str,
    pub scope_decline_resend: &'static str,
    /// `{by}` already asked for the resend.
    pub ref_resend_requested: &'static str,
    pub ref_no_resend_request: &'static str,
    /// The row's request: asked by `{by}` because `{reason}`, or declined.
    pub ask_requested: &'static str,
    pub ask_declined: &'static str,
    /// `(rule, words)`: a refusal in two or three words, beside a dimmed
    /// key in the footer and in `?` help.
    pub refusal_short: &'static [(&'static str, &'static str)],
    /// A dimmed key's reason when the role may not.
    pub short_role: &'static str,
    /// The confirmation of an action its guard refuses: no `s`.
    pub confirm_refused: &'static str,
    // --- issue 25 §5 (guards): no false alarms ---
    /// The help/about line when operators are mapped to OS accounts and
    /// this session's account is not one of them.
    pub identity_unmapped: &'static str,
    /// A stopped dispatcher's header: `{why}`.
    pub dispatcher_stopped_because: &'static str,
    /// A stopped dispatcher's header when the console does not know why:
    /// it points to `:doctor`, which does.
    pub dispatcher_stopped_doctor: &'static str,
    /// The channel's key variable `{var}` is not set.
    pub cause_missing_key: &'static str,
    /// Any other start-up error: `{detail}`.
    pub cause_other: &'static str,
    /// The header's count of messages due now and not sent, and the
    /// banner's count of those late by more than the grace: each says what
    /// it counts, so the two never read as one number that disagrees.
    pub header_due_now: &'static str,
    pub alert_due_unsent_for: &'static str,
    // --- issue 25 §4: the call list, call outcomes, undo, reopen ---
    pub act_call_outcome: &'static str,
    pub act_reopen: &'static str,
    pub act_feed_confirm: &'static str,
    pub act_feed_discard: &'static str,
    /// `{feed}`, `{reason}`, `{operator}`.
    pub scope_feed_confirm: &'static str,
    pub scope_feed_discard: &'static str,
    /// `:calendario`'s overlay (issue 27 §2): its title, the line when no
    /// feed holds anything, and one feed's heading (`{feed}`, `{n}`).
    pub feeds_title: &'static str,
    pub feeds_none: &'static str,
    pub feeds_heading: &'static str,
    pub ref_not_handled: &'static str,
    /// `{commitment}`, `{key}`, `{outcome}`, `{operator}`.
    pub scope_call_outcome: &'static str,
    pub scope_reopen: &'static str,
    /// `(CallOutcome::as_str, label)`, in the chooser's order.
    pub call_outcomes: &'static [(&'static str, &'static str)],
    pub act_call_list: &'static str,
    pub act_call: &'static str,
    pub act_undo: &'static str,
    /// `{action}` withdrawn.
    pub undo_done: &'static str,
    pub undo_nothing: &'static str,
    /// `{action}`, `{seconds}`.
    pub undo_countdown: &'static str,
    /// The same on its row, where the column is narrow.
    pub undo_countdown_row: &'static str,
    pub call_list_title: &'static str,
    pub call_chooser_title: &'static str,
    /// Under the chooser: sends and cancellations are never undone.
    pub call_chooser_note: &'static str,
    /// `{n}` unanswered calls this session.
    pub call_tries: &'static str,
    /// `r` outside the day's handled cases.
    pub reopen_where: &'static str,
    /// On the confirmation of a send (a resend, a reprocess) or a cancel:
    /// it cannot be undone (issue 25 §4).
    pub confirm_no_undo_send: &'static str,
    pub confirm_no_undo_cancel: &'static str,
    /// Reproceso's "por qué", by `Because::code` (issue 25 §6): `{at}`
    /// a local time, `{state}`, `{reason}`, `{owner}`, `{n}`, `{why}`.
    pub reprocess_because: &'static [(&'static str, &'static str)],
    /// Why a failed message stays failed, by `ReplanRefusal` (`{n}` the
    /// attempt).
    pub replan_refusals: &'static [(&'static str, &'static str)],
}

pub mod backup;
pub mod cli;
pub mod doctor;
mod en;
mod es;
mod ops;
mod reprocess;
pub mod templates;
pub mod words;

pub use en::EN;
pub use es::ES;

impl Strings {
    /// A `:` command's word in this language.
    pub fn colon_word(&self, c: ColonCommand) -> &'static str {
        (self.colon)(c).0
    }

    /// The help's line of `:` commands, for the ones the operator may use.
    pub fn colon_line(&self, commands: &[ColonCommand]) -> String {
        let each: Vec<String> = commands
            .iter()
            .map(|&c| match (self.colon)(c) {
                (word, "") => format!(":{word}"),
                (word, arg) => format!(":{word} {arg}"),
            })
            .collect();
        format!("{}: {}", self.help_commands, each.join(" · "))
    }

    /// The label of an intention state, or of an Atención pseudo-state
    /// (`stuck`, `reschedule`…) read from its word ([`Strings::situation`]).
    pub fn state<'a>(&self, code: &'a str) -> &'a str
    where
        'static: 'a,
    {
        match Situation::parse(code, false) {
            Some(s) => self.situation(s),
            None => code,
        }
    }

    /// The label of what an Atención row shows: every pseudo-state by an
    /// exhaustive match, so a new one cannot go unnamed.
    pub fn situation(&self, s: Situation) -> &'static str {
        match s {
            Situation::State(state) => self.intention_state(state),
            Situation::Stuck => self.situation_stuck,
            Situation::Unconfirmed => self.situation_unconfirmed,
            Situation::Reschedule => self.situation_reschedule,
            Situation::RefusedEvent => self.situation_refused_event,
            Situation::ChannelEvent(e) => match e {
                EventStatus::Parked => self.channel_event_parked,
                EventStatus::Refused => self.channel_event_refused,
                EventStatus::Received
                | EventStatus::Applied
                | EventStatus::Pending
                | EventStatus::Ignored
                | EventStatus::Recorded => e.as_str(),
            },
        }
    }

    /// The label of an intention state.
    pub fn intention_state(&self, state: IntentionState) -> &'static str {
        self.states
            .iter()
            .find(|(c, _)| *c == state.as_str())
            .map_or(state.as_str(), |(_, l)| *l)
    }

    /// The label of a closure reason.
    pub fn reason<'a>(&self, code: &'a str) -> &'a str
    where
        'static: 'a,
    {
        self.reasons
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, l)| *l)
            .unwrap_or(code)
    }

    /// The label of a call outcome.
    pub fn call_outcome(&self, o: crate::domain::call::CallOutcome) -> &'static str {
        self.call_outcomes
            .iter()
            .find(|(c, _)| *c == o.as_str())
            .map(|(_, l)| *l)
            .unwrap_or(o.as_str())
    }

    pub fn role(&self, role: Role) -> &'static str {
        match role {
            Role::FrontDesk => self.role_front_desk,
            Role::Supervisor => self.role_supervisor,
            Role::Technician => self.role_technician,
        }
    }

    /// A history signal in words (the code itself when unknown: the test
    /// below keeps that from happening).
    pub fn signal(&self, code: &str) -> String {
        if let Some(status) = code.strip_prefix("webhook:") {
            return fill(self.webhook_signal, &[("status", self.words.channel_word(status))]);
        }
        lookup(self.signals, code).unwrap_or(code).to_string()
    }

    pub fn cause<'a>(&self, code: &'a str) -> &'a str
    where
        'static: 'a,
    {
        lookup(self.causes, code).unwrap_or(code)
    }

    pub fn reprocess_action(&self, a: crate::dispatch::reprocess::Action) -> &'static str {
        lookup(self.reprocess_actions, a.as_str()).unwrap_or(a.as_str())
    }

    /// What to do next with a case, in words.
    pub fn next_step(&self, step: NextStep) -> &'static str {
        self.next_steps
            .iter()
            .find(|(c, _)| *c == step.as_str())
            .map(|(_, l)| *l)
            .unwrap_or("")
    }

    pub fn outcome(&self, o: VerifyOutcome) -> &'static str {
        match o {
            VerifyOutcome::Received => self.outcome_received,
            VerifyOutcome::NotReceived => self.outcome_not_received,
        }
    }
}

fn lookup(table: &'static [(&'static str, &'static str)], code: &str) -> Option<&'static str> {
    table.iter().find(|(c, _)| *c == code).map(|(_, l)| *l)
}

/// The table for a configured language.
pub fn strings(lang: Language) -> &'static Strings {
    match lang {
        Language::Es => &ES,
        Language::En => &EN,
    }
}

/// Replaces each `{name}` in `template` with its value.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

#[cfg(test)]
mod tests;
