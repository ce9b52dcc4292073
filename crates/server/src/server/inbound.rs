//! Inbound customer messages (`value.messages[]`) → business facts.
//!
//! Every message opens the contact's 24-hour service window. Its text (or
//! the button tapped) is classified by the configured keywords:
//! - confirm → a booking event `appointment.confirmed` through the normal
//!   ingest path, with an event id derived from the message id, so the
//!   planner closes pending confirm reminders as `already_confirmed` and a
//!   redelivered message confirms once;
//! - opt-out → the contact's opt-out (marketing; transactional too if
//!   `inbound.opt_out_blocks_transactional`);
//! - reschedule → `reschedule_requested_at` on the commitment (the
//!   console's attention list) plus a commitment signal;
//! - anything else → a conversation signal on the commitment.
//!
//! A message with no `from` but Meta's `user_id` (in the message, or only
//! in its change's `contacts[]`) is correlated by the contact that id was
//! seen with; until one is known it is stored, not rejected (Meta does not
//! resend after our 200). A message that cannot be acted on is stored
//! `refused` by the caller ([`super::cloud`]). A `system`
//! message is not the user writing: it opens no service window. Its
//! `user_changed_number` moves the contact's upcoming appointments, and
//! the orders with a notice still planned, to the new number as a booking
//! change, so their planned messages to the old number are superseded as
//! for any phone change.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::AppState;
use super::cloud::Refused;
use crate::domain::channel_event::EventStatus;
use crate::domain::commitment::CommitmentKind;
use crate::domain::counter::{Counter, Unactionable};
use crate::domain::event::{BookingEvent, is_e164};
use crate::domain::inbound::Reply;
use crate::domain::mask::mask_phone;
use crate::domain::status::timestamp_text;
use crate::ingest::{IngestError, ingest};
use crate::store::{NewChannelEvent, Recorded, SOURCE_CLOUD, StoreError, Tx};

/// One inbound message as Meta documents it (text, template quick-reply
/// `button`, or `interactive` button / list reply). Other types are kept
/// raw and count as "other".
#[derive(Debug, Clone, Deserialize)]
pub struct InboundMessage {
    pub id: String,
    /// The sender's phone (`wa_id`); absent when Meta identifies the user
    /// by `user_id` only.
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default, alias = "from_user_id")]
    pub user_id: Option<String>,
    #[serde(default)]
    pub system: Option<SystemBody>,
    #[serde(default)]
    pub timestamp: Value,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub text: Option<TextBody>,
    #[serde(default)]
    pub button: Option<ButtonReply>,
    #[serde(default)]
    pub interactive: Option<Interactive>,
    #[serde(default)]
    pub context: Option<Context>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TextBody {
    #[serde(default)]
    pub body: String,
}

/// Quick-reply button of a template message.
#[derive(Debug, Clone, Deserialize)]
pub struct ButtonReply {
    #[serde(default)]
    pub payload: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Interactive {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub button_reply: Option<IdTitle>,
    #[serde(default)]
    pub list_reply: Option<IdTitle>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct IdTitle {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
}

/// A `system` message: `{"type": "user_changed_number", "wa_id": new, "body": …}`.
/// Older API versions name the new number `new_wa_id`, and some bodies
/// carry both: two fields, not a serde alias (an alias makes both together
/// a "duplicate field" error).
#[derive(Debug, Clone, Deserialize)]
pub struct SystemBody {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub wa_id: Option<String>,
    #[serde(default)]
    pub new_wa_id: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
}

impl SystemBody {
    /// The new number: `new_wa_id` when given (it can only mean the new
    /// number, while `wa_id` names the user in other system messages),
    /// else `wa_id`; and whether both were given and differ.
    pub fn new_number(&self) -> (Option<&str>, bool) {
        fn given(v: &Option<String>) -> Option<&str> {
            v.as_deref().map(str::trim).filter(|s| !s.is_empty())
        }
        match (given(&self.new_wa_id), given(&self.wa_id)) {
            (Some(new), Some(wa)) => (Some(new), e164(new) != e164(wa)),
            (Some(new), None) => (Some(new), false),
            (None, wa) => (wa, false),
        }
    }
}

/// The message a reply quotes (`context.id` is the wamid we sent).
#[derive(Debug, Clone, Deserialize)]
pub struct Context {
    #[serde(default)]
    pub id: Option<String>,
}

impl InboundMessage {
    /// The words to classify, most specific first: a button's payload or
    /// id (set by us, stable), then its title, then the text body.
    pub fn candidates(&self) -> Vec<&str> {
        let mut out = Vec::new();
        if let Some(b) = &self.button {
            out.extend(b.payload.as_deref());
            out.extend(b.text.as_deref());
        }
        if let Some(i) = &self.interactive {
            for r in [&i.button_reply, &i.list_reply].into_iter().flatten() {
                out.extend(r.id.as_deref());
                out.extend(r.title.as_deref());
            }
        }
        if let Some(t) = &self.text {
            out.push(t.body.as_str());
        }
        out
    }

    /// What a person would read: the text or the button's title.
    pub fn display_text(&self) -> String {
        if let Some(t) = &self.text {
            return t.body.clone();
        }
        if let Some(b) = &self.button {
            return b.text.clone().or_else(|| b.payload.clone()).unwrap_or_default();
        }
        if let Some(i) = &self.interactive
            && let Some(r) = i.button_reply.as_ref().or(i.list_reply.as_ref())
        {
            return r.title.clone().or_else(|| r.id.clone()).unwrap_or_default();
        }
        format!("[{}]", self.kind.as_deref().unwrap_or("message"))
    }

    /// Sender in E.164 (`wa_id` comes without the `+`), if given.
    pub fn phone(&self) -> Option<String> {
        self.from.as_deref().map(e164)
    }

    /// When the customer sent it, never later than `now`.
    pub fn sent_at(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        timestamp_text(&self.timestamp)
            .parse::<i64>()
            .ok()
            .and_then(|s| Utc.timestamp_opt(s, 0).single())
            .map(|t| t.min(now))
            .unwrap_or(now)
    }
}

/// A `wa_id` (digits, no `+`) in E.164.
pub fn e164(wa_id: &str) -> String {
    let digits = wa_id.trim();
    if digits.starts_with('+') {
        digits.to_string()
    } else {
        format!("+{digits}")
    }
}

/// What happened to one inbound message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum InboundOutcome {
    Applied {
        reply: &'static str,
        commitment: Option<String>,
    },
    Duplicate,
    /// Stored with no effect yet (`why`): a system notice, or a sender
    /// known only by a `user_id` we have not seen with a phone.
    Recorded {
        why: &'static str,
    },
}

/// A `contacts[]` entry (`{"wa_id": …, "user_id": …}`): remembers the
/// user id of a known contact.
pub fn learn_user_id(tx: &Tx<'_>, v: &Value, now: DateTime<Utc>) -> Result<(), StoreError> {
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    if let (Some(wa), Some(uid)) = (s("wa_id"), s("user_id")) {
        tx.remember_user_id(&e164(wa), uid, now)?;
    }
    Ok(())
}

/// Records and applies one `messages[]` object inside the caller's
/// savepoint; `contact_user_id` is the `user_id` its change's `contacts[]`
/// name, for a message that has neither `from` nor its own. `Ok(Err(why))`:
/// it cannot be acted on, nothing written (the caller keeps it `refused`).
pub fn process(
    tx: &Tx<'_>,
    state: &AppState,
    v: Value,
    contact_user_id: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Result<InboundOutcome, Refused>, StoreError> {
    let mut msg: InboundMessage = match serde_json::from_value(v.clone()) {
        Ok(m) => m,
        Err(e) => return Ok(Err((Unactionable::UnreadableMessage, format!("message object: {e}")))),
    };
    if msg.id.trim().is_empty() {
        return Ok(Err((
            Unactionable::UnreadableMessage,
            "message object: empty id".into(),
        )));
    }
    if msg.from.is_none() && msg.user_id.is_none() {
        msg.user_id = contact_user_id.map(str::to_string);
    }
    let by_user_id = match (&msg.from, msg.user_id.as_deref()) {
        (None, Some(uid)) => Some(tx.phone_by_user_id(uid)?),
        (None, None) => {
            return Ok(Err((
                Unactionable::NoSender,
                "message object: neither from nor user_id (in the message or its contacts[])".into(),
            )));
        }
        _ => None,
    };
    let phone = msg.phone().or(by_user_id.clone().flatten());
    if let Some(p) = &phone
        && !is_e164(p)
    {
        return Ok(Err((
            Unactionable::SenderNotAPhone,
            format!("message object: sender {:?} is not a phone number", msg.from),
        )));
    }
    let payload = v.to_string();
    let ev = NewChannelEvent {
        source: SOURCE_CLOUD,
        event_id: &msg.id,
        kind: "inbound",
        message_id: None,
        intention_key: None,
        payload: &payload,
    };
    let row = match tx.record_channel_event(&ev, now)? {
        Recorded::New(row) => row,
        Recorded::Duplicate { .. } => return Ok(Ok(InboundOutcome::Duplicate)),
    };
    let Some(phone) = phone else {
        // Kept, and counted, until a contacts[] entry links the user id.
        tx.mark_channel_event(row, EventStatus::Recorded, None, now)?;
        tx.bump_counter(Counter::InboundByUserIdUncorrelated, 1)?;
        return Ok(Ok(InboundOutcome::Recorded { why: "unknown_user_id" }));
    };
    let sent_at = msg.sent_at(now);
    if msg.kind.as_deref() == Some("system") {
        return system(tx, state, &msg, &phone, row, sent_at, now).map(Ok);
    }
    let contact = tx.inbound_contact(&phone, now)?;
    tx.touch_inbound(contact, sent_at, now)?;
    if let Some(uid) = msg.user_id.as_deref().filter(|u| !u.trim().is_empty()) {
        tx.remember_user_id(&phone, uid.trim(), now)?;
    }

    let reply = msg
        .candidates()
        .into_iter()
        .map(|c| state.classifier().classify(c))
        .find(|r| *r != Reply::Other)
        .unwrap_or(Reply::Other);
    let quoted = msg.context.as_ref().and_then(|c| c.id.as_deref());
    let target = tx.reply_commitment(contact, quoted, now)?;
    let facts = ReplyFacts {
        contact,
        text: &msg.display_text(),
        source_event: &format!("cloud:{}", msg.id),
        sent_at,
    };
    apply_reply(tx, state, &msg, reply, target.as_ref(), &facts, now)?;
    tx.mark_channel_event(row, EventStatus::Applied, None, now)?;
    Ok(Ok(InboundOutcome::Applied {
        reply: reply.as_str(),
        commitment: target.map(|t| t.1),
    }))
}

/// What a customer's message says, as the facts it leaves behind.
struct ReplyFacts<'a> {
    contact: i64,
    text: &'a str,
    source_event: &'a str,
    sent_at: DateTime<Utc>,
}

/// What a classified reply does to the contact and to the commitment it is
/// about (`target`: id, reference, whether it is an upcoming appointment).
fn apply_reply(
    tx: &Tx<'_>,
    state: &AppState,
    msg: &InboundMessage,
    reply: Reply,
    target: Option<&(i64, String, bool)>,
    facts: &ReplyFacts<'_>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    match reply {
        Reply::OptOut => {
            let also_transactional = state.config().inbound.opt_out_blocks_transactional;
            tx.opt_out(facts.contact, also_transactional, facts.sent_at, now)?;
            if let Some((cid, ..)) = target {
                tx.add_commitment_signal(*cid, "opt_out", Some(facts.text), facts.source_event, now)?;
            }
        }
        Reply::Reschedule => {
            if let Some((cid, ..)) = target {
                tx.request_reschedule(*cid, facts.text, facts.source_event, now)?;
            }
        }
        Reply::Confirm => match target {
            Some((cid, reference, true)) => {
                confirm(tx, state, msg, reference, facts.sent_at, now)?;
                tx.add_commitment_signal(*cid, "confirmed_by_reply", Some(facts.text), facts.source_event, now)?;
            }
            // Nothing upcoming to confirm: keep what they said for a person.
            Some((cid, ..)) => {
                tx.add_commitment_signal(*cid, "conversation", Some(facts.text), facts.source_event, now)?
            }
            None => {}
        },
        Reply::Other => {
            if let Some((cid, ..)) = target {
                tx.add_commitment_signal(*cid, "conversation", Some(facts.text), facts.source_event, now)?;
            }
        }
    }
    Ok(())
}

/// The confirmation as a booking event, so it takes exactly the path an
/// `appointment.confirmed` from the booking system takes.
fn confirm(
    tx: &Tx<'_>,
    state: &AppState,
    msg: &InboundMessage,
    reference: &str,
    sent_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let raw = json!({
        "event_id": confirmation_event_id(&msg.id),
        "type": "appointment.confirmed",
        "ref": reference,
        "occurred_at": sent_at.to_rfc3339(),
        "note": "confirmed by the customer's WhatsApp reply",
    });
    let ev = match BookingEvent::from_value(raw) {
        Ok(ev) => ev,
        Err(errors) => {
            // Our own construction failed validation: keep the message, say why.
            tracing::warn!(reference = ?reference, ?errors, "could not build the confirmation event");
            return Ok(());
        }
    };
    match tx.atomically(|tx| ingest(tx, &state.planner(), &ev, "whatsapp", now)) {
        Ok(_) => Ok(()),
        Err(IngestError::Store(e)) => Err(e),
        Err(e) => {
            tracing::warn!(reference = ?reference, error = ?e.to_string(), "confirmation reply not applied");
            Ok(())
        }
    }
}

/// A `system` message: never the user writing, so no service window. A
/// changed number moves the upcoming appointments, and the orders with a
/// notice still planned, to the new number.
fn system(
    tx: &Tx<'_>,
    state: &AppState,
    msg: &InboundMessage,
    old: &str,
    row: i64,
    sent_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<InboundOutcome, StoreError> {
    let sys = msg.system.as_ref();
    let (new, both_differ) = sys.map(SystemBody::new_number).unwrap_or((None, false));
    if both_differ {
        tracing::warn!(message = ?msg.id, "user_changed_number with wa_id and new_wa_id that differ: new_wa_id used");
    }
    let new = new.map(e164).filter(|p| is_e164(p) && p != old);
    let (Some("user_changed_number"), Some(new)) = (sys.and_then(|s| s.kind.as_deref()), new) else {
        tx.mark_channel_event(row, EventStatus::Recorded, None, now)?;
        return Ok(InboundOutcome::Recorded { why: "system" });
    };
    let Some(changed) = tx.change_number(old, &new, now)? else {
        tx.mark_channel_event(row, EventStatus::Recorded, None, now)?;
        return Ok(InboundOutcome::Recorded { why: "unknown_number" });
    };
    tx.bump_counter(Counter::NumberChanged, 1)?;
    let note = if both_differ {
        "the customer changed their WhatsApp number (wa_id and new_wa_id differed: new_wa_id used)"
    } else {
        "the customer changed their WhatsApp number"
    };
    let source_event = format!("cloud:{}", msg.id);
    let shown = format!("{} → {}", mask_phone(old), mask_phone(&new));
    for a in &changed.upcoming {
        let event_id = format!("whatsapp:{}:number:{}", msg.id, a.reference);
        let contact = json!({"phone": new, "name": changed.name});
        let raw = match a.kind {
            CommitmentKind::Appointment => json!({
                "event_id": event_id,
                "type": "appointment.scheduled",
                "ref": a.reference,
                "starts_at": a.starts_at.map(|t| t.to_rfc3339()),
                "contact": contact,
                "service": a.service,
                "location": a.location,
                "occurred_at": sent_at.to_rfc3339(),
                "note": note,
            }),
            // The order's state stays; only where its notices go moves.
            CommitmentKind::Order => json!({
                "event_id": event_id,
                "type": "order.updated",
                "ref": a.reference,
                "contact": contact,
                "occurred_at": sent_at.to_rfc3339(),
                "note": note,
            }),
        };
        match BookingEvent::from_value(raw) {
            Ok(ev) => match tx.atomically(|tx| ingest(tx, &state.planner(), &ev, "whatsapp", now)) {
                Ok(_) => {}
                Err(IngestError::Store(e)) => return Err(e),
                Err(e) => tracing::warn!(reference = ?a.reference, error = ?e.to_string(), "number change not applied"),
            },
            Err(errors) => tracing::warn!(reference = ?a.reference, ?errors, "could not build the number change"),
        }
        tx.add_commitment_signal(a.id, "number_changed", Some(&shown), &source_event, now)?;
    }
    tx.mark_channel_event(row, EventStatus::Applied, None, now)?;
    Ok(InboundOutcome::Applied {
        reply: "number_changed",
        commitment: changed.upcoming.first().map(|a| a.reference.clone()),
    })
}

/// Deterministic booking event id of a confirmation reply.
pub fn confirmation_event_id(message_id: &str) -> String {
    format!("whatsapp:{message_id}:confirm")
}
