//! Attempts: recorded as started before the channel is contacted, and
//! finished with what the channel answered (or closed as `not_sent` when the
//! pre-send check stopped them). A result that arrives after the commitment
//! moved on is recorded with both versions, never read as confirmation of
//! the new one.

use chrono::{DateTime, Duration, Utc};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::intents::IntentionRow;
use super::{Cause, Entry, Result, Tx, ms};
use crate::domain::state::{IntentionState, Signal};

/// How an attempt ended, as stored in `attempts.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Recorded before the request; not finished (yet).
    Started,
    Accepted,
    /// The channel took it but cannot say where it is (engine "ambiguo").
    Ambiguous,
    Failed,
    /// Never reached processing; tried again later.
    Retry,
    /// May have been processed; nobody knows.
    Uncertain,
    Conflict,
    /// The pre-send check stopped it: the request never left. Not an
    /// acknowledgement and not a message handed to the channel today.
    NotSent,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Accepted => "accepted",
            Self::Ambiguous => "ambiguous",
            Self::Failed => "failed",
            Self::Retry => "retry",
            Self::Uncertain => "uncertain",
            Self::Conflict => "conflict",
            Self::NotSent => "not_sent",
        }
    }
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
    /// The pre-send check abandoned it: nothing was sent.
    NotSent,
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
    /// (a reconciliation repeat with the same key), after the caller checked
    /// validity against `version_checked` in this same transaction: the
    /// repeat may be the first request that reaches the channel, so it
    /// records the version it was validated against, exactly as a claim
    /// does. Returns `(attempt_id, n)`.
    pub fn start_extra_attempt(
        &self,
        intention_id: i64,
        worker: &str,
        channel: &str,
        version_checked: i64,
        now: DateTime<Utc>,
    ) -> Result<(i64, i64)> {
        let n: i64 = self.conn().query_row(
            "UPDATE intentions SET attempt_count = attempt_count + 1, updated_at = ?2 WHERE id = ?1
             RETURNING attempt_count",
            params![intention_id, ms(now)],
            |r| r.get(0),
        )?;
        Ok((
            self.start_attempt(intention_id, n, worker, channel, version_checked, now)?,
            n,
        ))
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
                if evidence.is_some() {
                    AttemptOutcome::Accepted
                } else {
                    AttemptOutcome::Ambiguous
                },
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
            } => (
                AttemptOutcome::Failed,
                *http_status,
                None,
                None,
                Some(*code),
                Some(*detail),
            ),
            AttemptResult::Retry {
                detail, http_status, ..
            } => (AttemptOutcome::Retry, *http_status, None, None, None, Some(*detail)),
            AttemptResult::Uncertain { detail } => (AttemptOutcome::Uncertain, None, None, None, None, Some(*detail)),
            AttemptResult::Conflict { detail, http_status } => (
                AttemptOutcome::Conflict,
                *http_status,
                None,
                None,
                Some("conflict"),
                Some(*detail),
            ),
        };
        // An attempt already closed (lease expired, shutdown) keeps its first
        // outcome; the late answer is still evidence and is applied below.
        if !already_ended {
            self.conn().execute(
                "UPDATE attempts SET ended_at = ?2, outcome = ?3, http_status = ?4, command_id = ?5, message_id = ?6,
                     error_code = ?7, error_detail = ?8 WHERE id = ?1",
                params![
                    attempt_id,
                    ms(now),
                    outcome.as_str(),
                    http,
                    command_id,
                    message_id,
                    code,
                    detail
                ],
            )?;
        } else {
            // Keep the references the late answer carries, next to the
            // outcome recorded when the attempt was closed.
            let late = format!("late answer: {}", outcome.as_str());
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
        if current_version != version_checked || current_version != i.commitment_version {
            self.note_version_sequence(&i, current_version, now)?;
        }
        // A status webhook may have arrived before this answer told us the
        // message id: apply it now, after our own evidence, in received order.
        if command_id.is_some() || message_id.is_some() {
            self.apply_pending_statuses_for(intention_id, now)?;
        }
        Ok(finished)
    }

    /// The earliest attempt that may have reached the channel (every
    /// outcome but `retry` and `not_sent`, which prove the request never
    /// got there): `(n, commitment version its validity check read)`.
    fn producing_attempt(&self, intention_id: i64) -> Result<Option<(i64, i64)>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT n, commitment_version_checked FROM attempts
                 WHERE intention_id = ?1 AND outcome NOT IN ('retry', 'not_sent') ORDER BY n LIMIT 1",
                [intention_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// The commitment is at `current` but this message may speak of an
    /// older version. Every attempt records the version its validity check
    /// read in its own start transaction, so the request that produced the
    /// channel's message is "in flight across a change" exactly when that
    /// version is older than `current`: it started before the change was
    /// committed. Then the sequence is recorded with the update notice of
    /// the new version, so that nobody reads the old message as
    /// confirmation of the new time. An appointment message whose
    /// producing request was validated against `current` although it speaks
    /// of an older version passed a check it should have failed: that is
    /// recorded as the bug it is, never as in flight.
    fn note_version_sequence(&self, i: &IntentionRow, current: i64, now: DateTime<Utc>) -> Result<()> {
        let Some((producer, checked)) = self.producing_attempt(i.id)? else {
            return Ok(());
        };
        if checked == current {
            let kind: String =
                self.conn()
                    .query_row("SELECT kind FROM commitments WHERE id = ?1", [i.commitment_id], |r| {
                        r.get(0)
                    })?;
            if kind != "appointment" || i.commitment_version == current {
                // Orders: each notice describes a state the order really
                // went through; a later state does not make it wrong.
                return Ok(());
            }
            let note = format!(
                "attempt {producer} was validated against v{current} although this message speaks of v{}: it \
                 should never have been sent (a validity bug; please report it)",
                i.commitment_version
            );
            tracing::error!("intention {} ({}): {note}", i.id, i.key);
            return self.note(
                i.id,
                &Entry {
                    signal: "sent_after_change",
                    cause: Cause::Dispatcher,
                    evidence: Some(&format!("attempt {producer}")),
                    note: Some(&note),
                    commitment_version: Some(current),
                },
                now,
            );
        }
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
            "commitment changed while in flight: checked v{checked}, now v{current} (attempt {producer}, the first that \
             may have reached the channel, started before the change was committed); this message speaks of \
             v{checked} and is not confirmation of v{current}; {follow}"
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
