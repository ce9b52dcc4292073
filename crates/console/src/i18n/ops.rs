//! What the console says of operator actions: the report of what an
//! action did, a refusal in full and in a few words, and a resend family's
//! members as the supervisor reads them before authorizing another.

use chrono_tz::Tz;

use super::{Strings, fill, lookup};
use crate::domain::text::inert;
use crate::ops::{OpKind, OpOutcome, OpReport, Refusal};
use crate::store::FamilyMember;
use crate::tui::failure::{Failure, FailureKind};

impl Strings {
    /// An action's name, as the report, the audit list and the help say it.
    pub fn op_label(&self, op: OpKind) -> &'static str {
        match op {
            OpKind::Cancel => self.act_cancel,
            OpKind::Verify => self.act_verify,
            OpKind::AuthorizeResend => self.act_resend,
            OpKind::ManualContact => self.act_manual_contact,
            OpKind::Reprocess => self.act_reprocess,
            OpKind::PauseDispatch => self.act_pause_dispatch,
            OpKind::ResumeDispatch => self.act_resume_dispatch,
            OpKind::Resolve => self.act_resolve,
            OpKind::RequestResend => self.act_request_resend,
            OpKind::DeclineResend => self.act_decline_resend,
            OpKind::CallOutcome => self.act_call_outcome,
            OpKind::Reopen => self.act_reopen,
            OpKind::FeedConfirm => self.act_feed_confirm,
            OpKind::FeedDiscard => self.act_feed_discard,
        }
    }

    /// What an operator action did, in words (the console's flash line and
    /// the command line's message): `Hecho: …`, the recorded-only note, or
    /// the refusal.
    pub fn report(&self, r: &OpReport, now: chrono::DateTime<chrono::Utc>) -> String {
        let target = match (&r.intention_id, &r.intention_key) {
            (Some(id), Some(key)) => format!("#{id} {}", inert(key)),
            _ => inert(&r.commitment_ref).into_owned(),
        };
        let action = self.op_label(r.op);
        let done = |what: String| fill(self.flash_done, &[("what", &what)]);
        match &r.outcome {
            OpOutcome::Done {
                new_intention: Some((id, key)),
                ..
            } => done(fill(
                self.done_new,
                &[
                    ("action", action),
                    ("target", &target),
                    ("id", &id.to_string()),
                    ("key", &inert(key)),
                ],
            )),
            // Issue 25 §3: a request or its decline closes nothing.
            OpOutcome::Done { .. } if matches!(r.op, OpKind::RequestResend | OpKind::DeclineResend) => {
                done(format!("{action} {target}"))
            }
            OpOutcome::Done { .. } if r.op == OpKind::Resolve => done(fill(
                self.cli_resolved,
                &[("target", &target), ("action", &r.action_id.to_string())],
            )),
            OpOutcome::Done { state: Some(s), .. } => done(fill(
                self.done_state,
                &[
                    ("action", action),
                    ("target", &target),
                    ("state", self.state(s.as_str())),
                ],
            )),
            OpOutcome::Done { closed, .. } => done(fill(
                self.done_closed,
                &[("action", action), ("target", &target), ("n", &closed.to_string())],
            )),
            OpOutcome::Recorded { state } => fill(
                self.recorded_only,
                &[
                    ("action", action),
                    ("target", &target),
                    ("state", self.state(state.as_str())),
                ],
            ),
            OpOutcome::Refused(why) => fill(self.flash_refused, &[("why", &self.refusal(why, now))]),
        }
    }

    /// A refusal in a few words, beside a dimmed key.
    pub fn refusal_short(&self, r: &Refusal) -> &'static str {
        lookup(self.refusal_short, r.rule()).unwrap_or(self.ref_short_fallback())
    }

    fn ref_short_fallback(&self) -> &'static str {
        lookup(self.refusal_short, "other").unwrap_or("")
    }

    /// Explains a ledger refusal in this language; a time in it reads
    /// as every front-desk date does, relative to `now`.
    pub fn refusal(&self, r: &Refusal, now: chrono::DateTime<chrono::Utc>) -> String {
        match r {
            Refusal::InFlight => self.ref_in_flight.into(),
            Refusal::Uncertain => self.ref_uncertain.into(),
            Refusal::ChannelHasIt { state } => fill(self.ref_channel_has_it, &[("state", self.state(state.as_str()))]),
            Refusal::Delivered { state } => fill(self.ref_delivered, &[("state", self.state(state.as_str()))]),
            Refusal::Closed { state, reason } => {
                let reason = reason
                    .as_deref()
                    .map(|r| format!(": {}", inert(self.reason(r))))
                    .unwrap_or_default();
                fill(
                    self.ref_closed,
                    &[("state", self.state(state.as_str())), ("reason", &reason)],
                )
            }
            Refusal::NotSentYet { state } => fill(self.ref_not_sent, &[("state", self.state(state.as_str()))]),
            Refusal::ResendPending {
                key,
                authorized_by: Some(who),
                authorized_at: at,
            } => fill(
                self.ref_resend_pending_by,
                &[
                    ("key", &inert(key)),
                    ("who", &inert(who)),
                    ("at", &self.words.when_at(*at, now)),
                ],
            ),
            Refusal::ResendPending { key, .. } => fill(self.ref_resend_pending, &[("key", &inert(key))]),
            Refusal::AcknowledgeDelivery { key, state } => fill(
                self.ref_acknowledge_delivery,
                &[
                    ("key", &inert(key)),
                    ("state", self.state(state.as_str())),
                    ("word", self.resend_word),
                ],
            ),
            Refusal::DailyCap {
                limit,
                authorized_today,
            } => fill(
                self.ref_daily_cap,
                &[("n", &authorized_today.to_string()), ("limit", &limit.to_string())],
            ),
            Refusal::StaleVersion { planned, current } => fill(
                self.ref_stale,
                &[("planned", &planned.to_string()), ("current", &current.to_string())],
            ),
            Refusal::CommitmentCancelled => self.ref_commitment_cancelled.into(),
            Refusal::Expired => self.ref_expired.into(),
            Refusal::NotAnAppointment => self.ref_not_appointment.into(),
            Refusal::NotHandled => self.ref_not_handled.into(),
            Refusal::NoLookup => self.ref_no_lookup.into(),
            Refusal::ChannelUnsure => self.ref_channel_unsure.into(),
            Refusal::ChannelNoRecord => self.ref_channel_no_record.into(),
            Refusal::NoCommandId => self.ref_no_command_id.into(),
            Refusal::ChannelUnavailable { detail } => fill(self.ref_channel_unavailable, &[("detail", &inert(detail))]),
            Refusal::ResendRequested { by } => fill(self.ref_resend_requested, &[("by", &inert(by))]),
            Refusal::NoResendRequest => self.ref_no_resend_request.into(),
        }
    }

    /// One message of a resend family as the supervisor reads it before
    /// authorizing another, in two lines: which one and its state; then
    /// when the channel took it, when it was delivered and read (local
    /// time), and who authorized it.
    pub fn resend_member(
        &self,
        m: &FamilyMember,
        is_original: bool,
        tz: Tz,
        now: chrono::DateTime<chrono::Utc>,
    ) -> [String; 2] {
        let at = |t: chrono::DateTime<chrono::Utc>| self.words.when(t, now, tz);
        let head = format!(
            "{} #{} {} · {}",
            if is_original {
                self.resend_original
            } else {
                self.resend_nth
            },
            m.id,
            inert(&m.key),
            self.state(m.state.as_str())
        );
        let mut parts = Vec::new();
        let times = [
            (self.resend_accepted, m.accepted_at),
            (self.resend_delivered, m.delivered_at),
            (self.resend_read, m.read_at),
        ];
        for (label, t) in times {
            if let Some(t) = t {
                parts.push(format!("{label} {}", at(t)));
            }
        }
        if m.delivered_at.is_none() && m.read_at.is_none() {
            parts.push(self.resend_no_evidence.to_string());
        }
        parts.push(match &m.authorized_by {
            Some(who) => fill(self.resend_authorized_by, &[("who", &inert(who))]),
            None => self.resend_by_system.to_string(),
        });
        [head, parts.join(" · ")]
    }
}

// The worker's failures, as the flash line and the error dialog say them.
impl Strings {
    /// What a failure means for the operator, in this language.
    pub fn failure(&self, kind: FailureKind) -> &'static str {
        match kind {
            FailureKind::Busy => self.failure_busy,
            FailureKind::DiskFull => self.failure_disk_full,
            FailureKind::ReadOnly => self.failure_read_only,
            FailureKind::Ledger => self.failure_ledger,
            FailureKind::Upgraded => self.failure_upgraded,
            FailureKind::NotFound => self.failure_not_found,
            FailureKind::Changed => self.failure_changed,
            FailureKind::NotAllowed => self.failure_not_allowed,
            FailureKind::Channel => self.failure_channel,
            FailureKind::NoChannel => self.failure_no_channel,
            FailureKind::NoDispatcher => self.failure_no_dispatcher,
            FailureKind::Unavailable => self.reprocess_unavailable,
            FailureKind::Other => self.failure_other,
        }
    }

    /// A failure in one line: the sentence and the technical text cut to
    /// a few words.
    pub fn failure_line(&self, f: &Failure) -> String {
        const ROOM: usize = 40;
        let detail = inert(f.detail.trim());
        let mut line = self.failure(f.kind).to_string();
        if !detail.is_empty() {
            let short: String = if detail.chars().count() > ROOM {
                detail.chars().take(ROOM - 1).chain(['…']).collect()
            } else {
                detail.into_owned()
            };
            line.push_str(&format!(" ({short})"));
        }
        line
    }
}
