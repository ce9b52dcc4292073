//! An intention as planned, before it is reserved in the ledger.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::fingerprint::ContentRef;
use super::key::{IntentionKey, Purpose};
pub use super::lifecycle::OperatingDay;
use crate::templates::Category;

/// Everything the ledger stores about a new intention. Built by the planner
/// or by an operator's resend; content fields are frozen once reserved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewIntention {
    pub key: IntentionKey,
    pub commitment_ref: String,
    pub commitment_version: i64,
    pub purpose: Purpose,
    pub recipient: String,
    pub category: Category,
    pub channel: String,
    pub template: String,
    pub language: String,
    pub parameters: Vec<String>,
    pub body: String,
    pub due_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// Reminders that ask the customer to confirm; they stop being
    /// pertinent once the commitment is confirmed.
    pub asks_confirmation: bool,
    pub correlation_id: String,
    /// Operating day of `due_at` (in the configured zone).
    pub day: OperatingDay,
    pub created_by: String,
    pub authorized_by: Option<String>,
    pub reason: Option<String>,
    /// The intention this one is related to (resends).
    pub related_key: Option<IntentionKey>,
}

impl NewIntention {
    pub fn content(&self) -> ContentRef<'_> {
        ContentRef {
            recipient: &self.recipient,
            template: &self.template,
            language: &self.language,
            parameters: &self.parameters,
            body: &self.body,
            expires_at: self.expires_at,
        }
    }

    pub fn fingerprint(&self) -> String {
        self.content().fingerprint()
    }
}

/// Derived from the key so that re-planning yields the same content; fixed
/// with the intention and sent on every attempt.
pub fn correlation_id(key: &IntentionKey) -> String {
    let d = Sha256::digest(key.as_str().as_bytes());
    super::fingerprint::prefixed_hex("uv-", &d[..10])
}

pub fn operating_day(t: DateTime<Utc>, tz: Tz) -> OperatingDay {
    OperatingDay::new(t.with_timezone(&tz).date_naive())
}
