//! The call list and its quick outcomes (issue 25, section 4): `l` turns
//! Atención into the cases a call answers, soonest appointment first; `t`
//! opens the outcome chooser, where one digit records what came of the
//! call (no reason typed: the outcome is the reason). A call outcome and
//! "marcar atendido" wait [`GRACE_SECONDS`] before they are sent: `u`
//! withdraws them; quitting, or another action, sends what waits first.
//! Sends and cancellations are never deferred, so never undone.

use std::collections::HashMap;

use super::*;
use crate::domain::call::{CallOutcome, RETRY_AFTER_MINUTES, Tries, on_call_list};

/// The open cases the call list picks from: the whole queue of a busy
/// day, not one page of it (the list is filtered after the read).
pub const CALL_LIST_READ: u32 = 1000;

/// How long a deferred action can still be withdrawn.
pub const GRACE_SECONDS: i64 = 10;

/// An action waiting out its grace period.
#[derive(Debug, Clone, PartialEq)]
pub struct Deferred {
    pub op: PendingOp,
    /// What the row and the flash line call it ("confirmó").
    pub label: String,
    pub reason: String,
    pub seen: Option<DateTime<Utc>>,
    pub commit_at: DateTime<Utc>,
}

/// The call list's state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallsView {
    /// Atención shows the call list instead of every case.
    pub list: bool,
    /// The outcome chooser is open on this case.
    pub chooser: Option<Target>,
    pub pending: Option<Deferred>,
    /// This session's unanswered calls by intention: how many, the last.
    pub tries: HashMap<i64, (u32, DateTime<Utc>)>,
    /// The first line of `L` shown (0: the newest action).
    pub log_scroll: usize,
    /// Why each handled case was handled, by the action that marked it.
    pub reasons: HashMap<i64, String>,
}

/// Lines of the session's log shown at once.
pub const LOG_LINES: usize = 16;

impl App {
    /// `l`: every case, or the call list.
    pub(super) fn toggle_call_list(&mut self) -> Vec<Request> {
        if self.screen != Screen::Attention {
            return vec![];
        }
        self.calls.list = !self.calls.list;
        self.attention.selected = 0;
        self.attention.anchor = None;
        self.load()
    }

    /// The call list reads every open case, not one page.
    pub(super) fn widen_for_call_list(&self, q: &mut AttentionQuery) {
        if self.calls.list && !self.show_handled {
            q.limit = CALL_LIST_READ;
            q.offset = 0;
        }
    }

    /// After Atención's rows arrive: on the call list, keep the cases a
    /// call answers that are not waiting out an unanswered call, soonest
    /// appointment first.
    pub(super) fn apply_call_list(&mut self) {
        // The day's handled cases (`h`) are shown whole.
        if !self.calls.list || self.show_handled {
            return;
        }
        let now = self.now;
        let (role, cx) = (self.role(), self.resend_ctx());
        let tries = &self.calls.tries;
        self.attention.rows.retain(|r| {
            let waiting = r
                .intention_id
                .and_then(|id| tries.get(&id))
                .is_some_and(|(_, last)| now < *last + Duration::minutes(RETRY_AFTER_MINUTES));
            r.kind == RowKind::Intention && on_call_list(super::guard::row_hint(role, r, cx)) && !waiting
        });
        self.attention
            .rows
            .sort_by_key(|r| (r.starts_at.is_none(), r.starts_at, r.subject_id));
        self.attention.total = self.attention.rows.len() as i64;
        self.attention.selected = self.attention.selected.min(self.attention.rows.len().saturating_sub(1));
    }

    /// The ledger's unanswered calls for the call list's cases (another
    /// operator's, or an earlier session's, count too).
    pub(super) fn ask_call_tries(&self) -> Vec<Request> {
        if self.show_handled {
            return self.ask_reasons();
        }
        if !self.calls.list {
            return vec![];
        }
        let ids: Vec<i64> = self.attention.rows.iter().filter_map(|r| r.intention_id).collect();
        if ids.is_empty() {
            vec![]
        } else {
            vec![Request::CallTries { ids }]
        }
    }

    /// The reasons of the handled cases not known yet.
    fn ask_reasons(&self) -> Vec<Request> {
        let ids: Vec<i64> = self
            .attention
            .rows
            .iter()
            .filter_map(|r| r.handled.as_ref().map(|h| h.action_id))
            .filter(|id| !self.calls.reasons.contains_key(id))
            .collect();
        if ids.is_empty() {
            vec![]
        } else {
            vec![Request::ActionReasons { ids }]
        }
    }

    /// Merges the ledger's tries with this session's (an outcome still
    /// counting down is not in the ledger yet) and filters the list again.
    pub(super) fn on_call_tries(&mut self, v: Vec<(i64, Tries)>) {
        for (id, t) in v {
            let Some(last) = t.last_at else { continue };
            let e = self.calls.tries.entry(id).or_insert((t.count, last));
            *e = (e.0.max(t.count), e.1.max(last));
        }
        self.apply_call_list();
    }

    /// How many unanswered calls are known for a case.
    pub fn call_tries(&self, intention_id: i64) -> u32 {
        self.calls.tries.get(&intention_id).map_or(0, |(n, _)| *n)
    }

    /// `t`: the outcome chooser on the selected case (what was waiting
    /// is sent first).
    pub(super) fn open_call_chooser(&mut self) -> Vec<Request> {
        let reqs = self.commit_pending();
        match self.target() {
            Some(t) if t.intention_id.is_some() => {
                self.calls.chooser = Some(t);
                self.mode = Mode::CallChooser;
            }
            _ => self.flash(FlashKind::Info, self.t.flash_no_selection.into()),
        }
        reqs
    }

    /// A key in the chooser: a digit records that outcome (after the
    /// grace period); anything else closes it.
    pub(super) fn on_call_chooser(&mut self, a: Action) -> Vec<Request> {
        self.mode = Mode::Normal;
        let Some(target) = self.calls.chooser.take() else {
            return vec![];
        };
        let (Action::Input(c), Some(id)) = (a, target.intention_id) else {
            return vec![];
        };
        let Some(outcome) = CallOutcome::from_digit(c) else {
            return vec![];
        };
        if outcome == CallOutcome::NoAnswer {
            let n = self.call_tries(id) + 1;
            self.calls.tries.insert(id, (n, self.now));
        }
        let label = self.t.call_outcome(outcome).to_string();
        self.defer(
            PendingOp::CallOutcome {
                intention_id: id,
                outcome,
            },
            label,
            outcome.as_str().to_string(),
            target.seen,
        );
        vec![]
    }

    /// Holds an action for the grace period.
    pub(super) fn defer(&mut self, op: PendingOp, label: String, reason: String, seen: Option<DateTime<Utc>>) {
        self.calls.pending = Some(Deferred {
            op,
            label,
            reason,
            seen,
            commit_at: self.now + Duration::seconds(GRACE_SECONDS),
        });
    }

    /// `u`: withdraws what waits; a send or a cancellation is never
    /// undone, and the line says so.
    pub(super) fn undo(&mut self) -> Vec<Request> {
        match self.calls.pending.take() {
            Some(d) => {
                if let PendingOp::CallOutcome {
                    intention_id,
                    outcome: CallOutcome::NoAnswer,
                } = d.op
                {
                    match self.calls.tries.get_mut(&intention_id) {
                        Some((n, _)) if *n > 1 => *n -= 1,
                        _ => {
                            self.calls.tries.remove(&intention_id);
                        }
                    }
                }
                let text = fill(self.t.undo_done, &[("action", d.label.as_str())]);
                self.log.push((self.now, text.clone()));
                self.flash(FlashKind::Info, text);
            }
            None => self.flash(FlashKind::Info, self.t.undo_nothing.into()),
        }
        vec![]
    }

    /// Sends what waits, now.
    pub fn commit_pending(&mut self) -> Vec<Request> {
        let Some(d) = self.calls.pending.take() else {
            return vec![];
        };
        self.ops_in_flight += 1;
        vec![Request::Op {
            op: d.op,
            operator: self.operator.clone(),
            role: self.role(),
            reason: d.reason,
            seen: d.seen,
            now: self.now,
        }]
    }

    /// On each tick: sends what waited out its grace.
    pub(super) fn commit_due(&mut self) -> Vec<Request> {
        match &self.calls.pending {
            Some(d) if self.now >= d.commit_at => self.commit_pending(),
            _ => vec![],
        }
    }

    /// Between ticks, while an action waits: the clock moves so the
    /// countdown shows each second and the action is sent on time.
    pub fn grace_clock(&mut self, now: DateTime<Utc>) -> Vec<Request> {
        if self.calls.pending.is_none() {
            return vec![];
        }
        self.now = now;
        self.commit_due()
    }

    /// `L`: moves through the session's actions, newest first.
    pub(super) fn scroll_log(&mut self, a: Action) {
        let last = self.log.len().saturating_sub(LOG_LINES);
        let s = &mut self.calls.log_scroll;
        *s = match a {
            Action::Up => s.saturating_sub(1),
            Action::Down => (*s + 1).min(last),
            Action::PageUp => s.saturating_sub(LOG_LINES),
            Action::PageDown => (*s + LOG_LINES).min(last),
            _ => *s,
        };
    }

    /// The countdown line: "confirmó · deshacer (u) 9 s".
    pub fn pending_line(&self) -> Option<String> {
        self.countdown(self.t.undo_countdown)
    }

    /// The countdown on the waiting action's row.
    pub fn pending_row(&self) -> Option<String> {
        self.countdown(self.t.undo_countdown_row)
    }

    fn countdown(&self, template: &str) -> Option<String> {
        let d = self.calls.pending.as_ref()?;
        let left = (d.commit_at - self.now).num_seconds().max(0);
        Some(fill(
            template,
            &[("action", d.label.as_str()), ("seconds", &left.to_string())],
        ))
    }
}
