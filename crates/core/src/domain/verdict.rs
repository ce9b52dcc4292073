//! The verdict: what happened to one message, for the person it was for,
//! as a typed sentence the console renders in its language (Detalle's
//! first line, the patient card's line per message).
//!
//! Pure: it reads the intention's state and closing reason, the strongest
//! evidence the channel gave (and when), and the commitment's facts. It
//! never reads engine words (`no_salio`, HTTP lines): those stay in the
//! technical view, so a receptionist reads "no le llegó: el canal
//! confirmó que no salió", not the channel's vocabulary.

use chrono::{DateTime, Utc};

use super::commitment::{Commitment, CommitmentKind};
use super::key::Purpose;
use super::state::{CancelReason, IntentionState, ReviewReason};

/// Which message the verdict speaks of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    Booking,
    Reminder,
    Update,
    Cancellation,
    Order,
}

impl Notice {
    pub const ALL: [Notice; 5] = [
        Notice::Booking,
        Notice::Reminder,
        Notice::Update,
        Notice::Cancellation,
        Notice::Order,
    ];

    pub fn of(purpose: &Purpose) -> Notice {
        match purpose {
            Purpose::Booking => Notice::Booking,
            Purpose::Reminder { .. } => Notice::Reminder,
            Purpose::Update => Notice::Update,
            Purpose::Cancellation => Notice::Cancellation,
            Purpose::Order { .. } => Notice::Order,
        }
    }
}

/// Why a message waits for a person (`review`), in the words a verdict
/// needs; anything else the ledger noted is [`ReviewWhy::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewWhy {
    /// WhatsApp rejected, paused or disabled the template.
    TemplateBlocked,
    /// The commitment changed while nobody knew whether it went out.
    ChangedWhileUncertain,
    /// It stopped being pertinent while nobody knew whether it went out.
    InvalidWhileUncertain,
    Other,
}

impl ReviewWhy {
    pub const ALL: [ReviewWhy; 4] = [
        ReviewWhy::TemplateBlocked,
        ReviewWhy::ChangedWhileUncertain,
        ReviewWhy::InvalidWhileUncertain,
        ReviewWhy::Other,
    ];

    /// Reads the stored `state_reason` of a message in review.
    pub fn parse(reason: Option<&str>) -> ReviewWhy {
        match reason {
            Some("template_blocked") => ReviewWhy::TemplateBlocked,
            Some(r) if r == ReviewReason::ChangedWhileUncertain.as_str() => ReviewWhy::ChangedWhileUncertain,
            Some(r) if r == ReviewReason::InvalidWhileUncertain.as_str() => ReviewWhy::InvalidWhileUncertain,
            _ => ReviewWhy::Other,
        }
    }
}

/// What happened to the message: one per state, with the distinction a
/// person needs (a failure the channel confirmed before anything left is
/// not a failure to deliver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Planned: goes out at its due time.
    Scheduled,
    /// Being handed to the channel right now.
    Sending,
    /// Nobody knows yet whether it went out.
    Unknown,
    /// The channel took it; no delivery yet.
    WithChannel,
    Delivered,
    Read,
    /// Failed before the channel ever took it: the channel confirmed
    /// nothing went out.
    NeverLeft,
    /// The channel took it but could not deliver it.
    Undelivered,
    /// Held for a person.
    Review(ReviewWhy),
    /// Closed without sending; `None` when no reason was recorded.
    NotSent(Option<CancelReason>),
}

/// The commitment as the verdict's tail says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum About {
    /// An appointment: when, what, where; whether it is cancelled or the
    /// patient confirmed it.
    Appointment {
        starts_at: Option<DateTime<Utc>>,
        service: Option<String>,
        location: Option<String>,
        cancelled: bool,
        confirmed: bool,
    },
    /// An order and its last notified state.
    Order { reference: String, state: String },
}

impl About {
    pub fn of(c: &Commitment) -> About {
        match c.kind {
            CommitmentKind::Appointment => About::Appointment {
                starts_at: c.starts_at,
                service: c.service.clone(),
                location: c.location.clone(),
                cancelled: c.is_cancelled(),
                confirmed: c.confirmed_at.is_some(),
            },
            CommitmentKind::Order => About::Order {
                reference: c.reference.clone(),
                state: c.status.as_str().to_string(),
            },
        }
    }
}

/// What the verdict is built from.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub state: IntentionState,
    /// The stored `state_reason` (a cancel reason, a review reason, a note).
    pub state_reason: Option<&'a str>,
    pub purpose: Purpose,
    /// When the current state was reached: the time of the strongest
    /// evidence for a message the channel took.
    pub state_changed_at: DateTime<Utc>,
    pub due_at: DateTime<Utc>,
    /// Whether the channel ever took the message (accepted, sent,
    /// delivered or read appear in its history).
    pub channel_took_it: bool,
    /// The commitment, when it is known.
    pub commitment: Option<&'a Commitment>,
}

/// One message's verdict: which message, what happened, when (the
/// evidence's time, or the due time of a planned message), and about what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub notice: Notice,
    pub outcome: Outcome,
    pub at: Option<DateTime<Utc>>,
    pub about: Option<About>,
}

impl Verdict {
    /// "paciente" or "cliente": an order's person is a customer.
    pub fn is_order(&self) -> bool {
        self.notice == Notice::Order || matches!(self.about, Some(About::Order { .. }))
    }
}

/// Whether the channel ever took the message toward the phone, from its
/// history rows' `(to_state, signal)`: sent, delivered or read, or a
/// Cloud API `failed` (which reports a delivery that failed after the API
/// accepted the message). The engine's `en_cola` (accepted) is only a
/// queue: an engine `fallido` after it still means nothing went out.
pub fn channel_took_it<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
    let left = |s: &str| {
        matches!(
            s,
            "sent" | "delivered" | "read" | "webhook:sent" | "webhook:delivered" | "webhook:read" | "webhook:failed"
        ) || matches!(s, "webhook:enviado" | "webhook:entregado" | "webhook:leido")
    };
    rows.into_iter()
        .any(|(to_state, signal)| left(to_state) || left(signal))
}

/// The verdict of one message.
pub fn verdict(f: &Facts<'_>) -> Verdict {
    use IntentionState as S;
    let evidence_at = Some(f.state_changed_at);
    let (outcome, at) = match f.state {
        S::Planned => (Outcome::Scheduled, Some(f.due_at)),
        S::Dispatching => (Outcome::Sending, None),
        S::Uncertain => (Outcome::Unknown, None),
        S::Accepted | S::Sent => (Outcome::WithChannel, evidence_at),
        S::Delivered => (Outcome::Delivered, evidence_at),
        S::Read => (Outcome::Read, evidence_at),
        S::Failed if f.channel_took_it => (Outcome::Undelivered, evidence_at),
        S::Failed => (Outcome::NeverLeft, evidence_at),
        S::Review => (Outcome::Review(ReviewWhy::parse(f.state_reason)), None),
        S::Cancelled => (
            Outcome::NotSent(f.state_reason.and_then(CancelReason::parse)),
            evidence_at,
        ),
    };
    Verdict {
        notice: Notice::of(&f.purpose),
        outcome,
        at,
        about: f.commitment.map(About::of),
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
