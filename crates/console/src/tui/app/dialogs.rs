//! Typing (filter, command, form), the two-step confirmation, and the
//! worker's answers.

use super::*;

impl App {
    pub(super) fn on_input(&mut self, a: Action) -> Vec<Request> {
        let filtering = self.mode == Mode::Filter;
        match a {
            Action::Input(c) => {
                self.input.push(c);
                if filtering {
                    return self.apply_filter();
                }
            }
            Action::Backspace => {
                self.input.pop();
                if filtering {
                    return self.apply_filter();
                }
            }
            Action::Abort => {
                self.mode = Mode::Normal;
                self.input.clear();
                // Esc clears a search as it is typed (it already applied)
                // and puts the cursor back where it was before it.
                if filtering {
                    return self.clear_filter();
                }
            }
            Action::Submit => {
                let text = std::mem::take(&mut self.input);
                self.mode = Mode::Normal;
                if filtering {
                    return vec![];
                }
                return self.run_command(text.trim());
            }
            Action::NextField if !filtering => self.complete_command(),
            Action::Quit => self.quit = true,
            _ => {}
        }
        vec![]
    }

    /// The search applies as it is typed: the list reloads on each key,
    /// back at its first row.
    fn apply_filter(&mut self) -> Vec<Request> {
        let text = self.input.trim().to_string();
        if text == self.filter {
            return vec![];
        }
        self.filter = text;
        // Both lists: the search stays when switching screens, and the
        // other list's page would be past the search's few rows.
        self.reset_lists();
        self.load_screen(self.screen)
    }

    pub(super) fn on_form(&mut self, a: Action) -> Vec<Request> {
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
                let c = self.confirmation(&form);
                // A resend's confirmation shows the evidence first: ask for it.
                let reqs = match c.op {
                    PendingOp::Resend { intention_id, .. } => vec![Request::ResendEvidence {
                        intention_id,
                        now: self.now,
                    }],
                    _ => vec![],
                };
                self.confirm = Some(c);
                self.mode = Mode::Confirm;
                return reqs;
            }
            Action::Quit => self.quit = true,
            _ => {}
        }
        vec![]
    }

    /// The exact scope of an action, in words, for the confirmation step.
    pub(super) fn confirmation(&self, f: &Form) -> Confirmation {
        let t = self.t;
        let target = &f.target;
        let id = target.intention_id.map(|i| i.to_string()).unwrap_or_default();
        let key = target.key.clone().unwrap_or_default();
        let state = target.state.map(|s| t.situation(s)).unwrap_or("");
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
            OpKind::Resolve => match target.case {
                Some(case) => (PendingOp::Resolve { case }, fill(t.scope_resolve, &vals)),
                None => (
                    PendingOp::Resolve {
                        case: Case::intention(iid),
                    },
                    fill(t.scope_resolve, &vals),
                ),
            },
            OpKind::Reopen => (
                PendingOp::Reopen {
                    case: target.case.unwrap_or(Case::intention(iid)),
                },
                fill(t.scope_reopen, &vals),
            ),
            // The call list records outcomes without a form (`calls.rs`);
            // a form's choice index picks one in the chooser's order.
            OpKind::CallOutcome => {
                let outcome = crate::domain::call::CallOutcome::ALL[f.outcome % 4];
                let vals = [
                    ("key", key.as_str()),
                    ("operator", self.operator.as_str()),
                    ("commitment", target.commitment_ref.as_str()),
                    ("outcome", t.call_outcome(outcome)),
                ];
                (
                    PendingOp::CallOutcome {
                        intention_id: iid,
                        outcome,
                    },
                    fill(t.scope_call_outcome, &vals),
                )
            }
            OpKind::Cancel => (PendingOp::Cancel { intention_id: iid }, fill(t.scope_cancel, &vals)),
            // A feed's review names the feed where a case names its ref.
            OpKind::FeedConfirm | OpKind::FeedDiscard => {
                let confirm = f.op == OpKind::FeedConfirm;
                let vals = [
                    ("feed", target.commitment_ref.as_str()),
                    ("reason", reason.as_str()),
                    ("operator", self.operator.as_str()),
                ];
                let text = if confirm {
                    t.scope_feed_confirm
                } else {
                    t.scope_feed_discard
                };
                (
                    PendingOp::FeedReview {
                        feed: target.commitment_ref.clone(),
                        confirm,
                    },
                    fill(text, &vals),
                )
            }
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
            OpKind::AuthorizeResend => (
                PendingOp::Resend {
                    intention_id: iid,
                    acknowledge_delivered: false,
                },
                fill(t.scope_resend, &vals),
            ),
            OpKind::RequestResend => (
                PendingOp::RequestResend { intention_id: iid },
                fill(t.scope_request_resend, &vals),
            ),
            OpKind::DeclineResend => (
                PendingOp::DeclineResend { intention_id: iid },
                fill(t.scope_decline_resend, &vals),
            ),
            OpKind::PauseDispatch => (PendingOp::PauseDispatch, fill(t.scope_pause, &vals)),
            OpKind::ResumeDispatch => (PendingOp::ResumeDispatch, fill(t.scope_resume, &vals)),
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
                let plan = summary_text(t, self.reprocess.plan.as_deref().unwrap_or(&[]));
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
                        // The day the form opened on (kept in its target).
                        day: OperatingDay::parse(&target.commitment_ref).unwrap_or(OperatingDay::new(self.day)),
                        states: self.reprocess.states.clone(),
                    },
                    format!("{scope} — {plan}"),
                )
            }
        };
        let resend = matches!(op, PendingOp::Resend { .. }).then(ResendConfirm::default);
        Confirmation {
            op,
            seen: target.seen,
            reason,
            scope,
            resend,
        }
    }

    pub(super) fn on_confirm(&mut self, a: Action) -> Vec<Request> {
        match a {
            Action::Confirm if self.mode == Mode::Confirm => {
                // A resend is not decided before its evidence is on screen,
                // and one its guard refuses is never confirmed (`s` is not
                // offered either).
                let blocked = self
                    .confirm
                    .as_ref()
                    .and_then(|c| c.resend.as_ref())
                    .is_some_and(|r| r.evidence.as_ref().is_none_or(|e| e.refusal.is_some()));
                if blocked {
                    return vec![];
                }
                match self.confirm.take() {
                    Some(c) => self.fire(c),
                    None => {
                        self.mode = Mode::Normal;
                        vec![]
                    }
                }
            }
            Action::Input(ch) if self.mode == Mode::ConfirmWord => {
                if let Some(r) = self.confirm.as_mut().and_then(|c| c.resend.as_mut()) {
                    r.word.push(ch);
                    r.error = None;
                }
                vec![]
            }
            Action::Backspace if self.mode == Mode::ConfirmWord => {
                if let Some(r) = self.confirm.as_mut().and_then(|c| c.resend.as_mut()) {
                    r.word.pop();
                }
                vec![]
            }
            Action::Submit if self.mode == Mode::ConfirmWord => self.submit_word(),
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

    /// The typed acknowledgement: the word (any case, surrounding spaces
    /// ignored) authorizes the resend as acknowledged; anything else keeps
    /// the dialog open and says what to type.
    fn submit_word(&mut self) -> Vec<Request> {
        let word = self.t.resend_word;
        let Some(mut c) = self.confirm.take() else {
            self.mode = Mode::Normal;
            return vec![];
        };
        let typed = c.resend.as_ref().map(|r| r.word.trim().to_string()).unwrap_or_default();
        if !typed.eq_ignore_ascii_case(word) {
            if let Some(r) = c.resend.as_mut() {
                r.error = Some(fill(self.t.resend_word_mismatch, &[("word", word)]));
            }
            self.confirm = Some(c);
            return vec![];
        }
        if let PendingOp::Resend {
            acknowledge_delivered, ..
        } = &mut c.op
        {
            *acknowledge_delivered = true;
        }
        self.fire(c)
    }

    /// Sends a confirmed action to the worker.
    fn fire(&mut self, c: Confirmation) -> Vec<Request> {
        self.mode = Mode::Normal;
        // The library checks again; this only avoids a pointless trip.
        if !allowed(self.role(), c.op.kind()) || self.access.read_only {
            self.flash(FlashKind::Refused, self.t.flash_read_only.into());
            return vec![];
        }
        // "Marcar atendido" waits out its grace period, and `u` withdraws
        // it (`calls.rs`).
        if let PendingOp::Resolve { .. } = c.op {
            self.defer(c.op, self.t.act_resolve.into(), c.reason, c.seen);
            return vec![];
        }
        self.ops_in_flight += 1;
        if let PendingOp::Reprocess { day, states } = c.op {
            // The gauge shows from the start; the worker tells how far.
            self.reprocess.running = Some(reprocess::Progress { done: 0, total: 0 });
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
            seen: c.seen,
            now: self.now,
        }]
    }

    /// The evidence for an open resend confirmation: shown, and when the
    /// customer already has a message of the family (and no other rule
    /// refuses), the dialog asks for the typed word instead of `s`.
    fn on_resend_evidence(&mut self, intention_id: i64, evidence: Result<Box<ResendEvidence>, Failure>) {
        let Some(c) = self.confirm.as_mut() else { return };
        let open_for = match c.op {
            PendingOp::Resend { intention_id: id, .. } => id,
            _ => return,
        };
        if open_for != intention_id {
            return;
        }
        match evidence {
            Ok(ev) => {
                if ev.needs_acknowledgement() && ev.refusal.is_none() {
                    self.mode = Mode::ConfirmWord;
                }
                c.resend = Some(ResendConfirm {
                    evidence: Some(ev),
                    ..ResendConfirm::default()
                });
            }
            Err(e) => {
                self.confirm = None;
                self.mode = Mode::Normal;
                self.fail(e);
            }
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
                self.reprocess.error = Some(e);
            }
            // A late one (after the report) must not bring the gauge back.
            Response::ReprocessProgress(p) if self.reprocess.running.is_some() => self.reprocess.running = Some(p),
            Response::ReprocessProgress(_) => {}
            Response::Reprocessed(r) => return self.on_reprocessed(r),
            Response::Attention(Ok(p)) => {
                self.attention.set(p);
                self.apply_call_list();
                return self.ask_call_tries();
            }
            Response::CallTries(Ok(v)) => self.on_call_tries(v),
            Response::ActionReasons(Ok(v)) => self.calls.reasons.extend(v),
            Response::ActionReasons(Err(_)) => {}
            // The list still shows; the tries are this session's.
            Response::CallTries(Err(_)) => {}
            Response::Upcoming(Ok(p)) => self.upcoming.set(p),
            Response::Counter(Ok(p)) => self.counter.set(p),
            Response::BoardHours(Ok(h)) => self.board_hours = h,
            Response::BoardHours(Err(_)) => self.board_hours.clear(),
            Response::BoardDay(Ok(d)) => self.board_day = Some(d),
            Response::BoardDay(Err(e)) => {
                self.board_day = None;
                // Asked again on the next tick.
                self.board_day_asked = None;
                self.fail(e);
            }
            Response::Board(Ok(b)) => {
                self.board = Some(b);
                self.board_selected = self.board_selected.min(self.board_items().len().saturating_sub(1));
            }
            Response::Detail(Ok(d)) => {
                self.detail = Some(d);
                self.detail_loading = false;
            }
            status @ Response::Status { .. } => self.on_status(status),
            Response::Doctor(checks) => self.doctor = Some(checks),
            Response::FeedHolds(r) => self.on_feed_holds(r),
            Response::Attention(Err(e))
            | Response::Upcoming(Err(e))
            | Response::Counter(Err(e))
            | Response::Board(Err(e))
            | Response::Detail(Err(e)) => {
                self.attention.loading = false;
                self.upcoming.loading = false;
                self.counter.loading = false;
                self.detail_loading = false;
                self.fail(e);
            }
            Response::Patients { text, found } => return self.on_patients(&text, found),
            Response::PatientCard { phone, card } => self.on_patient_card(&phone, card),
            Response::ResendEvidence { intention_id, evidence } => self.on_resend_evidence(intention_id, evidence),
            Response::Op(r) => {
                self.ops_in_flight = self.ops_in_flight.saturating_sub(1);
                match r {
                    Ok(report) => self.op_flash(&report),
                    Err(OpError::Changed) => self.flash(FlashKind::Refused, self.t.flash_changed.into()),
                    Err(OpError::Other(e)) => self.fail(e),
                }
                return self.load();
            }
        }
        vec![]
    }

    /// A reprocessing run ended: its summary on the flash line, the
    /// screens reloaded.
    fn on_reprocessed(&mut self, r: Result<Box<reprocess::Report>, Failure>) -> Vec<Request> {
        self.ops_in_flight = self.ops_in_flight.saturating_sub(1);
        self.reprocess.running = None;
        match r {
            Ok(report) => {
                let what = format!(
                    "{} {}: {}",
                    self.t.act_reprocess,
                    report.day,
                    summary_text(self.t, &report.items)
                );
                self.flash(FlashKind::Success, fill(self.t.flash_done, &[("what", &what)]));
                self.reprocess.done = Some(report);
            }
            Err(e) => self.fail(e),
        }
        self.load()
    }

    /// The dispatcher's status line: queue, services, other dispatchers,
    /// alerts and the error worth showing.
    fn on_status(&mut self, status: Response) {
        let Response::Status {
            queue,
            last_error,
            service,
            others,
            alerts,
            blocked,
            paused,
            feeds,
            locked,
        } = status
        else {
            return;
        };
        self.dispatcher.queue = queue;
        if others.is_some() {
            self.dispatcher.others = others;
            self.alerts = alerts;
            self.blocked_templates = blocked;
            self.paused_channels = paused;
            self.feed_health = feeds;
        }
        self.dispatcher.locked = locked;
        let service_error = service.as_ref().and_then(|s| s.last_error.clone()).map(|(_, e)| e);
        if let Some(s) = &service {
            self.dispatcher.running = Some(s.state != ServiceState::Stopped);
            self.dispatcher.paused = s.state == ServiceState::Paused;
        }
        // A start-up error (channel unavailable) stays until restart.
        if self.dispatcher.running == Some(true) {
            self.dispatcher.last_error = service_error.or(last_error);
        } else if service_error.is_some() {
            self.dispatcher.last_error = service_error;
        }
    }

    /// An error on the flash line in the operator's words, kept whole for
    /// `enter` (while it shows) and `:error`.
    pub(super) fn fail(&mut self, e: Failure) {
        let why = format!("{} · {}", self.t.failure_line(&e), self.t.error_more);
        let text = fill(self.t.flash_error, &[("why", &why)]);
        self.failure = Some(e);
        self.flash(FlashKind::Error, text);
    }

    /// Whether `enter` opens the error's detail: an error is on the flash
    /// line and its whole text is kept.
    pub fn error_on_flash(&self) -> bool {
        self.failure.is_some() && self.flash.as_ref().is_some_and(|f| f.kind == FlashKind::Error)
    }

    pub(super) fn op_flash(&mut self, r: &OpReport) {
        let t = self.t;
        if let (OpKind::PauseDispatch | OpKind::ResumeDispatch, OpOutcome::Done { .. }) = (r.op, &r.outcome) {
            // Shown at once; the next status read confirms it.
            let pause = r.op == OpKind::PauseDispatch;
            self.dispatcher.paused = pause;
            let what = if pause { t.done_paused } else { t.done_resumed };
            self.flash(FlashKind::Success, fill(t.flash_done, &[("what", what)]));
            return;
        }
        let kind = match &r.outcome {
            OpOutcome::Done { .. } => FlashKind::Success,
            OpOutcome::Recorded { .. } => FlashKind::Info,
            OpOutcome::Refused(_) => FlashKind::Refused,
        };
        let text = t.report(r, self.now);
        self.log.push((self.now, text.clone()));
        self.flash(kind, text);
    }
}
