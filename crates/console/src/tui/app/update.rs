//! Navigation: keys that move between screens, rows, pages and days.

use super::*;

impl App {
    /// Applies one action; returns the database work it calls for.
    pub fn on_action(&mut self, a: Action) -> Vec<Request> {
        let reqs = self.on_action_in_mode(a);
        // Quitting from any mode sends what waits out its grace first.
        if self.quit && self.calls.pending.is_some() {
            let mut first = self.commit_pending();
            first.extend(reqs);
            return first;
        }
        reqs
    }

    fn on_action_in_mode(&mut self, a: Action) -> Vec<Request> {
        match self.mode {
            Mode::Filter | Mode::Command => self.on_input(a),
            Mode::Form => self.on_form(a),
            Mode::Confirm | Mode::ConfirmWord => self.on_confirm(a),
            Mode::Help => self.on_help(a),
            Mode::Chooser => self.on_chooser(a),
            Mode::Log | Mode::Error | Mode::Dispatchers | Mode::Doctor => self.on_reading_overlay(a),
            Mode::CallChooser => self.on_call_chooser(a),
            Mode::Feeds => self.on_feeds(a),
            Mode::Normal => self.on_normal(a),
        }
    }

    /// Help, the log or a whole error on screen: any key closes it (quit
    /// still quits).
    fn on_reading_overlay(&mut self, a: Action) -> Vec<Request> {
        // An error read whole leaves the line: enter opens rows again.
        if self.mode == Mode::Error && self.error_on_flash() {
            self.flash = None;
        }
        match a {
            Action::Quit => self.quit = true,
            Action::Up | Action::Down | Action::PageUp | Action::PageDown if self.mode == Mode::Log => {
                self.scroll_log(a)
            }
            _ => self.mode = Mode::Normal,
        }
        vec![]
    }

    /// An action on a screen with no overlay: each area has its handler.
    fn on_normal(&mut self, a: Action) -> Vec<Request> {
        match a {
            Action::Quit | Action::Help | Action::ShowLog | Action::OpenFilter | Action::OpenCommand => {
                self.switch_mode(a)
            }
            Action::Back => self.back_action(),
            Action::Refresh => self.refresh_all(),
            Action::NextScreen | Action::PrevScreen => self.cycle_screen(a == Action::NextScreen),
            Action::Goto(s) => self.goto(s),
            Action::Up | Action::Down => self.move_selection(a == Action::Up),
            Action::PageUp | Action::PageDown => self.page(a == Action::PageDown),
            Action::Top | Action::Bottom => self.jump_to_end(a == Action::Bottom),
            // An error on the flash line: enter shows it whole first.
            Action::Open if self.error_on_flash() => {
                self.mode = Mode::Error;
                vec![]
            }
            Action::Open => self.open(),
            Action::DayPrev | Action::DayNext => self.shift_day(a == Action::DayNext),
            Action::ToggleState => self.toggle_reprocess_state(),
            Action::Op(OpKind::CallOutcome) => self.open_call_chooser(),
            // Another action first sends what waits (it may be on the
            // same case).
            Action::Op(op) => {
                let mut reqs = self.commit_pending();
                reqs.extend(self.open_form(op));
                reqs
            }
            Action::CallList => self.toggle_call_list(),
            Action::Undo => self.undo(),
            Action::ToggleHandled => self.toggle_handled(),
            Action::Refused(op) => self.refuse(op),
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
            // issue 25 §2 (words)
            Action::ToggleTechnical => {
                self.detail_technical = !self.detail_technical;
                self.detail_scroll = 0;
                vec![]
            }
        }
    }

    /// Quitting, or opening help, the log, the filter or the command line.
    fn switch_mode(&mut self, a: Action) -> Vec<Request> {
        match a {
            Action::Quit => self.quit = true,
            Action::Help => {
                self.mode = Mode::Help;
                self.help_scroll = 0;
            }
            Action::ShowLog => {
                self.mode = Mode::Log;
                self.calls.log_scroll = 0;
            }
            Action::OpenFilter => {
                // Off a list, the search is on Atención.
                let reqs = if matches!(self.screen, Screen::Attention | Screen::Upcoming) {
                    vec![]
                } else {
                    self.goto(Screen::Attention)
                };
                self.save_cursor();
                self.mode = Mode::Filter;
                self.input = self.filter.clone();
                return reqs;
            }
            Action::OpenCommand => {
                self.mode = Mode::Command;
                self.input.clear();
            }
            _ => {}
        }
        vec![]
    }

    /// Reloads every visible panel (and the Tablero's day).
    fn refresh_all(&mut self) -> Vec<Request> {
        self.flash(FlashKind::Info, self.t.flash_refreshed.into());
        self.board_day_asked = None;
        self.load()
    }

    /// The next (or previous) tab of the role, wrapping around.
    fn cycle_screen(&mut self, forward: bool) -> Vec<Request> {
        let tabs = Screen::tabs(self.role());
        let i = tabs.iter().position(|s| *s == self.screen).unwrap_or(0);
        let n = tabs.len();
        let next = if forward { (i + 1) % n } else { (i + n - 1) % n };
        self.goto(tabs[next])
    }

    /// One row up or down on the current screen (Detalle scrolls instead).
    fn move_selection(&mut self, up: bool) -> Vec<Request> {
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
            Screen::Patient => self.patient_move(up),
        }
        vec![]
    }

    /// The first (or last) row of the current screen's whole list, not
    /// of the page shown (another page is read when it is elsewhere);
    /// Detalle only goes back to its top.
    fn jump_to_end(&mut self, end: bool) -> Vec<Request> {
        let size = self.page_size.max(1);
        let rows_page = |offset: u32, total: i64| -> Option<u32> {
            let target = if end {
                u32::try_from((total.max(1) - 1) / i64::from(size)).unwrap_or(0) * size
            } else {
                0
            };
            (target != offset).then_some(target)
        };
        macro_rules! list_end {
            ($rows:expr) => {{
                match rows_page($rows.offset, $rows.total) {
                    Some(offset) => {
                        $rows.offset = offset;
                        $rows.anchor = None;
                        $rows.selected = if end { usize::MAX } else { 0 };
                        return self.load_screen(self.screen);
                    }
                    None => $rows.select(if end { usize::MAX } else { 0 }),
                }
            }};
        }
        match self.screen {
            Screen::Attention => list_end!(self.attention),
            Screen::Upcoming => list_end!(self.upcoming),
            Screen::Counter => list_end!(self.counter),
            Screen::Board => {
                self.board_selected = if end {
                    self.board_items().len().saturating_sub(1)
                } else {
                    0
                }
            }
            Screen::Detail if !end => self.detail_scroll = 0,
            Screen::Detail => {}
            Screen::Reprocess => self.reprocess.cursor = if end { IntentionState::ALL.len() - 1 } else { 0 },
            Screen::Patient => self.patient_jump(end),
        }
        vec![]
    }

    /// The day after (or before) the one shown, reloaded.
    fn shift_day(&mut self, forward: bool) -> Vec<Request> {
        self.day += Duration::days(if forward { 1 } else { -1 });
        self.load_screen(self.screen)
    }

    /// Reproceso: checks or unchecks the state under the cursor and plans
    /// again.
    fn toggle_reprocess_state(&mut self) -> Vec<Request> {
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

    /// Atención: shows the handled cases instead of the open ones, or back.
    fn toggle_handled(&mut self) -> Vec<Request> {
        if self.screen != Screen::Attention {
            return vec![];
        }
        self.show_handled = !self.show_handled;
        self.reset_offset();
        self.load_screen(Screen::Attention)
    }

    /// Says the role may not do `op`.
    fn refuse(&mut self, op: OpKind) -> Vec<Request> {
        let role = self.t.role(self.role());
        let msg = fill(
            self.t.flash_role_refused,
            &[("role", role), ("action", self.t.op_label(op))],
        );
        self.flash(FlashKind::Refused, msg);
        vec![]
    }

    /// A left click at (`col`, `row`) on a `width`×`height` screen: a tab
    /// switches screen, a list row is selected (the list scrolls as the
    /// view does: the selected row stays on screen from the top).
    pub fn on_click(&mut self, col: u16, row: u16, _width: u16, height: u16) -> Vec<Request> {
        if self.mode != Mode::Normal {
            return vec![];
        }
        // A banner line under the title moves everything below it down.
        let row = match row.checked_sub(self.banner_lines()) {
            Some(r) if row > 0 => r,
            _ => return vec![],
        };
        if row == 1 {
            let mut x = 0u16;
            for s in Screen::tabs(self.role()) {
                let w = format!(" 0 {} ", s.title(self.t)).chars().count() as u16;
                if col >= x && col < x + w {
                    return self.goto(*s);
                }
                x += w;
            }
            return vec![];
        }
        // Header, tabs, then the list's border and column header.
        const FIRST_ROW: u16 = 4;
        let visible = height.saturating_sub(FIRST_ROW + 3).max(1) as usize;
        if row < FIRST_ROW || (row - FIRST_ROW) as usize >= visible {
            return vec![];
        }
        let pick = |selected: usize| selected.saturating_sub(visible - 1) + (row - FIRST_ROW) as usize;
        match self.screen {
            Screen::Attention => {
                let i = pick(self.attention.selected);
                if i < self.attention.rows.len() {
                    self.attention.select(i);
                }
            }
            Screen::Upcoming => {
                let i = pick(self.upcoming.selected);
                if i < self.upcoming.rows.len() {
                    self.upcoming.select(i);
                }
            }
            Screen::Counter => {
                let i = pick(self.counter.selected);
                if i < self.counter.rows.len() {
                    self.counter.select(i);
                }
            }
            Screen::Board => {
                let i = pick(self.board_selected);
                if i < self.board_items().len() {
                    self.board_selected = i;
                }
            }
            _ => {}
        }
        vec![]
    }

    pub(super) fn back_action(&mut self) -> Vec<Request> {
        if !self.filter.is_empty() && matches!(self.screen, Screen::Attention | Screen::Upcoming) {
            return self.clear_filter();
        }
        match self.back.pop() {
            Some(prev) => {
                self.screen = prev;
                self.load_screen(prev)
            }
            None => vec![],
        }
    }

    pub(super) fn reset_offset(&mut self) {
        match self.screen {
            Screen::Attention => {
                self.attention.offset = 0;
                self.attention.top();
            }
            Screen::Upcoming => {
                self.upcoming.offset = 0;
                self.upcoming.top();
            }
            Screen::Counter => {
                self.counter.offset = 0;
                self.counter.top();
            }
            _ => {}
        }
    }

    pub(super) fn page(&mut self, forward: bool) -> Vec<Request> {
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
            Screen::Attention => self.attention.top(),
            Screen::Upcoming => self.upcoming.top(),
            _ => self.counter.top(),
        }
        self.load_screen(self.screen)
    }

    /// Opens the detail of the selected row's intention, or says there is
    /// nothing selected.
    fn open_selected(&mut self, id: Option<i64>) -> Vec<Request> {
        match id {
            Some(id) => self.open_detail(id.to_string()),
            None => {
                self.flash(FlashKind::Info, self.t.flash_no_selection.into());
                vec![]
            }
        }
    }

    pub(super) fn open(&mut self) -> Vec<Request> {
        // A search is on: the caller is who the desk is after.
        if let Some(reqs) = self.open_row_patient() {
            return reqs;
        }
        match self.screen {
            Screen::Patient => self.open_patient_message(),
            Screen::Attention => self.open_selected(self.attention.current().and_then(|r| r.intention_id)),
            Screen::Counter => self.open_selected(self.counter.current().and_then(|r| r.intention_id)),
            // The latest notification is the one the desk asks about.
            Screen::Upcoming => self.open_selected(
                self.upcoming
                    .current()
                    .and_then(|u| u.notifications.last())
                    .map(|n| n.intention_id),
            ),
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

    pub(super) fn open_detail(&mut self, id_or_key: String) -> Vec<Request> {
        self.detail_scroll = 0;
        self.detail_technical = false;
        self.detail_loading = true;
        if self.screen != Screen::Detail {
            self.back.push(self.screen);
            self.screen = Screen::Detail;
        }
        vec![Request::Detail { id_or_key }]
    }

    pub(super) fn open_form(&mut self, op: OpKind) -> Vec<Request> {
        if matches!(op, OpKind::PauseDispatch | OpKind::ResumeDispatch) {
            return self.open_dispatch_form();
        }
        if op == OpKind::Reprocess {
            if self.reprocess.plan.is_none() {
                let why = match &self.reprocess.error {
                    Some(f) => self.t.failure_line(f),
                    None => self.t.reprocess_unavailable.into(),
                };
                self.flash(FlashKind::Refused, why);
                return vec![];
            }
            let day = OperatingDay::new(self.day);
            return self.show_form(op, unattached_target(day.to_string()));
        }
        // Refused before any typing: a guard that refuses says why now,
        // with no form (issue 25 §3).
        if let Err(crate::domain::guard::Why::Rule(r)) = self.key_verdict(op) {
            let text = fill(self.t.flash_refused, &[("why", &self.t.refusal(&r, self.now))]);
            self.flash(FlashKind::Refused, text);
            return vec![];
        }
        let target = match self.target() {
            // A reopen applies to the day's handled cases (`h`).
            Some(_) if op == OpKind::Reopen && !self.show_handled => {
                self.flash(FlashKind::Info, self.t.reopen_where.into());
                return vec![];
            }
            Some(t) if op == OpKind::Reopen && t.case.is_some() => t,
            Some(t) if op == OpKind::ManualContact || t.intention_id.is_some() => t,
            Some(t) if op == OpKind::Resolve && t.case.is_some() => t,
            _ => {
                self.flash(FlashKind::Info, self.t.flash_no_selection.into());
                return vec![];
            }
        };
        self.show_form(op, target)
    }

    /// The form for `op` on `target`, empty.
    pub(super) fn show_form(&mut self, op: OpKind, target: Target) -> Vec<Request> {
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

    /// One key pauses or resumes, whichever applies now.
    fn open_dispatch_form(&mut self) -> Vec<Request> {
        if self.dispatcher.running != Some(true) {
            self.flash(FlashKind::Refused, self.t.flash_no_dispatcher.into());
            return vec![];
        }
        let op = if self.dispatcher.paused {
            OpKind::ResumeDispatch
        } else {
            OpKind::PauseDispatch
        };
        // The key is already hidden and refused for these; this guards
        // callers that build the action directly.
        if self.access.read_only {
            return self.on_action(Action::ReadOnly);
        }
        if !allowed(self.role(), op) {
            return self.on_action(Action::Refused(op));
        }
        let what = format!("{}: {}", self.t.dispatcher, self.t.op_label(op));
        self.show_form(op, unattached_target(what))
    }
}

/// The target of an action on no row (a day's reprocess, the dispatcher):
/// only a label for the form and the log.
pub(super) fn unattached_target(commitment_ref: String) -> Target {
    Target {
        case: None,
        seen: None,
        intention_id: None,
        key: None,
        state: None,
        commitment_id: 0,
        commitment_ref,
    }
}
