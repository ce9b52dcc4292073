//! The dispatcher's side of the ledger: claims under a lease with validity
//! checked in the same transaction, attempts recorded before the channel is
//! contacted, results, expired leases and the uncertain queue.
//!
//! Every state change goes through [`Tx::signal`] so that history is always
//! written; this file only adds the lease, attempt and scheduling columns
//! around it.

use chrono::{DateTime, Duration, Utc};
use rusqlite::{OptionalExtension, params};

use super::intents::IntentionRow;
use super::{Cause, ContactRow, Entry, Result, Tx, ms};
use crate::domain::state::Signal;
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

    /// Other intentions to the same recipient whose first attempt started
    /// since `day_start` (handed to the channel today), for the daily cap.
    fn sent_today(&self, recipient: &str, except: i64, day_start: DateTime<Utc>) -> Result<u32> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM intentions i WHERE i.recipient = ?1 AND i.id != ?2
               AND EXISTS (SELECT 1 FROM attempts a WHERE a.intention_id = i.id AND a.started_at >= ?3
                           AND a.outcome != 'retry')",
            params![recipient, except, ms(day_start)],
            |r| r.get(0),
        )?)
    }
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
