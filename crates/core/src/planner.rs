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
use crate::templates::{MAX_BODY_CHARS, Templates, date_es, time_hhmm};

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
            c.starts_at.map(|s| date_es(s, self.tz)).unwrap_or_default(),
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
        let event = c.status.clone();
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
mod tests {
    use super::*;

    #[test]
    fn each_closure_names_what_it_closes() {
        let r = CancelReason::Superseded;
        let older = Closure::OlderThan { version: 2, reason: r };
        assert!(older.closes(1, "aviso-reserva", false) && !older.closes(2, "aviso-reserva", false));
        assert!(Closure::AllPlanned { reason: r }.closes(5, "confirmado", false));
        let confirm = Closure::ConfirmReminders { reason: r };
        assert!(confirm.closes(1, "recordatorio-24h", true) && !confirm.closes(1, "recordatorio-2h", false));
        let reminders = Closure::Reminders { reason: r };
        assert!(reminders.closes(1, "recordatorio-2h", false) && !reminders.closes(1, "aviso-reserva", false));
        for c in [
            older,
            confirm,
            reminders,
            Closure::AllPlanned {
                reason: CancelReason::ManualContact,
            },
        ] {
            assert!(matches!(
                c.reason(),
                CancelReason::Superseded | CancelReason::ManualContact
            ));
        }
    }
    use crate::domain::commitment::{Effect, apply};
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 15, 0, 0).unwrap()
    }

    fn ev(kind: &str, extra: &str) -> BookingEvent {
        BookingEvent::from_json(&format!(
            r#"{{"event_id":"e","type":"{kind}","ref":"cita-1042","contact":{{"phone":"+51987654321","name":"Ana"}},"service":"Odontología","location":"Sede Miraflores"{extra}}}"#
        ))
        .unwrap()
    }

    fn run(before: Option<&Commitment>, e: &BookingEvent) -> (Commitment, Plan) {
        let policy = Policy::default();
        let templates = Templates::embedded();
        let p = Planner {
            policy: &policy,
            templates: &templates,
            tz: chrono_tz::America::Lima,
        };
        match apply(before, e, now()) {
            Effect::Applied { after, kind, .. } => {
                let plan = p.plan(&after, kind, e, now()).unwrap();
                (after, plan)
            }
            other => panic!("{other:?}"),
        }
    }

    fn keys(p: &Plan) -> Vec<&str> {
        p.intentions.iter().map(|i| i.key.as_str()).collect()
    }

    #[test]
    fn scheduling_plans_a_booking_notice_and_two_reminders() {
        let (_, plan) = run(
            None,
            &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        );
        assert_eq!(
            keys(&plan),
            [
                "cita-1042:aviso-reserva:v1",
                "cita-1042:recordatorio-24h:v1",
                "cita-1042:recordatorio-2h:v1"
            ]
        );
        let r24 = &plan.intentions[1];
        assert!(r24.asks_confirmation);
        assert_eq!(r24.due_at, Utc.with_ymd_and_hms(2026, 11, 30, 14, 30, 0).unwrap());
        assert_eq!(r24.day, "2026-11-30");
        assert!(r24.body.contains("martes 1 de diciembre a las 09:30"), "{}", r24.body);
        assert!(!plan.intentions[2].asks_confirmation);
        assert_eq!(plan.intentions[0].due_at, now());
    }

    #[test]
    fn replanning_gives_the_same_keys_and_content() {
        let e = ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#);
        let (_, a) = run(None, &e);
        let (_, b) = run(None, &e);
        let fa: Vec<String> = a.intentions.iter().map(|i| i.fingerprint()).collect();
        let fb: Vec<String> = b.intentions.iter().map(|i| i.fingerprint()).collect();
        assert_eq!(keys(&a), keys(&b));
        assert_eq!(fa, fb);
    }

    #[test]
    fn reschedule_plans_an_update_notice_and_supersedes_the_old_version() {
        let (c, _) = run(
            None,
            &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        );
        let (_, plan) = run(
            Some(&c),
            &ev("appointment.rescheduled", r#","starts_at":"2026-12-03T09:30:00-05:00""#),
        );
        assert_eq!(
            keys(&plan),
            [
                "cita-1042:aviso-cambio:v2",
                "cita-1042:recordatorio-24h:v2",
                "cita-1042:recordatorio-2h:v2"
            ]
        );
        assert_eq!(
            plan.closures,
            [Closure::OlderThan {
                version: 2,
                reason: CancelReason::Superseded
            }]
        );
    }

    #[test]
    fn cancellation_closes_planned_ones_and_notifies() {
        let (c, _) = run(
            None,
            &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        );
        let (_, plan) = run(Some(&c), &ev("appointment.cancelled", ""));
        assert_eq!(keys(&plan), ["cita-1042:aviso-cancelacion:v2"]);
        assert_eq!(
            plan.closures,
            [Closure::AllPlanned {
                reason: CancelReason::CommitmentCancelled
            }]
        );
    }

    #[test]
    fn confirmation_and_manual_contact_only_close() {
        let (c, _) = run(
            None,
            &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        );
        let (c, plan) = run(Some(&c), &ev("appointment.confirmed", ""));
        assert!(plan.intentions.is_empty());
        assert_eq!(
            plan.closures,
            [Closure::ConfirmReminders {
                reason: CancelReason::AlreadyConfirmed
            }]
        );
        let (_, plan) = run(
            Some(&c),
            &ev("appointment.manual_contact", r#","operator":"recepcion""#),
        );
        assert!(plan.intentions.is_empty());
        assert_eq!(
            plan.closures,
            [Closure::Reminders {
                reason: CancelReason::ManualContact
            }]
        );
    }

    #[test]
    fn past_reminders_are_skipped_and_past_appointments_plan_nothing() {
        // Booked 3 hours ahead: the 24 h reminder already passed.
        let (_, plan) = run(
            None,
            &ev("appointment.scheduled", r#","starts_at":"2026-11-29T13:00:00-05:00""#),
        );
        assert_eq!(
            keys(&plan),
            ["cita-1042:aviso-reserva:v1", "cita-1042:recordatorio-2h:v1"]
        );
        let (_, plan) = run(
            None,
            &ev("appointment.scheduled", r#","starts_at":"2026-11-20T09:30:00-05:00""#),
        );
        assert!(plan.intentions.is_empty());
        assert!(plan.notes[0].contains("past"));
    }

    #[test]
    fn historical_events_plan_nothing() {
        let (_, plan) = run(
            None,
            &ev(
                "appointment.scheduled",
                r#","starts_at":"2026-12-01T09:30:00-05:00","occurred_at":"2026-10-01T09:00:00-05:00""#,
            ),
        );
        assert!(plan.intentions.is_empty());
        assert!(plan.notes[0].contains("horizon"));
    }

    #[test]
    fn orders_notify_business_states_only() {
        let mk = |kind: &str| {
            BookingEvent::from_json(&format!(
                r#"{{"event_id":"e","type":"{kind}","ref":"pedido-88","contact":{{"phone":"+51987654321","name":"Luis"}}}}"#
            ))
            .unwrap()
        };
        let (o, plan) = run(None, &mk("order.confirmed"));
        assert_eq!(keys(&plan), ["pedido-88:confirmado:v1:whatsapp"]);
        let (o, plan) = run(Some(&o), &mk("order.updated"));
        assert!(plan.intentions.is_empty());
        let (_, plan) = run(Some(&o), &mk("order.shipped"));
        assert_eq!(keys(&plan), ["pedido-88:enviado:v2:whatsapp"]);
        assert_eq!(
            plan.intentions[0].body,
            "Hola Luis, tu pedido pedido-88 ya está en camino."
        );
    }

    #[test]
    fn a_new_phone_gets_the_booking_notice_and_reminders_but_no_change_notice() {
        let (c, _) = run(
            None,
            &ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#),
        );
        let moved = BookingEvent::from_json(
            r#"{"event_id":"e2","type":"appointment.scheduled","ref":"cita-1042","starts_at":"2026-12-01T09:30:00-05:00",
                "contact":{"phone":"+51911222333","name":"Ana"},"service":"Odontología","location":"Sede Miraflores"}"#,
        )
        .unwrap();
        let (after, plan) = run(Some(&c), &moved);
        assert_eq!(after.version, 2);
        assert_eq!(
            keys(&plan),
            [
                "cita-1042:aviso-reserva:v2",
                "cita-1042:recordatorio-24h:v2",
                "cita-1042:recordatorio-2h:v2"
            ]
        );
        assert!(plan.intentions.iter().all(|i| i.recipient == "+51911222333"));
        assert_eq!(
            plan.closures,
            [Closure::OlderThan {
                version: 2,
                reason: CancelReason::Superseded
            }]
        );
        // A name fix on a confirmed appointment: reminders only, and none
        // that asks to confirm again.
        let mut confirmed = after.clone();
        confirmed.confirmed_at = Some(now());
        let mut renamed = moved.clone();
        renamed.contact.as_mut().unwrap().name = Some("Ana María".into());
        let (_, plan) = run(Some(&confirmed), &renamed);
        assert_eq!(keys(&plan), ["cita-1042:recordatorio-2h:v3"]);
    }

    #[test]
    fn a_text_over_whatsapps_limit_is_held_for_review_not_planned() {
        let policy = Policy::default();
        let long = "x".repeat(MAX_BODY_CHARS);
        let templates = Templates::parse(
            &crate::templates::DEFAULT_TEMPLATES
                .replace("tu cita de {{2}} quedó reservada", &format!("{long} {{{{2}}}}")),
            "t.toml",
        )
        .unwrap();
        let p = Planner {
            policy: &policy,
            templates: &templates,
            tz: chrono_tz::America::Lima,
        };
        let e = ev("appointment.scheduled", r#","starts_at":"2026-12-01T09:30:00-05:00""#);
        let Effect::Applied { after, kind, .. } = apply(None, &e, now()) else {
            panic!("applied")
        };
        let plan = p.plan(&after, kind, &e, now()).unwrap();
        assert_eq!(
            keys(&plan),
            ["cita-1042:recordatorio-24h:v1", "cita-1042:recordatorio-2h:v1"]
        );
        assert_eq!(plan.held.len(), 1);
        let (held, reason) = &plan.held[0];
        assert_eq!(held.key.as_str(), "cita-1042:aviso-reserva:v1");
        assert!(held.body.chars().count() > MAX_BODY_CHARS);
        assert!(reason.contains("4096") && reason.contains("not sent"), "{reason}");
        assert!(plan.notes.iter().any(|n| n.starts_with("cita-1042:aviso-reserva:v1: ")));
    }
}
