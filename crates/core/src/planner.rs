//! The planner: from a commitment's change to the messages it calls for.
//!
//! Pure and deterministic: planning the same commitment state twice yields
//! the same keys and the same content, so re-imports and reprocessing reserve
//! what already exists instead of adding messages. Closing what stopped being
//! pertinent is expressed as [`Closure`] rules the store applies to planned
//! intentions in the same transaction.

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

use crate::domain::commitment::{Change, Commitment, CommitmentKind};
use crate::domain::event::BookingEvent;
use crate::domain::intention::{NewIntention, correlation_id, operating_day};
use crate::domain::key::{IntentionKey, KeyError, Purpose};
use crate::domain::state::CancelReason;
use crate::policy::Policy;
use crate::templates::{MAX_BODY_CHARS, Templates, date_es_seen_at, time_hhmm};

/// Which still-planned intentions of the commitment to close, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closure {
    /// Planned intentions of versions older than this one.
    OlderThan { version: i64, reason: CancelReason },
    /// Every planned intention except the ones this plan reserves.
    AllPlanned { reason: CancelReason },
    /// Planned reminders that ask for confirmation.
    ConfirmReminders { reason: CancelReason },
    /// Every planned reminder.
    Reminders { reason: CancelReason },
}

impl Closure {
    /// The reason the intentions this rule closes are cancelled with.
    pub fn reason(self) -> CancelReason {
        match self {
            Closure::OlderThan { reason, .. }
            | Closure::AllPlanned { reason }
            | Closure::ConfirmReminders { reason }
            | Closure::Reminders { reason } => reason,
        }
    }

    /// Whether this rule closes a still-planned intention of commitment
    /// version `version` with purpose slug `purpose`. (The plan's own keys
    /// are kept by the caller whatever the rule says.)
    pub fn closes(self, version: i64, purpose: &str, asks_confirmation: bool) -> bool {
        match self {
            Closure::OlderThan { version: newer, .. } => version < newer,
            Closure::AllPlanned { .. } => true,
            Closure::ConfirmReminders { .. } => asks_confirmation,
            Closure::Reminders { .. } => purpose.starts_with("recordatorio-"),
        }
    }
}

#[derive(Debug, Default)]
pub struct Plan {
    pub intentions: Vec<NewIntention>,
    pub closures: Vec<Closure>,
    /// Why nothing (or less than usual) was planned, for the import report.
    pub notes: Vec<String>,
    /// Messages that must not go out as rendered, with the reason: they are
    /// reserved (so the ledger shows them) and handed to a person in
    /// `review` instead of being sent. The event itself is applied, because
    /// refusing it would also refuse what it closes (a cancellation whose
    /// notice is too long must still stop the reminders).
    pub held: Vec<(NewIntention, String)>,
    /// The intentions stand in for planned ones the closures retire (a
    /// notice moving to a new phone): reserve them only if a closure
    /// closed something, so nothing already sent is sent again.
    pub replaces_only: bool,
}

impl Plan {
    /// Moves every intention whose rendered text WhatsApp would refuse
    /// (over [`MAX_BODY_CHARS`]) from `intentions` to `held`.
    fn hold_oversize(&mut self) {
        let (ok, long): (Vec<_>, Vec<_>) = std::mem::take(&mut self.intentions)
            .into_iter()
            .partition(|n| n.body.chars().count() <= MAX_BODY_CHARS);
        self.intentions = ok;
        for n in long {
            let reason = format!(
                "rendered text has {} characters, over WhatsApp's limit of {MAX_BODY_CHARS}: not sent; \
                 fix the template or the booking data, then cancel this message",
                n.body.chars().count()
            );
            self.notes.push(format!("{}: {reason}", n.key));
            self.held.push((n, reason));
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("no template for purpose {0:?}")]
    NoTemplate(String),
    #[error(transparent)]
    Key(#[from] KeyError),
}

pub struct Planner<'a> {
    pub policy: &'a Policy,
    pub templates: &'a Templates,
    pub tz: Tz,
}

impl<'a> Planner<'a> {
    pub fn new(policy: &'a Policy, templates: &'a Templates, tz: Tz) -> Planner<'a> {
        Planner { policy, templates, tz }
    }

    /// Plans the messages for `after`, the commitment as it is now, given
    /// the kind of change the event made.
    pub fn plan(
        &self,
        after: &Commitment,
        change: Change,
        ev: &BookingEvent,
        now: DateTime<Utc>,
    ) -> Result<Plan, PlanError> {
        let mut plan = Plan::default();
        self.plan_into(&mut plan, after, change, ev, now)?;
        plan.hold_oversize();
        Ok(plan)
    }

    fn plan_into(
        &self,
        plan: &mut Plan,
        after: &Commitment,
        change: Change,
        ev: &BookingEvent,
        now: DateTime<Utc>,
    ) -> Result<(), PlanError> {
        let appointment = after.kind == CommitmentKind::Appointment;
        match change {
            Change::Created | Change::Rescheduled | Change::Moved if appointment => {
                plan.closures.push(Closure::OlderThan {
                    version: after.version,
                    reason: CancelReason::Superseded,
                });
                if !self.fresh(ev, now, plan) || !self.ahead(after, now, plan) {
                    return Ok(());
                }
                let (first, wanted) = if change == Change::Created {
                    (Purpose::Booking, self.policy.booking_notice)
                } else {
                    (Purpose::Update, self.policy.update_notice)
                };
                if wanted {
                    plan.intentions.push(self.appointment(after, first, now)?);
                }
                self.reminders(plan, after, false, now)?;
            }
            // Nothing about the appointment itself moved, so no "changed"
            // notice: the old version's messages are retired and the
            // reminders planned again with the right recipient and text. A
            // new phone has heard nothing yet, so it gets the booking notice.
            Change::Recipient | Change::Details if appointment => {
                plan.closures.push(Closure::OlderThan {
                    version: after.version,
                    reason: CancelReason::Superseded,
                });
                if after.is_cancelled() || !self.fresh(ev, now, plan) || !self.ahead(after, now, plan) {
                    return Ok(());
                }
                if change == Change::Recipient && self.policy.booking_notice {
                    plan.intentions.push(self.appointment(after, Purpose::Booking, now)?);
                }
                // Staff who already phoned the customer did what a reminder
                // would do; a confirmed appointment needs no "please confirm".
                if after.manual_contact_at.is_none() {
                    self.reminders(plan, after, after.confirmed_at.is_some(), now)?;
                }
            }
            Change::Cancelled => {
                plan.closures.push(Closure::AllPlanned {
                    reason: CancelReason::CommitmentCancelled,
                });
                if self.policy.cancellation_notice && self.fresh(ev, now, plan) && self.ahead(after, now, plan) {
                    plan.intentions
                        .push(self.appointment(after, Purpose::Cancellation, now)?);
                }
            }
            Change::Confirmed => {
                plan.closures.push(Closure::ConfirmReminders {
                    reason: CancelReason::AlreadyConfirmed,
                });
            }
            Change::ManualContact => {
                plan.closures.push(Closure::Reminders {
                    reason: CancelReason::ManualContact,
                });
            }
            Change::Created | Change::OrderState if !appointment => {
                if self.fresh(ev, now, plan) {
                    plan.intentions.push(self.order(after, now)?);
                }
            }
            // A new phone on an order: nothing planned for the old number
            // may reach it. The state's notice moves to the new number,
            // but only if one was still waiting (replaces_only): a notice
            // already sent is not sent again because the number changed.
            Change::Recipient | Change::OrderStateNewRecipient if !appointment => {
                plan.closures.push(Closure::OlderThan {
                    version: after.version,
                    reason: CancelReason::Superseded,
                });
                plan.replaces_only = change == Change::Recipient;
                if self.templates.for_purpose(after.status.as_str()).is_none() {
                    plan.notes.push(format!("order state {}: no notice", after.status));
                } else if self.fresh(ev, now, plan) {
                    plan.intentions.push(self.order(after, now)?);
                }
            }
            Change::Internal => plan.notes.push("internal state: no message".into()),
            _ => plan.notes.push("no change that matters to messages".into()),
        }
        Ok(())
    }

    /// The policy's reminders still ahead of `now`; `skip_confirm` leaves
    /// out the ones that ask the customer to confirm.
    fn reminders(
        &self,
        plan: &mut Plan,
        after: &Commitment,
        skip_confirm: bool,
        now: DateTime<Utc>,
    ) -> Result<(), PlanError> {
        for &minutes in &self.policy.reminder_offsets_minutes {
            if skip_confirm && self.policy.confirm_reminder_offsets_minutes.contains(&minutes) {
                continue;
            }
            let due = after.starts_at.map(|s| s - Duration::minutes(minutes.into()));
            // A reminder whose moment already passed is covered by the
            // booking or update notice sent now.
            if due.is_some_and(|d| d > now) {
                plan.intentions
                    .push(self.appointment(after, Purpose::Reminder { minutes }, now)?);
            }
        }
        Ok(())
    }

    /// Flood guard: an event older than the horizon is history.
    fn fresh(&self, ev: &BookingEvent, now: DateTime<Utc>, plan: &mut Plan) -> bool {
        let horizon = Duration::hours(self.policy.horizon_hours.into());
        match ev.occurred_at {
            Some(t) if t.with_timezone(&Utc) < now - horizon => {
                plan.notes.push(format!(
                    "event older than the {} h horizon: no messages",
                    self.policy.horizon_hours
                ));
                false
            }
            _ => true,
        }
    }

    fn ahead(&self, c: &Commitment, now: DateTime<Utc>, plan: &mut Plan) -> bool {
        match c.starts_at {
            Some(s) if s <= now => {
                plan.notes.push("appointment already in the past: no messages".into());
                false
            }
            _ => true,
        }
    }

    fn appointment(&self, c: &Commitment, purpose: Purpose, now: DateTime<Utc>) -> Result<NewIntention, PlanError> {
        let asks_confirmation = matches!(purpose, Purpose::Reminder { minutes }
            if self.policy.confirm_reminder_offsets_minutes.contains(&minutes));
        let template_purpose = match &purpose {
            Purpose::Reminder { .. } if asks_confirmation => "recordatorio-confirmar".to_string(),
            Purpose::Reminder { .. } => "recordatorio".to_string(),
            p => p.slug(),
        };
        let due = match &purpose {
            Purpose::Reminder { minutes } => c
                .starts_at
                .map(|s| s - Duration::minutes((*minutes).into()))
                .unwrap_or(now),
            _ => now,
        };
        let params = vec![
            c.name.clone().unwrap_or_default(),
            c.service.clone().unwrap_or_default(),
            // With the year when the customer reads it in another year.
            c.starts_at
                .map(|s| date_es_seen_at(s, due, self.tz))
                .unwrap_or_default(),
            c.starts_at.map(|s| time_hhmm(s, self.tz)).unwrap_or_default(),
            c.location.clone().unwrap_or_default(),
        ];
        let key = IntentionKey::for_commitment(&c.reference, &purpose, c.version)?;
        self.build(
            c,
            key,
            purpose,
            &template_purpose,
            params,
            due,
            c.starts_at,
            asks_confirmation,
        )
    }

    fn order(&self, c: &Commitment, now: DateTime<Utc>) -> Result<NewIntention, PlanError> {
        let event = c.status.as_str().to_string();
        let key = IntentionKey::for_order(&c.reference, &event, c.version, &self.policy.order_channel)?;
        let params = vec![c.name.clone().unwrap_or_default(), c.reference.clone()];
        self.build(
            c,
            key,
            Purpose::Order { event: event.clone() },
            &event,
            params,
            now,
            None,
            false,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        &self,
        c: &Commitment,
        key: IntentionKey,
        purpose: Purpose,
        template_purpose: &str,
        parameters: Vec<String>,
        due_at: DateTime<Utc>,
        expires_at: Option<DateTime<Utc>>,
        asks_confirmation: bool,
    ) -> Result<NewIntention, PlanError> {
        let t = self
            .templates
            .for_purpose(template_purpose)
            .ok_or_else(|| PlanError::NoTemplate(template_purpose.to_string()))?;
        Ok(NewIntention {
            correlation_id: correlation_id(&key),
            key,
            commitment_ref: c.reference.clone(),
            commitment_version: c.version,
            purpose,
            recipient: c.phone.clone().unwrap_or_default(),
            category: t.category,
            channel: "whatsapp".into(),
            template: t.name.clone(),
            language: t.language.clone(),
            body: t.render(&parameters),
            parameters,
            due_at,
            expires_at,
            asks_confirmation,
            day: operating_day(due_at, self.tz),
            created_by: "planner".into(),
            authorized_by: None,
            reason: None,
            related_key: None,
        })
    }
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
