//! The ledger's named counters: what is counted rather than kept row by
//! row (duplicates blocked, rejections, notices acted on).
//!
//! Each counter is a typed value; its stored name (`duplicate_keys`,
//! `webhook_rejected:cloud:signature`…) is derived here and parsed back
//! here, so the writers, `/metrics` and the console cannot disagree on a
//! spelling.

use std::fmt;

/// Where a request or event came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The WhatsApp engine's webhooks.
    Motor,
    /// Meta's WhatsApp Cloud API webhooks.
    Cloud,
    /// The booking system's events.
    Bookings,
    /// Any other path (a request refused before routing).
    Other,
}

impl Source {
    pub const ALL: [Source; 4] = [Self::Motor, Self::Cloud, Self::Bookings, Self::Other];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Motor => "motor",
            Self::Cloud => "cloud",
            Self::Bookings => "bookings",
            Self::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a request or event was refused before it could apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rejection {
    TooLarge,
    Busy,
    Unreadable,
    SlowBody,
    NotConfigured,
    Signature,
    Token,
    VerifyToken,
    Malformed,
    InvalidEvent,
    MalformedEvent,
    /// An engine event of another engine instance.
    ForeignInstance,
}

impl Rejection {
    pub const ALL: [Rejection; 12] = [
        Self::TooLarge,
        Self::Busy,
        Self::Unreadable,
        Self::SlowBody,
        Self::NotConfigured,
        Self::Signature,
        Self::Token,
        Self::VerifyToken,
        Self::Malformed,
        Self::InvalidEvent,
        Self::MalformedEvent,
        Self::ForeignInstance,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::TooLarge => "too_large",
            Self::Busy => "busy",
            Self::Unreadable => "unreadable",
            Self::SlowBody => "slow_body",
            Self::NotConfigured => "not_configured",
            Self::Signature => "signature",
            Self::Token => "token",
            Self::VerifyToken => "verify_token",
            Self::Malformed => "malformed",
            Self::InvalidEvent => "invalid_event",
            Self::MalformedEvent => "malformed_event",
            Self::ForeignInstance => "foreign_instance",
        }
    }
}

/// Why an event was parked for a technician instead of applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Parking {
    /// Its idempotency key and its provider message id name two
    /// different intentions.
    KeyMessageMismatch,
    /// An engine event whose `estado` the engine contract does not name:
    /// what happened to the message cannot be read from it.
    UnknownState,
}

impl Parking {
    pub const ALL: [Parking; 2] = [Self::KeyMessageMismatch, Self::UnknownState];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::KeyMessageMismatch => "key_message_mismatch",
            Self::UnknownState => "unknown_state",
        }
    }
}

/// Why a webhook event was stored `refused`: it cannot be acted on, so it
/// is kept raw, applied to nothing, and listed for a technician.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unactionable {
    /// A `messages[]` object that is not a message (no id, wrong types).
    UnreadableMessage,
    /// A `statuses[]` object that cannot be read (no id or status, a
    /// timestamp that is no time).
    UnreadableStatus,
    /// A sender that is no phone number (`<WHATSAPP_USER_PHONE_NUMBER>`,
    /// `PHONE_NUMBER`: a documentation example's placeholder).
    SenderNotAPhone,
    /// Neither `from` nor a `user_id`, in the message or its `contacts[]`.
    NoSender,
}

impl Unactionable {
    pub const ALL: [Unactionable; 4] = [
        Self::UnreadableMessage,
        Self::UnreadableStatus,
        Self::SenderNotAPhone,
        Self::NoSender,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UnreadableMessage => "unreadable_message",
            Self::UnreadableStatus => "unreadable_status",
            Self::SenderNotAPhone => "sender_not_a_phone",
            Self::NoSender => "no_sender",
        }
    }
}

/// One named counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// A reservation found its key already taken (same content).
    DuplicateKeys,
    /// A booking event or webhook event received again.
    DuplicateEvents,
    /// A webhook event of one source received again.
    DuplicateEventsFrom(Source),
    /// A status naming a second provider message id for one intention.
    SecondMessageId,
    /// A booking event refused (conflict, invalid) and kept.
    RefusedEvents,
    /// A template WhatsApp rejected, paused or disabled.
    TemplateBlocked,
    MarketingStop,
    MarketingResume,
    /// A message known only by `user_id` that matched no contact yet.
    InboundByUserIdUncorrelated,
    /// A customer's WhatsApp number changed.
    NumberChanged,
    WebhookRejected(Source, Rejection),
    WebhookParked(Source, Parking),
}

impl Counter {
    const PLAIN: [Counter; 8] = [
        Self::DuplicateKeys,
        Self::DuplicateEvents,
        Self::SecondMessageId,
        Self::RefusedEvents,
        Self::TemplateBlocked,
        Self::MarketingStop,
        Self::MarketingResume,
        Self::InboundByUserIdUncorrelated,
    ];

    /// The stored name.
    pub fn name(self) -> String {
        match self {
            Self::DuplicateKeys => "duplicate_keys".into(),
            Self::DuplicateEvents => "duplicate_events".into(),
            Self::DuplicateEventsFrom(s) => format!("duplicate_events_{}", s.as_str()),
            Self::SecondMessageId => "second_message_id".into(),
            Self::RefusedEvents => "refused_events".into(),
            Self::TemplateBlocked => "template_blocked".into(),
            Self::MarketingStop => "marketing_stop".into(),
            Self::MarketingResume => "marketing_resume".into(),
            Self::InboundByUserIdUncorrelated => "inbound_by_user_id_uncorrelated".into(),
            Self::NumberChanged => "number_changed".into(),
            Self::WebhookRejected(s, r) => format!("webhook_rejected:{}:{}", s.as_str(), r.as_str()),
            Self::WebhookParked(s, p) => format!("webhook_parked:{}:{}", s.as_str(), p.as_str()),
        }
    }

    /// Every counter there is (for `/metrics` and the tests).
    pub fn all() -> Vec<Counter> {
        let mut all: Vec<Counter> = Self::PLAIN.into_iter().chain([Self::NumberChanged]).collect();
        for s in Source::ALL {
            all.push(Self::DuplicateEventsFrom(s));
            all.extend(Rejection::ALL.into_iter().map(|r| Self::WebhookRejected(s, r)));
            all.extend(Parking::ALL.into_iter().map(|p| Self::WebhookParked(s, p)));
        }
        all
    }

    /// The counter a stored name is, if any (names from older versions or
    /// other tools are left alone). Read by its structure, not by spelling
    /// out every name: `/metrics` parses each stored counter on a scrape.
    pub fn parse(name: &str) -> Option<Counter> {
        let three = |prefix: &str| {
            let (source, reason) = name.strip_prefix(prefix)?.split_once(':')?;
            Some((Source::parse(source)?, reason))
        };
        if let Some((source, reason)) = three("webhook_rejected:") {
            let r = Rejection::ALL.into_iter().find(|r| r.as_str() == reason)?;
            return Some(Self::WebhookRejected(source, r));
        }
        if let Some((source, reason)) = three("webhook_parked:") {
            let p = Parking::ALL.into_iter().find(|p| p.as_str() == reason)?;
            return Some(Self::WebhookParked(source, p));
        }
        if let Some(source) = name.strip_prefix("duplicate_events_").and_then(Source::parse) {
            return Some(Self::DuplicateEventsFrom(source));
        }
        Self::PLAIN
            .into_iter()
            .chain([Self::NumberChanged])
            .find(|c| c.name() == name)
    }
}

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_counter_has_its_own_name_and_reads_back_as_itself() {
        let all = Counter::all();
        let names: HashSet<String> = all.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), all.len(), "two counters share a name");
        for c in all {
            assert_eq!(Counter::parse(&c.name()), Some(c));
        }
        assert_eq!(
            Counter::WebhookRejected(Source::Cloud, Rejection::Signature).name(),
            "webhook_rejected:cloud:signature"
        );
        assert_eq!(Counter::parse("webhook_rejected:cloud:nonsense"), None);
    }
}
