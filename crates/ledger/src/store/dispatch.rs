//! The dispatcher's side of the ledger: claims under a lease with validity
//! checked in the same transaction, attempts recorded before the channel is
//! contacted, the pre-send re-check (read right before a request leaves)
//! and what happens to an attempt it stops.
//!
//! Every state change goes through [`Tx::signal`] so that history is always
//! written; this file only adds the lease, attempt and scheduling columns
//! around it.

use chrono::{DateTime, Duration, Utc};
use rusqlite::{OptionalExtension, params};

use super::attempts::{AttemptOutcome, Finished};
use super::intents::IntentionRow;
use super::{Cause, ContactRow, Entry, Result, Tx, from_ms, ms};
use crate::domain::key::Purpose;
use crate::domain::state::{IntentionState, Signal};
use crate::domain::validity::{self, CommitmentFacts, ContactFacts, IntentionFacts, Rules, Validity};

/// Which planned intentions a claim may take.
#[derive(Debug, Clone)]
pub enum ClaimScope {
    /// Everything due (the background loop).
    Due,
    /// Only these ids, and only if they are due (reprocessing a day).
    Ids(Vec<i64>),
}

/// An intention this worker now holds, with its attempt already on disk.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub intention: IntentionRow,
    pub attempt_id: i64,
    pub attempt_n: i64,
    /// The commitment version validity was checked against.
    pub version_checked: i64,
    pub contact: Option<ContactRow>,
}

/// What a claim did with one candidate.
#[derive(Debug, Clone)]
pub enum ClaimDecision {
    Claimed(Box<Claimed>),
    Cancelled {
        id: i64,
        key: String,
        reason: String,
        explanation: String,
    },
    Deferred {
        id: i64,
        key: String,
        until: DateTime<Utc>,
        why: String,
    },
    /// The intention already has channel evidence on an earlier attempt:
    /// sending again would be a duplicate. Sent to review instead.
    Guarded {
        id: i64,
        key: String,
    },
}

/// Who holds an attempt that is about to be sent: what the pre-send check
/// compares (the fencing token of a send).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A dispatcher's claim: the intention is `dispatching` under this
    /// lease owner, and the lease has not run out.
    Lease(String),
    /// A reconciliation repeat: the intention is still `uncertain`.
    Reconciler,
}

/// What the pre-send check reads for one attempt, in one query for every
/// attempt about to leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresendFacts {
    pub attempt_id: i64,
    pub n: i64,
    pub attempt_open: bool,
    /// The commitment version the attempt's validity check read.
    pub version_checked: i64,
    pub state: IntentionState,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub purpose: String,
    pub commitment_version: i64,
    pub commitment_cancelled: bool,
}

impl PresendFacts {
    /// Why the request must not leave, or `None` when nothing moved since
    /// its validity check: the commitment's version and cancellation, and
    /// the holder's own claim on the intention and the attempt.
    pub fn moved(&self, holder: &Holder, now: DateTime<Utc>) -> Option<String> {
        if !self.attempt_open {
            return Some(format!("attempt {} was closed meanwhile", self.n));
        }
        match holder {
            Holder::Lease(owner) => {
                if self.state != IntentionState::Dispatching {
                    return Some(format!("the intention is {} now, no longer dispatching", self.state));
                }
                if self.lease_owner.as_deref() != Some(owner.as_str()) {
                    return Some(format!(
                        "the lease is held by {} now",
                        self.lease_owner.as_deref().unwrap_or("nobody")
                    ));
                }
                if self.lease_until.is_none_or(|t| t <= now) {
                    return Some("the lease ran out before the request could leave".into());
                }
            }
            Holder::Reconciler => {
                if self.state != IntentionState::Uncertain {
                    return Some(format!("the intention is {} now, no longer uncertain", self.state));
                }
            }
        }
        if self.commitment_version != self.version_checked {
            return Some(format!(
                "the commitment moved from v{} to v{} after the validity check",
                self.version_checked, self.commitment_version
            ));
        }
        if self.commitment_cancelled && Purpose::from_slug(&self.purpose) != Purpose::Cancellation {
            return Some("the commitment was cancelled after the validity check".into());
        }
        None
    }
}

impl Tx<'_> {
    /// Claims up to `limit` due planned intentions for `owner`: validity is
    /// checked against the current commitment and contact, invalid ones are
    /// cancelled (with the version evaluated), deferred ones get a new
    /// `next_attempt_at`, and each claimed one gets its attempt row — all in
    /// the caller's single `BEGIN IMMEDIATE` transaction, so a batch costs
    /// one fsync and two processes can never claim the same intention.
    #[allow(clippy::too_many_arguments)]
    pub fn claim_batch(
        &self,
        scope: &ClaimScope,
        owner: &str,
        channel: &str,
        lease: Duration,
        limit: u32,
        rules: &Rules,
        now: DateTime<Utc>,
    ) -> Result<Vec<ClaimDecision>> {
        let due_cond =
            "i.state = 'planned' AND i.due_at <= ?1 AND (i.next_attempt_at IS NULL OR i.next_attempt_at <= ?1)";
        let ids: Vec<i64> = match scope {
            ClaimScope::Due => self
                .conn()
                .prepare_cached(&format!(
                    "SELECT i.id FROM intentions i WHERE {due_cond} ORDER BY i.due_at, i.id LIMIT ?2"
                ))?
                .query_map(params![ms(now), limit], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?,
            ClaimScope::Ids(wanted) => {
                let mut stmt = self
                    .conn()
                    .prepare_cached(&format!("SELECT i.id FROM intentions i WHERE i.id = ?2 AND {due_cond}"))?;
                let mut out = Vec::new();
                for id in wanted {
                    if out.len() >= limit as usize {
                        break;
                    }
                    if let Some(id) = stmt.query_row(params![ms(now), id], |r| r.get(0)).optional()? {
                        out.push(id);
                    }
                }
                out
            }
        };
        let mut decisions = Vec::with_capacity(ids.len());
        for id in ids {
            decisions.push(self.claim_one(id, owner, channel, lease, rules, now)?);
        }
        Ok(decisions)
    }

    fn claim_one(
        &self,
        id: i64,
        owner: &str,
        channel: &str,
        lease: Duration,
        rules: &Rules,
        now: DateTime<Utc>,
    ) -> Result<ClaimDecision> {
        let i = self.intention(id)?;
        // Belt and braces: an earlier attempt the channel acknowledged means
        // the message may be out; a new send could only duplicate it.
        if self.has_acknowledged_attempt(id)? {
            self.signal(
                id,
                Signal::NeedsReview,
                &Entry {
                    signal: "needs_review",
                    cause: Cause::Dispatcher,
                    evidence: None,
                    note: Some("planned again but an earlier attempt was acknowledged by the channel: not resending"),
                    commitment_version: None,
                },
                now,
            )?;
            return Ok(ClaimDecision::Guarded { id, key: i.key });
        }
        let (verdict, version, contact) = self.evaluate(&i, rules, now)?;
        match verdict {
            Validity::Cancel { reason, explanation } => {
                self.signal(
                    id,
                    Signal::Cancel(reason),
                    &Entry {
                        signal: "cancel",
                        cause: Cause::Dispatcher,
                        evidence: Some("validity_at_claim"),
                        note: Some(&explanation),
                        commitment_version: Some(version),
                    },
                    now,
                )?;
                Ok(ClaimDecision::Cancelled {
                    id,
                    key: i.key,
                    reason: reason.as_str().to_string(),
                    explanation,
                })
            }
            Validity::Defer { until, why } => {
                self.conn().execute(
                    "UPDATE intentions SET next_attempt_at = ?2, updated_at = ?3 WHERE id = ?1",
                    params![id, ms(until), ms(now)],
                )?;
                let note = format!("{why} (until {})", until.to_rfc3339());
                self.note(
                    id,
                    &Entry {
                        signal: "deferred",
                        cause: Cause::Dispatcher,
                        evidence: Some("validity_at_claim"),
                        note: Some(&note),
                        commitment_version: Some(version),
                    },
                    now,
                )?;
                Ok(ClaimDecision::Deferred {
                    id,
                    key: i.key,
                    until,
                    why,
                })
            }
            Validity::Valid => {
                let r = self.signal(
                    id,
                    Signal::Claim,
                    &Entry {
                        signal: "claim",
                        cause: Cause::Dispatcher,
                        evidence: None,
                        note: Some(owner),
                        commitment_version: Some(version),
                    },
                    now,
                )?;
                if !r.moved() {
                    // Only a planned intention is selected, inside this same
                    // transaction; anything else is a bug worth surfacing.
                    return Err(super::StoreError::Corrupt {
                        table: "intentions",
                        detail: format!("#{id} could not be claimed from {}", r.from),
                    });
                }
                let n: i64 = self.conn().query_row(
                    "UPDATE intentions SET lease_owner = ?2, lease_until = ?3, attempt_count = attempt_count + 1,
                         next_attempt_at = NULL
                     WHERE id = ?1 RETURNING attempt_count",
                    params![id, owner, ms(now + lease)],
                    |r| r.get(0),
                )?;
                let attempt_id = self.start_attempt(id, n, owner, channel, version, now)?;
                let intention = self.intention(id)?;
                Ok(ClaimDecision::Claimed(Box::new(Claimed {
                    intention,
                    attempt_id,
                    attempt_n: n,
                    version_checked: version,
                    contact,
                })))
            }
        }
    }

    /// Validity of `i` against the commitment and contact as stored now,
    /// without writing anything (also the reprocess dry run). Returns the
    /// verdict, the commitment version evaluated and the contact.
    pub fn evaluate(
        &self,
        i: &IntentionRow,
        rules: &Rules,
        now: DateTime<Utc>,
    ) -> Result<(Validity, i64, Option<ContactRow>)> {
        let c = self.commitment_by_id(i.commitment_id)?;
        let contact = match c.contact_id {
            Some(cid) => self.contact(cid)?,
            None => self.contact_by_phone(&i.recipient)?,
        };
        let version = c.commitment.version;
        let verdict = validity::check(
            &IntentionFacts {
                commitment_version: i.commitment_version,
                purpose: i.purpose(),
                category: i.category(),
                asks_confirmation: i.asks_confirmation,
                expires_at: i.expires_at,
                created_at: i.created_at,
            },
            &CommitmentFacts {
                kind: c.commitment.kind,
                cancelled: c.commitment.is_cancelled(),
                version,
                starts_at: c.commitment.starts_at,
                confirmed_at: c.commitment.confirmed_at,
                manual_contact_at: c.commitment.manual_contact_at,
            },
            contact
                .as_ref()
                .map(|k| ContactFacts {
                    consent_marketing: k.consent_marketing,
                    opt_out_marketing_at: k.opt_out_marketing_at,
                    opt_out_transactional_at: k.opt_out_transactional_at,
                })
                .as_ref(),
            self.sent_today(&i.recipient, i.id, validity::local_midnight(rules.tz, now))?,
            rules,
            now,
        );
        Ok((verdict, version, contact))
    }

    /// The facts the pre-send check compares, for every attempt in
    /// `attempt_ids` (missing ids are simply absent). Read-only: run it on
    /// a reader connection, so it never queues behind the writer.
    pub fn presend_facts(&self, attempt_ids: &[i64]) -> Result<Vec<PresendFacts>> {
        if attempt_ids.is_empty() {
            return Ok(Vec::new());
        }
        let marks = vec!["?"; attempt_ids.len()].join(",");
        let mut stmt = self.conn().prepare(&format!(
            "SELECT a.id, a.n, a.ended_at IS NULL, a.commitment_version_checked, i.state, i.lease_owner,
                    i.lease_until, i.purpose, c.version, c.status = 'cancelled'
             FROM attempts a JOIN intentions i ON i.id = a.intention_id JOIN commitments c ON c.id = i.commitment_id
             WHERE a.id IN ({marks})"
        ))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(attempt_ids), |r| {
                let state: String = r.get(4)?;
                Ok(PresendFacts {
                    attempt_id: r.get(0)?,
                    n: r.get(1)?,
                    attempt_open: r.get(2)?,
                    version_checked: r.get(3)?,
                    state: state.parse().map_err(|e: crate::domain::state::UnknownState| {
                        rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, e.to_string().into())
                    })?,
                    lease_owner: r.get(5)?,
                    lease_until: r.get::<_, Option<i64>>(6)?.map(from_ms),
                    purpose: r.get(7)?,
                    commitment_version: r.get(8)?,
                    commitment_cancelled: r.get(9)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// The pre-send check stopped this attempt: nothing left. The attempt
    /// is closed as `not_sent`. A claim still held by `holder` goes straight
    /// back through validity, with the same rules as a claim (cancelled with
    /// its reason, deferred, or planned and due again); a repeat leaves the
    /// intention uncertain and due for the next reconciliation pass, whose
    /// own validity check decides. Anything else only gets a history note:
    /// it is no longer this holder's to move.
    pub fn abandon_unsent(
        &self,
        attempt_id: i64,
        holder: &Holder,
        why: &str,
        rules: &Rules,
        now: DateTime<Utc>,
    ) -> Result<Finished> {
        let (id, n, open): (i64, i64, bool) = self.conn().query_row(
            "SELECT intention_id, n, ended_at IS NULL FROM attempts WHERE id = ?1",
            [attempt_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        let detail = format!("not sent: {why}");
        if open {
            self.conn().execute(
                "UPDATE attempts SET ended_at = ?2, outcome = ?3, error_detail = ?4 WHERE id = ?1",
                params![attempt_id, ms(now), AttemptOutcome::NotSent.as_str(), detail],
            )?;
        }
        let i = self.intention(id)?;
        let evidence = format!("attempt {n}");
        let entry = |signal, note| Entry {
            signal,
            cause: match holder {
                Holder::Lease(_) => Cause::Dispatcher,
                Holder::Reconciler => Cause::Reconciler,
            },
            evidence: Some(&evidence),
            note,
            commitment_version: None,
        };
        match holder {
            Holder::Lease(owner)
                if i.state == IntentionState::Dispatching && i.lease_owner.as_deref() == Some(owner.as_str()) =>
            {
                let note = format!("{detail}; back through validity");
                self.signal(id, Signal::Release, &entry("not_sent", Some(&note)), now)?;
                self.conn()
                    .execute("UPDATE intentions SET next_attempt_at = NULL WHERE id = ?1", [id])?;
                let i = self.intention(id)?;
                self.revalidate(&i, rules, now)?;
            }
            Holder::Reconciler if i.state == IntentionState::Uncertain => {
                self.note(id, &entry("not_sent", Some(&detail)), now)?;
                self.conn().execute(
                    "UPDATE intentions SET next_attempt_at = ?2 WHERE id = ?1",
                    params![id, ms(now)],
                )?;
            }
            _ => {
                let note = format!("{detail}; the intention is {} and no longer this sender's", i.state);
                self.note(id, &entry("not_sent_late", Some(&note)), now)?;
            }
        }
        Ok(Finished::NotSent)
    }

    /// A planned intention released by the pre-send check meets validity
    /// right away, so the reason it stopped is recorded now, not at some
    /// later claim.
    fn revalidate(&self, i: &IntentionRow, rules: &Rules, now: DateTime<Utc>) -> Result<()> {
        let (verdict, version, _) = self.evaluate(i, rules, now)?;
        match verdict {
            Validity::Cancel { reason, explanation } => {
                self.signal(
                    i.id,
                    Signal::Cancel(reason),
                    &Entry {
                        signal: "cancel",
                        cause: Cause::Dispatcher,
                        evidence: Some("validity_before_send"),
                        note: Some(&explanation),
                        commitment_version: Some(version),
                    },
                    now,
                )?;
            }
            Validity::Defer { until, why } => {
                self.conn().execute(
                    "UPDATE intentions SET next_attempt_at = ?2 WHERE id = ?1",
                    params![i.id, ms(until)],
                )?;
                let note = format!("{why} (until {})", until.to_rfc3339());
                self.note(
                    i.id,
                    &Entry {
                        signal: "deferred",
                        cause: Cause::Dispatcher,
                        evidence: Some("validity_before_send"),
                        note: Some(&note),
                        commitment_version: Some(version),
                    },
                    now,
                )?;
            }
            // Still valid (e.g. an order notice): due again now, and the
            // next claim checks it once more.
            Validity::Valid => {}
        }
        Ok(())
    }

    /// Other intentions to the same recipient whose first attempt started
    /// since `day_start` (handed to the channel today), for the daily cap.
    fn sent_today(&self, recipient: &str, except: i64, day_start: DateTime<Utc>) -> Result<u32> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM intentions i WHERE i.recipient = ?1 AND i.id != ?2
               AND EXISTS (SELECT 1 FROM attempts a WHERE a.intention_id = i.id AND a.started_at >= ?3
                           AND a.outcome NOT IN ('retry', 'not_sent'))",
            params![recipient, except, ms(day_start)],
            |r| r.get(0),
        )?)
    }
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "presend_tests.rs"]
mod presend_tests;
