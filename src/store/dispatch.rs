//! The dispatcher's side of the ledger: claims under a lease with validity
//! checked in the same transaction, attempts recorded before the channel is
//! contacted, results, expired leases and the uncertain queue.
//!
//! Every state change goes through [`Tx::signal`] so that history is always
//! written; this file only adds the lease, attempt and scheduling columns
//! around it.

use chrono::{DateTime, Duration, Utc};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::intents::IntentionRow;
use super::{Cause, ContactRow, Entry, Result, Tx, ms};
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

/// What finishing an attempt did to the intention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finished {
    Accepted,
    Sent,
    Delivered,
    Read,
    Failed,
    Withdrawn,
    Uncertain,
    Retry,
    Review,
    /// The result arrived after the intention had moved on (lease expired
    /// and another worker or the reconciler took over): recorded only.
    Late,
}

/// The outcome of one attempt, as the store records it. Mirrors the
/// channel's classification without depending on the channel module.
#[derive(Debug, Clone)]
pub enum AttemptResult<'a> {
    /// The channel acknowledged it; `evidence` is the highest state it
    /// reported (`Accepted`, `Sent`, `Delivered`, `Read`, `Failed`) or
    /// `None` when it calls the command ambiguous.
    Acknowledged {
        evidence: Option<Signal>,
        command_id: Option<&'a str>,
        message_id: Option<&'a str>,
        http_status: Option<u16>,
        detail: Option<&'a str>,
    },
    Failed {
        code: &'a str,
        detail: &'a str,
        http_status: Option<u16>,
    },
    Retry {
        detail: &'a str,
        http_status: Option<u16>,
        retry_after_secs: Option<u64>,
    },
    Uncertain {
        detail: &'a str,
    },
    Conflict {
        detail: &'a str,
        http_status: Option<u16>,
    },
}

/// Retry policy inputs for [`Tx::finish_attempt`].
#[derive(Debug, Clone)]
pub struct RetryPolicy<'a> {
    pub max_attempts: u32,
    pub backoff_seconds: &'a [u64],
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

    /// Records an attempt as started (before the channel is contacted).
    pub fn start_attempt(
        &self,
        intention_id: i64,
        n: i64,
        worker: &str,
        channel: &str,
        version_checked: i64,
        now: DateTime<Utc>,
    ) -> Result<i64> {
        Ok(self.conn().query_row(
            "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
            params![intention_id, n, worker, channel, ms(now), version_checked],
            |r| r.get(0),
        )?)
    }

    /// Starts one more attempt for an intention that is *not* being claimed
    /// (a reconciliation repeat with the same key). Returns `(attempt_id, n)`.
    pub fn start_extra_attempt(
        &self,
        intention_id: i64,
        worker: &str,
        channel: &str,
        now: DateTime<Utc>,
    ) -> Result<(i64, i64)> {
        // The repeat carries the same content as the first attempt, so it
        // speaks of the same commitment version, whatever the version is now.
        let (n, version): (i64, i64) = self.conn().query_row(
            "UPDATE intentions SET attempt_count = attempt_count + 1, updated_at = ?2 WHERE id = ?1
             RETURNING attempt_count, coalesce(
                 (SELECT a.commitment_version_checked FROM attempts a WHERE a.intention_id = intentions.id
                  ORDER BY a.n LIMIT 1), commitment_version)",
            params![intention_id, ms(now)],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((self.start_attempt(intention_id, n, worker, channel, version, now)?, n))
    }

    pub(super) fn has_acknowledged_attempt(&self, id: i64) -> Result<bool> {
        Ok(self
            .conn()
            .query_row(
                "SELECT 1 FROM attempts WHERE intention_id = ?1 AND outcome IN ('accepted', 'ambiguous') LIMIT 1",
                [id],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
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

    /// Records what the channel answered for an attempt and moves the
    /// intention accordingly. When the commitment changed while the attempt
    /// was in flight, both versions are written to history: the message
    /// speaks of the version checked, never of the new one.
    pub fn finish_attempt(
        &self,
        attempt_id: i64,
        result: &AttemptResult<'_>,
        cause: Cause,
        retry: &RetryPolicy<'_>,
        now: DateTime<Utc>,
    ) -> Result<Finished> {
        let (intention_id, n, version_checked, already_ended): (i64, i64, i64, bool) = self.conn().query_row(
            "SELECT intention_id, n, commitment_version_checked, ended_at IS NOT NULL FROM attempts WHERE id = ?1",
            [attempt_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        let i = self.intention(intention_id)?;
        let current_version: i64 = self.conn().query_row(
            "SELECT version FROM commitments WHERE id = ?1",
            [i.commitment_id],
            |r| r.get(0),
        )?;
        let (outcome, http, command_id, message_id, code, detail) = match result {
            AttemptResult::Acknowledged {
                evidence,
                command_id,
                message_id,
                http_status,
                detail,
            } => (
                if evidence.is_some() { "accepted" } else { "ambiguous" },
                *http_status,
                *command_id,
                *message_id,
                evidence.is_none().then_some("ambiguo"),
                *detail,
            ),
            AttemptResult::Failed {
                code,
                detail,
                http_status,
            } => ("failed", *http_status, None, None, Some(*code), Some(*detail)),
            AttemptResult::Retry {
                detail, http_status, ..
            } => ("retry", *http_status, None, None, None, Some(*detail)),
            AttemptResult::Uncertain { detail } => ("uncertain", None, None, None, None, Some(*detail)),
            AttemptResult::Conflict { detail, http_status } => {
                ("conflict", *http_status, None, None, Some("conflict"), Some(*detail))
            }
        };
        // An attempt already closed (lease expired, shutdown) keeps its first
        // outcome; the late answer is still evidence and is applied below.
        if !already_ended {
            self.conn().execute(
                "UPDATE attempts SET ended_at = ?2, outcome = ?3, http_status = ?4, command_id = ?5, message_id = ?6,
                     error_code = ?7, error_detail = ?8 WHERE id = ?1",
                params![attempt_id, ms(now), outcome, http, command_id, message_id, code, detail],
            )?;
        } else {
            // Keep the references the late answer carries, next to the
            // outcome recorded when the attempt was closed.
            let late = format!("late answer: {outcome}");
            self.conn().execute(
                "UPDATE attempts SET command_id = coalesce(command_id, ?2), message_id = coalesce(message_id, ?3),
                     http_status = coalesce(http_status, ?4),
                     error_detail = coalesce(error_detail || '; ', '') || ?5 WHERE id = ?1",
                params![attempt_id, command_id, message_id, http, late],
            )?;
        }
        if command_id.is_some() || message_id.is_some() {
            self.conn().execute(
                "UPDATE intentions SET provider_command_id = coalesce(?2, provider_command_id),
                     provider_message_id = coalesce(?3, provider_message_id) WHERE id = ?1",
                params![intention_id, command_id, message_id],
            )?;
        }
        let evidence_ref = command_id.or(message_id).map(str::to_string);
        let attempt_ref = format!("attempt {n}");
        let evidence = evidence_ref.as_deref().unwrap_or(&attempt_ref);
        let entry = |signal: &'static str| Entry {
            signal,
            cause,
            evidence: Some(evidence),
            note: None,
            commitment_version: Some(version_checked),
        };
        let finished = match result {
            AttemptResult::Acknowledged {
                evidence: Some(sig), ..
            } => {
                let note = detail.map(str::to_string);
                let r = self.signal(
                    intention_id,
                    *sig,
                    &Entry {
                        note: note.as_deref(),
                        ..entry(sig.name())
                    },
                    now,
                )?;
                match (r.moved(), sig) {
                    (false, _) => Finished::Late,
                    (true, Signal::Sent) => Finished::Sent,
                    (true, Signal::Delivered) => Finished::Delivered,
                    (true, Signal::Read) => Finished::Read,
                    (true, Signal::Failed) => Finished::Failed,
                    (true, Signal::Cancel(_)) => Finished::Withdrawn,
                    (true, _) => Finished::Accepted,
                }
            }
            AttemptResult::Acknowledged { evidence: None, .. } => {
                let r = self.signal(
                    intention_id,
                    Signal::Unknown,
                    &Entry {
                        note: Some("the channel reports the command as ambiguous: waiting for its own resolution"),
                        ..entry("ambiguous")
                    },
                    now,
                )?;
                if r.moved() { Finished::Uncertain } else { Finished::Late }
            }
            AttemptResult::Failed { code, detail, .. } => {
                let note = format!("{code}: {detail}");
                let r = self.signal(
                    intention_id,
                    Signal::Failed,
                    &Entry {
                        note: Some(&note),
                        ..entry("failed")
                    },
                    now,
                )?;
                if r.moved() { Finished::Failed } else { Finished::Late }
            }
            AttemptResult::Uncertain { detail } => {
                let r = self.signal(
                    intention_id,
                    Signal::Unknown,
                    &Entry {
                        note: Some(detail),
                        ..entry("unknown_outcome")
                    },
                    now,
                )?;
                if r.moved() { Finished::Uncertain } else { Finished::Late }
            }
            AttemptResult::Conflict { detail, .. } => {
                let r = self.signal(
                    intention_id,
                    Signal::NeedsReview,
                    &Entry {
                        note: Some(detail),
                        ..entry("conflict")
                    },
                    now,
                )?;
                if r.moved() { Finished::Review } else { Finished::Late }
            }
            AttemptResult::Retry {
                detail,
                retry_after_secs,
                ..
            } => {
                if i.state != IntentionState::Dispatching {
                    // Not ours to re-plan: the lease expired meanwhile, or this
                    // was a reconciliation repeat. It stays where it is and
                    // the reconciler tries again later.
                    let note = format!("retry answer while {}: {detail}", i.state);
                    self.note(
                        intention_id,
                        &Entry {
                            note: Some(&note),
                            ..entry("retry")
                        },
                        now,
                    )?;
                    Finished::Late
                } else if i.attempt_count >= i64::from(retry.max_attempts) {
                    let note = format!("{} attempt(s) exhausted; last: {detail}", i.attempt_count);
                    self.signal(
                        intention_id,
                        Signal::NeedsReview,
                        &Entry {
                            note: Some(&note),
                            ..entry("needs_review")
                        },
                        now,
                    )?;
                    Finished::Review
                } else {
                    let idx = usize::try_from(i.attempt_count - 1).unwrap_or(0);
                    let base = retry
                        .backoff_seconds
                        .get(idx)
                        .or(retry.backoff_seconds.last())
                        .copied()
                        .unwrap_or(1);
                    let wait = base.max(retry_after_secs.unwrap_or(0));
                    let next = now + Duration::seconds(i64::try_from(wait).unwrap_or(i64::MAX / 1000));
                    let note = format!("{detail}; next try at {}", next.to_rfc3339());
                    self.signal(
                        intention_id,
                        Signal::Release,
                        &Entry {
                            note: Some(&note),
                            ..entry("release")
                        },
                        now,
                    )?;
                    self.conn().execute(
                        "UPDATE intentions SET next_attempt_at = ?2 WHERE id = ?1",
                        params![intention_id, ms(next)],
                    )?;
                    Finished::Retry
                }
            }
        };
        if current_version != version_checked {
            self.note_version_changed(&i, version_checked, current_version, now)?;
        }
        // A status webhook may have arrived before this answer told us the
        // message id: apply it now, after our own evidence, in received order.
        if command_id.is_some() || message_id.is_some() {
            self.apply_pending_statuses_for(intention_id, now)?;
        }
        Ok(finished)
    }

    /// The commitment moved while this intention was in flight: record the
    /// sequence and point at the update notice of the new version, so that
    /// nobody reads the old message as confirmation of the new time.
    fn note_version_changed(&self, i: &IntentionRow, checked: i64, current: i64, now: DateTime<Utc>) -> Result<()> {
        let notice: Option<(String, String)> = self
            .conn()
            .query_row(
                "SELECT key, state FROM intentions WHERE commitment_id = ?1 AND commitment_version = ?2
                   AND purpose IN ('aviso-cambio', 'aviso-cancelacion') ORDER BY id LIMIT 1",
                params![i.commitment_id, current],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let follow = match &notice {
            Some((key, state)) => format!("update notice {key} is {state}"),
            None => "no update notice exists for the new version (policy or appointment past): a person should check"
                .to_string(),
        };
        let note = format!(
            "commitment changed while in flight: checked v{checked}, now v{current}; this message speaks of v{checked} \
             and is not confirmation of v{current}; {follow}"
        );
        self.note(
            i.id,
            &Entry {
                signal: "version_changed_in_flight",
                cause: Cause::Dispatcher,
                evidence: notice.as_ref().map(|n| n.0.as_str()),
                note: Some(&note),
                commitment_version: Some(current),
            },
            now,
        )
    }
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
