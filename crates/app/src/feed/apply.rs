//! One poll's body into the ledger, in one transaction: the events
//! through `unavez import`'s path for `.ics` (same parsing, versions,
//! conflicts and per-event errors), then what vanished (`domain::feed`):
//! cancelled, or held for a person; then the new baseline and the feed's
//! status row.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::{FeedConfig, ImportConfig};
use crate::domain::event::{BookingEvent, EventType};
use crate::domain::feed::{self, BodyShape, Disappearance, Limits, Seen, Untrusted};
use crate::import::{Batch, ImportError, ImportReport, Row, ingest_rows, parse_feed, ref_of_uid};
use crate::ingest::{IngestError, ingest_each};
use crate::planner::Planner;
use crate::store::{FeedSuccess, Store, StoreError, Tx};

/// The reason a vanished event's commitment is cancelled with.
pub const VANISHED_REASON: &str = "desapareció del calendario";

#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error("{0}")]
    Config(String),
}

/// What a poll did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum PollOutcome {
    /// 304: nothing written but the status row.
    Unchanged,
    /// Nothing applied, nothing cancelled: why.
    Untrusted {
        reason: String,
    },
    /// Another `serve` took the feed's lease while this one fetched:
    /// nothing written, the holder applies its own poll.
    LeaseLost,
    Applied(PollReport),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PollReport {
    /// `VEVENT`s in the body.
    pub vevents: usize,
    /// Events that changed a commitment.
    pub applied: usize,
    /// Events refused (per-event errors: the rest applied).
    pub refused: usize,
    /// Commitment refs cancelled because their event vanished.
    pub cancelled: Vec<String>,
    /// Refs held for a person (a mass disappearance).
    pub held: Vec<String>,
    /// How many upcoming events the held ones were out of.
    pub held_of: usize,
    /// Held refs back in the feed: released.
    pub released: Vec<String>,
    /// Refs this feed had cancelled as vanished, back in the feed: live
    /// again as their next version.
    pub revived: Vec<String>,
}

/// What applying a body needs besides the store.
pub struct FeedEnv<'a> {
    pub feed: &'a FeedConfig,
    pub planner: &'a Planner<'a>,
    pub calendar: &'a ImportConfig,
    /// The poller's lease, renewed in the body's own transaction (and the
    /// body dropped if it was lost): `(owner, origin, until)`.
    pub lease: Option<(&'a str, &'a str, DateTime<Utc>)>,
}

impl FeedEnv<'_> {
    fn limits(&self) -> Limits {
        Limits {
            window: Duration::days(i64::from(self.feed.window_days)),
            mass_pct: self.feed.mass_disappearance_pct,
            mass_max: self.feed.mass_disappearance_max,
        }
    }

    /// How the feed is named where a file would be (errors, notes).
    fn file(&self) -> String {
        format!("feed {}", self.feed.name)
    }

    fn source(&self) -> String {
        format!("feed:{}", self.feed.name)
    }
}

/// Records a poll that failed or cannot be trusted; nothing else changes.
pub fn record_failure(store: &mut Store, name: &str, reason: &str, now: DateTime<Utc>) -> Result<(), FeedError> {
    store.write(|tx| tx.feed_failure(name, reason, now))?;
    Ok(())
}

/// Applies a 2xx body (see the module).
pub fn apply_body(
    store: &mut Store,
    env: &FeedEnv<'_>,
    body: &[u8],
    validators: (Option<&str>, Option<&str>),
    now: DateTime<Utc>,
) -> Result<PollOutcome, FeedError> {
    let name = env.feed.name.as_str();
    let parsed = match parse_feed(body, &env.file(), env.planner.tz, env.calendar, now) {
        Ok(p) => p,
        Err(e) => {
            let reason = format!("unparsable body: {}", e.reason);
            record_failure(store, name, &reason, now)?;
            return Ok(PollOutcome::Untrusted { reason });
        }
    };
    let shape = BodyShape {
        bytes: body.iter().filter(|b| !b.is_ascii_whitespace()).count(),
        has_vcalendar: parsed.has_vcalendar,
        vevents: parsed.vevents,
    };
    if let Err(why) = feed::trust(shape) {
        let reason = untrusted_reason(&why);
        record_failure(store, name, &reason, now)?;
        return Ok(PollOutcome::Untrusted { reason });
    }
    let rows = parsed.parsed.rows;
    let uid_of = uid_index(&parsed.uids);
    let file = env.file();
    let source = env.source();
    let encoding = parsed.parsed.encoding;
    let refused_at_parse = parsed.parsed.errors.len();
    store.write(|tx| {
        if let Some((owner, origin, until)) = env.lease
            && !tx.feed_lease(name, origin, owner, until, now)?
        {
            return Ok(PollOutcome::LeaseLost);
        }
        let mut report = ImportReport::default();
        let batch = Batch {
            rows: &rows,
            file: &file,
            source: &source,
            skip_invalid: true,
            encoding,
        };
        let (late, applied) = ingest_rows(tx, env.planner, &batch, now, &mut report, &mut |_, _| {})?;
        let imported = imported_seen(&rows, &applied, &uid_of);
        let revived = revive_returned(tx, env.planner, name, &rows, &applied, now)?;
        let previous = tx.feed_seen(name)?;
        let held = tx.feed_held(name)?;
        let j = feed::judge(&previous, &parsed.uids, &imported, &held, now, &env.limits());
        let mut out = PollReport {
            vevents: parsed.vevents,
            refused: refused_at_parse + late.len(),
            ..Default::default()
        };
        match &j.disappearance {
            Disappearance::None => {}
            Disappearance::Cancel { gone } => {
                out.cancelled = cancel_vanished(tx, env.planner, name, gone, now)?;
            }
            Disappearance::Hold { gone, upcoming } => {
                tx.feed_hold(name, gone, now)?;
                out.held = gone.iter().map(|s| s.reference.clone()).collect();
                out.held_of = *upcoming;
            }
        }
        let returned: Vec<&str> = j.returned.iter().map(|s| s.reference.as_str()).collect();
        tx.feed_unhold(name, &returned)?;
        out.released = returned.iter().map(|s| s.to_string()).collect();
        tx.feed_replace_seen(name, &j.baseline)?;
        out.revived = revived;
        out.applied = report.stored + out.cancelled.len() + out.revived.len();
        let success = FeedSuccess {
            etag: validators.0,
            last_modified: validators.1,
            events_seen: i64::try_from(out.vevents).unwrap_or(i64::MAX),
            events_applied: i64::try_from(out.applied).unwrap_or(i64::MAX),
        };
        tx.feed_success(name, &success, now)?;
        Ok::<_, FeedError>(PollOutcome::Applied(out))
    })
}

fn untrusted_reason(why: &Untrusted) -> String {
    format!("{why}: nothing cancelled")
}

/// Each `UID`'s ref, back to the `UID`.
fn uid_index(uids: &std::collections::BTreeSet<String>) -> HashMap<String, String> {
    uids.iter().map(|u| (ref_of_uid(u), u.clone())).collect()
}

/// The `UID` a row came from: its ref, or for an occurrence of a series
/// the ref before its `/START` suffix.
fn uid_for(reference: &str, index: &HashMap<String, String>) -> Option<String> {
    if let Some(u) = index.get(reference) {
        return Some(u.clone());
    }
    let (base, _) = reference.rsplit_once('/')?;
    index.get(base).cloned()
}

/// The rows that applied as live appointments, as the baseline keeps them.
fn imported_seen(rows: &[Row], applied: &[bool], index: &HashMap<String, String>) -> Vec<Seen> {
    rows.iter()
        .zip(applied)
        .filter(|(_, ok)| **ok)
        .filter(|(r, _)| r.event.kind != EventType::AppointmentCancelled)
        .filter_map(|(r, _)| {
            Some(Seen {
                reference: r.event.reference.clone(),
                uid: uid_for(&r.event.reference, index)?,
                starts_at: r.event.starts_at?.with_timezone(&Utc),
            })
        })
        .collect()
}

/// Cancels the commitments of vanished events the usual way: an
/// `appointment.cancelled` event, so the planner closes what is stale and
/// plans the cancellation notice as policy says. Returns the refs whose
/// commitment changed; one that cannot be cancelled (unknown, already
/// cancelled) is left as it is.
pub(crate) fn cancel_vanished(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    feed: &str,
    gone: &[Seen],
    now: DateTime<Utc>,
) -> Result<Vec<String>, StoreError> {
    let events: Vec<BookingEvent> = gone.iter().map(|s| vanished_event(feed, &s.reference, now)).collect();
    let refs: Vec<&BookingEvent> = events.iter().collect();
    let mut cancelled = Vec::new();
    for (s, r) in gone
        .iter()
        .zip(ingest_each(tx, planner, &refs, &format!("feed:{feed}"), now))
    {
        match r {
            Ok(crate::ingest::Outcome::Stored {
                effect: crate::store::EventEffect::Applied,
                ..
            }) => cancelled.push(s.reference.clone()),
            Ok(_) => {}
            Err(IngestError::Store(e)) => return Err(e),
            Err(e) => tracing::warn!(
                "feed {feed}: {} vanished but could not be cancelled: {}",
                crate::domain::text::inert(&s.reference),
                e.reason()
            ),
        }
    }
    Ok(cancelled)
}

/// Rows whose commitment this feed cancelled as vanished and that are
/// back (`domain::feed::revives`): their event id is the one that first
/// imported them (a duplicate now), so each is applied again under an id
/// of its own for this return, which makes it the commitment's next
/// version. Returns the refs revived.
fn revive_returned(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    feed: &str,
    rows: &[Row],
    applied: &[bool],
    now: DateTime<Utc>,
) -> Result<Vec<String>, StoreError> {
    let live: Vec<&Row> = rows
        .iter()
        .zip(applied)
        .filter(|(r, ok)| **ok && r.event.kind != EventType::AppointmentCancelled)
        .map(|(r, _)| r)
        .collect();
    let refs: Vec<&str> = live.iter().map(|r| r.event.reference.as_str()).collect();
    let stored = tx.commitments_by_ref(&refs)?;
    let mut again = Vec::new();
    for r in live {
        let Some(c) = stored.get(&r.event.reference) else {
            continue;
        };
        let cancelled = c.commitment.status == crate::domain::lifecycle::CommitmentStatus::Cancelled;
        if !cancelled {
            continue;
        }
        let last = tx.commitment_events(&r.event.reference)?.pop().map(|e| e.0);
        if feed::revives(true, cancelled, last.as_deref(), feed) {
            let mut ev = r.event.clone();
            ev.event_id = format!("{}:back:v{}", ev.event_id, c.commitment.version);
            // The ids of occurrences and SEQUENCE-less events name their
            // content; a return is a new fact, of the next version.
            ev.version = None;
            ev.raw = None;
            again.push(ev);
        }
    }
    let events: Vec<&BookingEvent> = again.iter().collect();
    let mut revived = Vec::new();
    for (ev, r) in again
        .iter()
        .zip(ingest_each(tx, planner, &events, &format!("feed:{feed}"), now))
    {
        match r {
            Ok(_) => revived.push(ev.reference.clone()),
            Err(IngestError::Store(e)) => return Err(e),
            Err(e) => tracing::warn!(
                "feed {feed}: {} is back but could not be applied: {}",
                crate::domain::text::inert(&ev.reference),
                e.reason()
            ),
        }
    }
    Ok(revived)
}

fn vanished_event(feed: &str, reference: &str, now: DateTime<Utc>) -> BookingEvent {
    let digest = Sha256::digest(format!("{feed}\n{reference}").as_bytes());
    BookingEvent {
        // One vanishing is one fact: the feed, the ref and when.
        event_id: format!(
            "{}{}:{}",
            feed::vanished_prefix(feed),
            &hex::encode(digest)[..16],
            now.timestamp_millis()
        ),
        kind: EventType::AppointmentCancelled,
        reference: reference.to_string(),
        starts_at: None,
        version: None,
        contact: None,
        service: None,
        location: None,
        occurred_at: Some(now.fixed_offset()),
        operator: None,
        note: Some(VANISHED_REASON.to_string()),
        raw: None,
    }
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod store_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_occurrence_is_traced_to_its_uid() {
        let uids = ["serie@x".to_string(), "cita-1".to_string()].into_iter().collect();
        let idx = uid_index(&uids);
        assert_eq!(uid_for("cita-1", &idx).as_deref(), Some("cita-1"));
        let series_ref = ref_of_uid("serie@x");
        assert_eq!(
            uid_for(&format!("{series_ref}/2027-01-12T1430Z"), &idx).as_deref(),
            Some("serie@x")
        );
        assert_eq!(uid_for("other", &idx), None);
    }

    #[test]
    fn a_vanishing_event_id_is_short_and_names_no_patient() {
        let ev = vanished_event(&"f".repeat(64), &"r".repeat(120), Utc::now());
        assert!(
            ev.event_id.len() < crate::domain::event::MAX_EVENT_ID_CHARS,
            "{}",
            ev.event_id
        );
        assert_eq!(ev.note.as_deref(), Some(VANISHED_REASON));
    }
}
