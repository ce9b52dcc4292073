//! The business policy: what to send and when, and which inbound keywords
//! are business facts. Pure data with defaults and validation, no I/O, so the
//! planner and the domain can read it without depending on the configuration
//! loader (`config` re-exports these types under their old paths).

use serde::{Deserialize, Serialize};

/// What to send and when (docs/design.md, "Planner" and "Dispatch").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Send a booking notice when an appointment is scheduled.
    pub booking_notice: bool,
    /// Reminders, in minutes before the appointment.
    pub reminder_offsets_minutes: Vec<u32>,
    /// Which of those reminders ask the customer to confirm (cancelled as
    /// `already_confirmed` once the customer or staff confirmed).
    pub confirm_reminder_offsets_minutes: Vec<u32>,
    pub update_notice: bool,
    pub cancellation_notice: bool,
    /// Events older than this are history: recorded, no messages.
    pub horizon_hours: u32,
    /// Messages per recipient per operating day; more are deferred to the
    /// next day, never dropped.
    pub daily_cap_per_recipient: u32,
    /// No sends between these local times (`HH:MM`); deferred to the end.
    pub quiet_hours: Option<QuietHours>,
    /// Tries per intention before `review`.
    pub max_attempts: u32,
    /// Seconds to wait before each retry (the last one repeats).
    pub backoff_seconds: Vec<u64>,
    /// How long a claim lasts before a crashed worker's intention is
    /// considered uncertain.
    pub lease_seconds: u64,
    /// Cloud API: minutes an uncertain send waits for a status webhook
    /// before going to `review`.
    pub uncertain_review_minutes: u64,
    /// Engine: reconciliation tries for an uncertain command before `review`.
    pub max_reconcile_attempts: u32,
    /// Minutes an acknowledged message (accepted, sent, delivered) may go
    /// without news before the engine is asked for its command's state
    /// (status webhooks can be lost for good); on the Cloud API, which
    /// cannot be asked, an accepted or sent one becomes a front-desk case
    /// ("sin confirmación de entrega"). 0 asks at the next pass.
    pub status_poll_minutes: u64,
    /// Channel name in order keys (`pedido-88:enviado:v5:whatsapp`).
    pub order_channel: String,
    /// Resends a supervisor may authorize for one intention (the original
    /// and its resends together) per operating day: each one is a message
    /// the patient may get twice, so the count is a policy, not a habit.
    pub max_resends_per_day: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            booking_notice: true,
            reminder_offsets_minutes: vec![24 * 60, 2 * 60],
            confirm_reminder_offsets_minutes: vec![24 * 60],
            update_notice: true,
            cancellation_notice: true,
            horizon_hours: 72,
            daily_cap_per_recipient: 8,
            quiet_hours: Some(QuietHours {
                start: "21:00".into(),
                end: "07:00".into(),
            }),
            max_attempts: 6,
            backoff_seconds: vec![2, 10, 30, 120, 600],
            lease_seconds: 60,
            uncertain_review_minutes: 30,
            max_reconcile_attempts: 20,
            status_poll_minutes: 60,
            order_channel: "whatsapp".into(),
            max_resends_per_day: 2,
        }
    }
}

/// The longest `status_poll_minutes` accepted: a year.
pub const MAX_STATUS_POLL_MINUTES: u64 = 60 * 24 * 365;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct QuietHours {
    pub start: String,
    pub end: String,
}

impl QuietHours {
    /// `(start, end)` in minutes after local midnight.
    pub fn minutes(&self) -> Option<(u32, u32)> {
        Some((hhmm(&self.start)?, hhmm(&self.end)?))
    }
}

fn hhmm(s: &str) -> Option<u32> {
    let (h, m) = s.split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

impl Policy {
    /// Checks what serde cannot: time formats and values that would stall
    /// dispatch. The error names the field inside `[policy]`.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let invalid = |field: &'static str, message: String| Err(PolicyError { field, message });
        if let Some(q) = &self.quiet_hours
            && q.minutes().is_none()
        {
            return invalid(
                "quiet_hours",
                format!("expected HH:MM, got {:?} – {:?}", q.start, q.end),
            );
        }
        if self.max_attempts == 0 {
            return invalid("max_attempts", "must be at least 1".into());
        }
        // A longer window could not be added to a date (and asks nothing
        // a person would still wait for).
        if self.status_poll_minutes > MAX_STATUS_POLL_MINUTES {
            return invalid(
                "status_poll_minutes",
                format!(
                    "at most {MAX_STATUS_POLL_MINUTES} (a year), got {}",
                    self.status_poll_minutes
                ),
            );
        }
        if self.backoff_seconds.is_empty() {
            return invalid("backoff_seconds", "needs at least one value".into());
        }
        // Zero would refuse every resend while still offering the key; who
        // may resend is the roles' business.
        if self.max_resends_per_day == 0 {
            return invalid(
                "max_resends_per_day",
                "must be at least 1 (only supervisors may authorize resends; remove the role to forbid them)".into(),
            );
        }
        Ok(())
    }
}

/// A policy value serde accepted but the rules cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy.{field}: {message}")]
pub struct PolicyError {
    /// The field inside `[policy]`, e.g. `max_attempts`.
    pub field: &'static str,
    pub message: String,
}

/// Keywords in inbound messages that are business facts.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InboundConfig {
    pub confirm: Vec<String>,
    pub opt_out: Vec<String>,
    pub reschedule: Vec<String>,
    /// Whether an opt-out reply also stops transactional messages
    /// (appointment reminders, order notices). Marketing always stops.
    pub opt_out_blocks_transactional: bool,
}

impl Default for InboundConfig {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect();
        InboundConfig {
            confirm: v(&["1", "SI", "SÍ", "CONFIRMO"]),
            opt_out: v(&["BAJA", "STOP"]),
            reschedule: v(&["REPROGRAMAR"]),
            opt_out_blocks_transactional: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_poll_window_is_bounded() {
        let mut p = Policy::default();
        assert_eq!(p.status_poll_minutes, 60);
        p.status_poll_minutes = 0;
        assert!(p.validate().is_ok());
        p.status_poll_minutes = MAX_STATUS_POLL_MINUTES;
        assert!(p.validate().is_ok());
        p.status_poll_minutes = u64::MAX;
        let e = p.validate().unwrap_err();
        assert_eq!(e.field, "status_poll_minutes");
    }
}
