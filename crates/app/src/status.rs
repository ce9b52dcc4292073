//! Status webhooks (Cloud API statuses, engine events) as a workflow: the
//! event is recorded raw, correlated with its intention, and core's
//! decision for it applied through the state machine — or it waits,
//! `pending`, until the dispatcher learns the message id it names. The
//! ledger stores each step's rows (`store/webhooks.rs`); the order and the
//! choices are here, so a second backend adds rows, not rules.
//!
//! Every function runs inside the caller's transaction: the insert that
//! deduplicates and the state change it causes commit together.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};

use crate::domain::channel_event::EventStatus;
use crate::domain::counter::{Counter, Parking, Source};
use crate::domain::history::HistorySignal;
use crate::domain::status::{CloudStatus, MotorEvent, Report, motor_report};
use crate::domain::webhook;
use crate::store::{
    LedgerTx, NewChannelEvent, PARKED_KEY_MESSAGE_MISMATCH, PendingStatus, Recorded, SOURCE_CLOUD, SOURCE_MOTOR,
    StatusOutcome, StoreError, Tx,
};

type Result<T> = std::result::Result<T, StoreError>;

/// The periodic sweep retries pending statuses this recent.
pub const SWEEP_WINDOW_HOURS: i64 = 72;

/// What to do with an event whose intention key and message id name two
/// different intentions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSplit {
    /// Park it with [`PARKED_KEY_MESSAGE_MISMATCH`], apply it to neither,
    /// and note it in both histories (engine events).
    Park,
    /// Correlate by message id first, as for any other status (Cloud API
    /// statuses, whose only other name is the callback data we sent).
    Correlate,
}

/// Records a status event (a Cloud status or an engine event) and applies
/// it once: the whole path for one event.
pub fn ingest_status(
    tx: &Tx<'_>,
    ev: &NewChannelEvent<'_>,
    report: &Report,
    on_split: OnSplit,
    at: DateTime<Utc>,
) -> Result<StatusOutcome> {
    // A copy is counted on the stored event, never a history row per
    // copy (a provider retrying 60 times would bury the history).
    let row = match tx.record_channel_event(ev, at)? {
        Recorded::New(row) => row,
        Recorded::Duplicate { intention_id, .. } => return Ok(StatusOutcome::Duplicate { intention_id }),
    };
    let mut names = Names::new(ev.intention_key, ev.message_id);
    if on_split == OnSplit::Park
        && let Some(parked) = park_if_split(tx, ev, row, &mut names, at)?
    {
        return Ok(parked);
    }
    match correlate_names(tx, &mut names, at)? {
        Some(id) => {
            let (moved, state) = tx.apply_report(id, report, at)?;
            tx.mark_channel_event(row, EventStatus::Applied, Some(id), at)?;
            Ok(StatusOutcome::Applied {
                intention_id: id,
                moved,
                state: state.to_string(),
            })
        }
        None => {
            tx.mark_channel_event(row, EventStatus::Pending, None, at)?;
            Ok(StatusOutcome::Pending)
        }
    }
}

/// Where the ledger found a message id.
#[derive(Clone, Copy)]
enum ByMessage {
    /// On the intention itself.
    Intention(i64),
    /// Only on one of its attempts (the intention has not learnt it).
    Attempt(i64),
}

impl ByMessage {
    fn id(self) -> i64 {
        match self {
            ByMessage::Intention(id) | ByMessage::Attempt(id) => id,
        }
    }
}

/// An event's two names for its intention (the key it carried, the
/// message id) and the ledger's answer for each, read at most once: the
/// engine path asks them to detect a split and again to correlate.
struct Names<'a> {
    key: Option<&'a str>,
    message_id: Option<&'a str>,
    by_key: Option<Option<i64>>,
    by_message: Option<Option<ByMessage>>,
}

impl<'a> Names<'a> {
    fn new(key: Option<&'a str>, message_id: Option<&'a str>) -> Self {
        Names {
            key: key.filter(|k| !k.is_empty()),
            message_id,
            by_key: None,
            by_message: None,
        }
    }

    fn by_key(&mut self, tx: &Tx<'_>) -> Result<Option<i64>> {
        if let Some(found) = self.by_key {
            return Ok(found);
        }
        let found = self.key.map(|k| tx.intention_id(k)).transpose()?.flatten();
        self.by_key = Some(found);
        Ok(found)
    }

    fn by_message(&mut self, tx: &Tx<'_>) -> Result<Option<ByMessage>> {
        if let Some(found) = self.by_message {
            return Ok(found);
        }
        let found = match self.message_id {
            None => None,
            Some(mid) => match tx.intention_of_provider_message(mid)? {
                Some(id) => Some(ByMessage::Intention(id)),
                None => tx.intention_of_attempt_message(mid)?.map(ByMessage::Attempt),
            },
        };
        self.by_message = Some(found);
        Ok(found)
    }
}

/// Finds the intention a status is about: by provider message id (on the
/// intention, then on any of its attempts), then by the key the message
/// carried. Correlating by attempt or key teaches the intention its
/// message id; a key whose intention already knows another message id is
/// evidence that a second message reached WhatsApp, noted for a person.
pub fn correlate(tx: &Tx<'_>, message_id: Option<&str>, key: Option<&str>, at: DateTime<Utc>) -> Result<Option<i64>> {
    correlate_names(tx, &mut Names::new(key, message_id), at)
}

fn correlate_names(tx: &Tx<'_>, names: &mut Names<'_>, at: DateTime<Utc>) -> Result<Option<i64>> {
    match names.by_message(tx)? {
        Some(ByMessage::Intention(id)) => return Ok(Some(id)),
        Some(ByMessage::Attempt(id)) => {
            tx.set_provider_refs(id, None, names.message_id, at)?;
            return Ok(Some(id));
        }
        None => {}
    }
    let Some(id) = names.by_key(tx)? else {
        return Ok(None);
    };
    if let Some(mid) = names.message_id {
        match tx.provider_message_id(id)? {
            Some(first) if first != mid => {
                let (evidence, note) = webhook::second_message_id(mid, &first);
                tx.webhook_note(id, HistorySignal::SecondMessageId, &evidence, Some(&note), at)?;
                tx.bump_counter(Counter::SecondMessageId, 1)?;
            }
            Some(_) => {}
            None => tx.set_provider_refs(id, None, Some(mid), at)?,
        }
    }
    Ok(Some(id))
}

/// Parks the recorded event `row` when its key and message id name two
/// different intentions (both known); `None` when they agree or either is
/// unknown.
fn park_if_split(
    tx: &Tx<'_>,
    ev: &NewChannelEvent<'_>,
    row: i64,
    names: &mut Names<'_>,
    at: DateTime<Utc>,
) -> Result<Option<StatusOutcome>> {
    let (Some(key), Some(mid)) = (names.key, names.message_id) else {
        return Ok(None);
    };
    let Some(by_key) = names.by_key(tx)? else {
        return Ok(None);
    };
    let Some(by_mid) = names.by_message(tx)?.map(ByMessage::id) else {
        return Ok(None);
    };
    if by_key == by_mid {
        return Ok(None);
    }
    tx.set_channel_event_reason(row, EventStatus::Parked, PARKED_KEY_MESSAGE_MISMATCH)?;
    if let Some(source) = Source::parse(ev.source) {
        tx.bump_counter(Counter::WebhookParked(source, Parking::KeyMessageMismatch), 1)?;
    }
    let evidence = format!("{}:{}", ev.source, ev.event_id);
    for (id, other) in [(by_key, by_mid), (by_mid, by_key)] {
        let note = webhook::parked_note(ev.event_id, other, key, mid);
        tx.webhook_note(id, HistorySignal::EventParked, &evidence, Some(&note), at)?;
    }
    Ok(Some(StatusOutcome::Parked {
        reason: PARKED_KEY_MESSAGE_MISMATCH.into(),
    }))
}

/// Applies the status webhooks that arrived before these intentions'
/// message ids were known, in received order: the dispatcher calls it in
/// the transaction that records an answer, after its own evidence.
pub fn apply_pending<L: LedgerTx + ?Sized>(tx: &L, intention_ids: &[i64], at: DateTime<Utc>) -> Result<usize> {
    // Nearly always nothing waits: one probe instead of a lookup per
    // intention.
    if intention_ids.is_empty() || !tx.any_pending_status()? {
        return Ok(0);
    }
    let mut n = 0;
    for id in intention_ids {
        n += apply_pending_for(tx, *id, at)?;
    }
    Ok(n)
}

/// Applies, in received order, the pending status events that belong to
/// one intention (by its key, its provider message id or an attempt's).
/// Returns how many were applied.
pub fn apply_pending_for<L: LedgerTx + ?Sized>(tx: &L, intention_id: i64, at: DateTime<Utc>) -> Result<usize> {
    let rows = tx.pending_statuses_for(intention_id)?;
    for p in &rows {
        if let Some(mid) = &p.message_id {
            tx.set_provider_refs(intention_id, None, Some(mid), at)?;
        }
        apply_one(tx, p, intention_id, at)?;
    }
    Ok(rows.len())
}

/// Retries correlation for pending status events received in the last
/// [`SWEEP_WINDOW_HOURS`] (newest first, up to `limit`, so old strays
/// never starve fresh ones), then applies each correlated intention's
/// pending events in received order. For a periodic sweep by `serve`; the
/// rest stay pending (and are still applied by [`apply_pending`] whenever
/// their message id is recorded).
pub fn sweep_pending(tx: &Tx<'_>, limit: u32, at: DateTime<Utc>) -> Result<usize> {
    let since = at - Duration::hours(SWEEP_WINDOW_HOURS);
    let mut intentions = BTreeSet::new();
    for p in tx.recent_pending_statuses(limit, since)? {
        if let Some(id) = correlate(tx, p.message_id.as_deref(), p.intention_key.as_deref(), at)? {
            intentions.insert(id);
        }
    }
    let mut n = 0;
    for id in intentions {
        n += apply_pending_for(tx, id, at)?;
    }
    Ok(n)
}

fn apply_one<L: LedgerTx + ?Sized>(tx: &L, p: &PendingStatus, intention_id: i64, at: DateTime<Utc>) -> Result<()> {
    match report_from_payload(&p.source, &p.payload) {
        Some(report) => {
            tx.apply_report(intention_id, &report, at)?;
            tx.mark_channel_event(p.id, EventStatus::Applied, Some(intention_id), at)
        }
        None => tx.mark_channel_event(p.id, EventStatus::Ignored, Some(intention_id), at),
    }
}

/// Re-reads a stored status payload (it was validated when received).
fn report_from_payload(source: &str, payload: &str) -> Option<Report> {
    match source {
        SOURCE_CLOUD => serde_json::from_str::<CloudStatus>(payload).ok().map(|s| s.report()),
        SOURCE_MOTOR => serde_json::from_str::<MotorEvent>(payload)
            .ok()
            .map(|e| motor_report(&e)),
        _ => None,
    }
}
