//! A group of booking events applied set-based: events that touch
//! distinct commitments (and distinct event ids) are read with one query
//! each for their log rows and commitments, decided one by one in event
//! order, then written with a few multi-row statements — the event log,
//! the contacts, the commitments, the reservations and their history.
//!
//! Why groups: an event per statement cost an import most of its time in
//! statement overhead, and every statement with a journal of its own made
//! SQLite's search index flush its pending rows (one tiny segment per
//! event, merged again and again). Why these boundaries: within a group no
//! event reads what another one writes. A second event for the same
//! commitment (or the same event id) starts a new group, so it reads the
//! first one's commitment and reservations; so does an event whose stored
//! commitment belongs to a contact an earlier event of the group renames
//! (the commitment as read includes the contact's name and language).
//! Applied one by one or in groups, the ledger ends the same.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::{EventConflict, IngestError, Outcome, logged_payload, repeated};
use crate::domain::commitment::{Change, Commitment, Effect, apply as apply_event};
use crate::domain::counter::Counter;
use crate::domain::event::{BookingEvent, ConflictKind};
use crate::domain::history::{self, HistorySignal, Said};
use crate::domain::intention::NewIntention;
use crate::domain::state::{IntentionState, Signal};
use crate::planner::Planner;
use crate::planning::Want;
use crate::store::{Cause, CommitmentRow, EventEffect, NewContact, NewEvent, Reserved, StoreError, Tx};

/// Events read and written together at most.
const GROUP: usize = 512;

/// Applies the longest prefix of `events` that forms a group (at least
/// one event), appending one outcome per event; returns how many it
/// applied. On `Err` the caller must roll back what it wrote.
pub(super) fn apply(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    events: &[&BookingEvent],
    source: &str,
    now: DateTime<Utc>,
    outcomes: &mut Vec<Outcome>,
) -> Result<usize, IngestError> {
    let candidates = distinct_prefix(events);
    let ids: Vec<&str> = candidates.iter().map(|e| e.event_id.as_str()).collect();
    let refs: Vec<&str> = candidates.iter().map(|e| e.reference.as_str()).collect();
    // Before anything is read: an operator action on one of these cases
    // (which locks the same rows) then runs wholly before this group or
    // wholly after it, never on what this group is about to change.
    tx.lock_commitments(&refs)?;
    let mut logged = tx.logged_events(&ids)?;
    let mut stored = tx.commitments_by_ref(&refs)?;
    let mut group = Group {
        source,
        entries: Vec::with_capacity(candidates.len()),
        contacts: Vec::new(),
        phones: HashMap::new(),
    };
    for ev in candidates {
        let current = stored.remove(&ev.reference);
        if group.renames_contact_of(current.as_ref()) {
            break;
        }
        match logged.remove(&ev.event_id) {
            Some(seen) => {
                let value = serde_json::to_value(ev).map_err(|e| IngestError::Rejected(e.to_string()))?;
                let outcome = repeated(tx, ev, &value, seen)?;
                group.entries.push(Entry::Done(outcome));
            }
            None => group.stage(ev, current.as_ref(), now)?,
        }
    }
    let applied = group.entries.len();
    match group.write(tx, now)? {
        Written::Duplicate(outcome) => outcomes.push(outcome),
        Written::Saved(saved) => outcomes.extend(group.realize(tx, planner, &saved, now)?),
    }
    Ok(applied)
}

/// The longest prefix of at most [`GROUP`] events with distinct
/// references and distinct event ids.
fn distinct_prefix<'a, 'e>(events: &'a [&'e BookingEvent]) -> &'a [&'e BookingEvent] {
    let mut refs = HashSet::new();
    let mut ids = HashSet::new();
    let n = events
        .iter()
        .take(GROUP)
        .take_while(|ev| refs.insert(ev.reference.as_str()) && ids.insert(ev.event_id.as_str()))
        .count();
    &events[..n.max(1)]
}

/// One event of a group, in event order.
enum Entry<'e> {
    /// Its id was already logged with the same content.
    Done(Outcome),
    Staged(Staged<'e>),
}

/// An event decided and waiting to be written.
struct Staged<'e> {
    ev: &'e BookingEvent,
    payload: String,
    effect: EventEffect,
    before: Option<i64>,
    after_version: Option<i64>,
    what: What,
}

enum What {
    /// Older than the stored version: logged only.
    Stale { current_version: i64 },
    /// The commitment after the event; `fresh` when this event creates it
    /// (nothing of it is planned yet).
    Applied {
        after: Box<Commitment>,
        kind: Change,
        fresh: bool,
    },
}

/// The events of a group and the contacts they write.
struct Group<'e> {
    source: &'e str,
    entries: Vec<Entry<'e>>,
    /// Phones the applied events write, in first-seen order, with the
    /// name and language the last of them leaves.
    contacts: Vec<(String, Option<String>, Option<String>)>,
    phones: HashMap<String, usize>,
}

impl<'e> Group<'e> {
    /// Whether an earlier event of the group writes the contact that the
    /// stored commitment reads its name and language from.
    fn renames_contact_of(&self, current: Option<&CommitmentRow>) -> bool {
        current
            .and_then(|c| c.commitment.phone.as_deref())
            .is_some_and(|phone| self.phones.contains_key(phone))
    }

    /// Decides one event against the stored commitment (a conflict or a
    /// rejection is the group's error: nothing of it is written).
    fn stage(
        &mut self,
        ev: &'e BookingEvent,
        current: Option<&CommitmentRow>,
        now: DateTime<Utc>,
    ) -> Result<(), IngestError> {
        let payload = logged_payload(ev)?;
        let before = current.map(|c| c.commitment.version);
        let (effect, after_version, what) = match apply_event(current.map(|c| &c.commitment), ev, now) {
            Effect::Conflict { version, fields } => {
                return Err(IngestError::Conflict(Box::new(EventConflict {
                    event_id: ev.event_id.clone(),
                    reference: ev.reference.clone(),
                    kind: ConflictKind::SameVersion,
                    version,
                    fields: fields.iter().map(|f| f.to_string()).collect(),
                })));
            }
            Effect::Rejected { reason } => return Err(IngestError::Rejected(reason)),
            Effect::Stale { current_version } => (EventEffect::Stale, before, What::Stale { current_version }),
            Effect::Applied { after, kind, .. } => {
                let effect = match kind {
                    Change::NoChange => EventEffect::NoChange,
                    _ => EventEffect::Applied,
                };
                if let Some(phone) = &after.phone {
                    self.keep_contact(phone, after.name.as_deref(), after.language.as_deref());
                }
                let version = Some(after.version);
                let fresh = current.is_none();
                let after = Box::new(after);
                (effect, version, What::Applied { after, kind, fresh })
            }
        };
        self.entries.push(Entry::Staged(Staged {
            ev,
            payload,
            effect,
            before,
            after_version,
            what,
        }));
        Ok(())
    }

    /// One upsert per phone: the latest name and language given win, as
    /// when each event upserts in turn.
    fn keep_contact(&mut self, phone: &str, name: Option<&str>, language: Option<&str>) {
        match self.phones.get(phone) {
            Some(&i) => {
                let (_, n, l) = &mut self.contacts[i];
                if let Some(name) = name {
                    *n = Some(name.to_string());
                }
                if let Some(language) = language {
                    *l = Some(language.to_string());
                }
            }
            None => {
                self.phones.insert(phone.to_string(), self.contacts.len());
                self.contacts.push((
                    phone.to_string(),
                    name.map(str::to_string),
                    language.map(str::to_string),
                ));
            }
        }
    }

    /// Writes the event log, the contacts and the commitments: the
    /// commitments' ids by reference, or a duplicate when the group is one
    /// event whose id another writer logged meanwhile (nothing else of it
    /// is written).
    fn write(&self, tx: &Tx<'_>, now: DateTime<Utc>) -> Result<Written, IngestError> {
        let log: Vec<NewEvent<'_>> = self
            .staged()
            .map(|s| NewEvent {
                event_id: &s.ev.event_id,
                reference: &s.ev.reference,
                kind: s.ev.kind.as_str(),
                source: self.source,
                payload: &s.payload,
                effect: s.effect,
                version_before: s.before,
                version_after: s.after_version,
            })
            .collect();
        let logged = tx.record_commitment_events(&log, now)?;
        if logged < log.len() {
            // Checked before, in this transaction: only a concurrent writer
            // on PostgreSQL gets here. Alone, the event is a duplicate; in
            // a group, the caller applies the events one by one.
            return match (self.entries.len(), log.first()) {
                (1, Some(e)) => {
                    tx.bump_counter(Counter::DuplicateEvents, 1)?;
                    Ok(Written::Duplicate(Outcome::Duplicate {
                        event_id: e.event_id.to_string(),
                    }))
                }
                _ => Err(IngestError::Rejected(
                    "an event of the batch was logged meanwhile".into(),
                )),
            };
        }
        let contacts: Vec<NewContact<'_>> = self
            .contacts
            .iter()
            .map(|(phone, name, language)| NewContact {
                phone,
                name: name.as_deref(),
                language: language.as_deref(),
            })
            .collect();
        let contact_ids = tx.upsert_contacts(&contacts, now)?;
        let rows: Vec<(&Commitment, Option<i64>)> = self
            .applied()
            .map(|(_, after, ..)| {
                let contact = after.phone.as_ref().and_then(|p| contact_ids.get(p).copied());
                (after, contact)
            })
            .collect();
        let ids = tx.save_commitments(&rows, now)?;
        let mut out = HashMap::with_capacity(ids.len());
        for (after, contact_id) in rows {
            let id = ids
                .get(&after.reference)
                .copied()
                .ok_or_else(|| IngestError::Store(StoreError::NoCommitment(after.reference.clone())))?;
            out.insert(after.reference.clone(), (id, contact_id));
        }
        Ok(Written::Saved(out))
    }

    fn staged(&self) -> impl Iterator<Item = &Staged<'e>> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Staged(s) => Some(s),
            Entry::Done(_) => None,
        })
    }

    /// The applied events: the event, the commitment after it, the change
    /// and whether it creates the commitment.
    fn applied(&self) -> impl Iterator<Item = (&'e BookingEvent, &Commitment, Change, bool)> {
        self.staged().filter_map(|s| match &s.what {
            What::Applied { after, kind, fresh } => Some((s.ev, after.as_ref(), *kind, *fresh)),
            What::Stale { .. } => None,
        })
    }

    /// Plans every applied event, closes what stopped being pertinent and
    /// reserves what the plans call for in set-based writes; the group's
    /// outcomes, in event order.
    fn realize(
        self,
        tx: &Tx<'_>,
        planner: &Planner<'_>,
        saved: &HashMap<String, (i64, Option<i64>)>,
        now: DateTime<Utc>,
    ) -> Result<Vec<Outcome>, IngestError> {
        let mut outcomes = Vec::with_capacity(self.entries.len());
        let mut wanted = Vec::new();
        for entry in self.entries {
            let staged = match entry {
                Entry::Done(outcome) => {
                    outcomes.push(outcome);
                    continue;
                }
                Entry::Staged(s) => s,
            };
            let (after, kind, fresh) = match staged.what {
                What::Stale { current_version } => {
                    outcomes.push(stale(staged.ev, current_version));
                    continue;
                }
                What::Applied { after, kind, fresh } => (after, kind, fresh),
            };
            // Chaos and tests: a store failure in the middle of one event,
            // after it already wrote (the savepoint must leave nothing of it).
            #[cfg(feature = "failpoints")]
            if let Some(a) = crate::failpoint::hit("ingest_event") {
                return Err(StoreError::from(crate::failpoint::sqlite_error(a)).into());
            }
            let ids = saved.get(&after.reference).copied().unwrap_or_default();
            let slot = outcomes.len();
            let (closed, notes) = plan(tx, planner, &after, kind, staged.ev, ids, fresh, slot, &mut wanted, now)?;
            outcomes.push(Outcome::Stored {
                reference: after.reference.clone(),
                effect: staged.effect,
                version: after.version,
                planned: vec![],
                already_present: 0,
                closed,
                held: vec![],
                notes,
            });
        }
        settle(tx, &wanted, &mut outcomes, now)?;
        Ok(outcomes)
    }
}

/// What [`Group::write`] did.
enum Written {
    /// The commitments' `(id, contact id)` by reference.
    Saved(HashMap<String, (i64, Option<i64>)>),
    Duplicate(Outcome),
}

/// The outcome of an event older than the stored version.
fn stale(ev: &BookingEvent, current_version: i64) -> Outcome {
    Outcome::Stored {
        reference: ev.reference.clone(),
        effect: EventEffect::Stale,
        version: current_version,
        planned: vec![],
        already_present: 0,
        closed: 0,
        held: vec![],
        notes: vec![format!(
            "version {} is older than the stored {current_version}: recorded only",
            ev.version.map(|v| v.to_string()).unwrap_or_default()
        )],
    }
}

/// An intention an event of the group reserves.
struct Wanted {
    /// Which outcome of the group it belongs to.
    slot: usize,
    intention: NewIntention,
    commitment_id: i64,
    contact_id: Option<i64>,
    /// Held for a person (`review`) instead of being sent, and why.
    held: Option<String>,
}

/// Plans for the commitment as it is now and closes what stopped being
/// pertinent (nothing for a commitment this event creates); what the plan
/// reserves joins `wanted`. Returns how many it closed and the plan's
/// notes.
#[allow(clippy::too_many_arguments)]
fn plan(
    tx: &Tx<'_>,
    planner: &Planner<'_>,
    after: &Commitment,
    kind: Change,
    ev: &BookingEvent,
    (commitment_id, contact_id): (i64, Option<i64>),
    fresh: bool,
    slot: usize,
    wanted: &mut Vec<Wanted>,
    now: DateTime<Utc>,
) -> Result<(usize, Vec<String>), IngestError> {
    let mut plan = planner.plan(after, kind, ev, now)?;
    let closed = if fresh {
        0
    } else {
        let keep: Vec<&str> = plan
            .intentions
            .iter()
            .chain(plan.held.iter().map(|(n, _)| n))
            .map(|i| i.key.as_str())
            .collect();
        crate::planning::close_planned(tx, commitment_id, &plan.closures, &keep, after.version, now)?.len()
    };
    if plan.replaces_only && closed == 0 {
        plan.intentions.clear();
        plan.held.clear();
        plan.notes
            .push("nothing was waiting for the old number: no message moved".into());
    }
    let planned = plan.intentions.into_iter().map(|n| (n, None));
    let held = plan.held.into_iter().map(|(n, reason)| (n, Some(reason)));
    wanted.extend(planned.chain(held).map(|(intention, held)| Wanted {
        slot,
        intention,
        commitment_id,
        contact_id,
        held,
    }));
    Ok((closed, plan.notes))
}

/// Reserves everything wanted in set-based writes and completes the
/// outcomes; held messages go straight to `review`.
fn settle(tx: &Tx<'_>, wanted: &[Wanted], outcomes: &mut [Outcome], now: DateTime<Utc>) -> Result<(), IngestError> {
    if wanted.is_empty() {
        return Ok(());
    }
    let wants: Vec<Want<'_>> = wanted
        .iter()
        .map(|w| Want {
            intention: &w.intention,
            commitment_id: w.commitment_id,
            contact_id: w.contact_id,
        })
        .collect();
    let reserved = crate::planning::reserve_all(tx, &wants, now)?;
    let mut review = Vec::new();
    for (w, got) in wanted.iter().zip(reserved) {
        let Some(Outcome::Stored {
            planned,
            held,
            already_present,
            ..
        }) = outcomes.get_mut(w.slot)
        else {
            continue;
        };
        match (got, &w.held) {
            (Reserved::Existing(_), _) => *already_present += 1,
            (Reserved::New(_), None) => planned.push(w.intention.key.to_string()),
            (Reserved::New(id), Some(reason)) => {
                let said = Said::new(HistorySignal::NeedsReview, Cause::Planner)
                    .note(reason.clone())
                    .version(w.intention.commitment_version);
                let (_, record) = history::on_signal(id, IntentionState::Planned, Signal::NeedsReview, said, now);
                review.extend(record);
                held.push(w.intention.key.to_string());
            }
        }
    }
    tx.apply_records(&review)?;
    Ok(())
}
