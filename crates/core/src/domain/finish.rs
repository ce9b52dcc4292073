//! Finishing an attempt, decided: from what the ledger holds about the
//! attempt and its intention ([`FinishFacts`]), what the channel answered
//! ([`AttemptResult`]) and the retry policy, the rows to write — the
//! attempt's end, the history row and state change, the next try — and
//! what it did ([`Finished`]). Retry, review or late: here, never in SQL.
//!
//! A result for an intention that moved on (its lease expired, the
//! reconciler took over) is *late*: still evidence, recorded, but it never
//! re-plans. When the commitment changed while the request was in flight,
//! [`version_sequence`] decides the row that says so, so nobody reads the
//! old message as confirmation of the new version.

use chrono::{DateTime, Utc};

use super::attempt::{AttemptOutcome, AttemptResult, Finished, RetryPolicy, wait_secs};
use super::history::{self, Cause, HistorySignal, Record, Said};
use super::state::{IntentionState, Signal, Transition};

/// What the ledger holds about one attempt being finished, read in the
/// transaction that records the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishFacts {
    pub attempt_id: i64,
    pub intention_id: i64,
    /// The attempt's number for its intention (1, 2…).
    pub n: i64,
    /// The commitment version the attempt's validity check read.
    pub version_checked: i64,
    /// Already closed (lease expired, shutdown): its first outcome stays.
    pub attempt_ended: bool,
    pub state: IntentionState,
    pub attempt_count: i64,
    /// Earlier attempts of the intention closed `not_sent` (the pre-send
    /// check, a channel that refused us): they never reached the channel,
    /// so they count against no attempt limit.
    pub unsent: i64,
    /// The version the intention's message speaks of.
    pub intention_version: i64,
    /// The commitment's version now.
    pub current_version: i64,
}

/// How the attempt row is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptWrite {
    /// Close the open attempt with this outcome.
    End {
        attempt_id: i64,
        outcome: AttemptOutcome,
        http_status: Option<u16>,
        command_id: Option<String>,
        message_id: Option<String>,
        error_code: Option<String>,
        error_detail: Option<String>,
        at: DateTime<Utc>,
    },
    /// The attempt was already closed: keep its outcome, add the
    /// references the late answer carries and say it came late.
    LateAnswer {
        attempt_id: i64,
        http_status: Option<u16>,
        command_id: Option<String>,
        message_id: Option<String>,
        note: String,
    },
}

/// Everything finishing one attempt writes, and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishPlan {
    pub intention_id: i64,
    pub attempt: AttemptWrite,
    /// The channel's references, stored on the intention (newer over older).
    pub refs: Option<(Option<String>, Option<String>)>,
    /// The history row (and state change); `None` when the state machine
    /// refused the signal (a late answer, nothing to write).
    pub record: Option<Record>,
    /// A retry: when the intention is due again.
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub finished: Finished,
    /// The intention's state once this plan is applied.
    pub state_after: IntentionState,
    /// The commitment moved relative to this attempt: the version sequence
    /// must be looked at ([`version_sequence`]).
    pub version_moved: bool,
}

/// Decides how a result finishes an attempt. Pure.
pub fn decide(
    f: &FinishFacts,
    result: &AttemptResult<'_>,
    cause: Cause,
    retry: &RetryPolicy,
    now: DateTime<Utc>,
) -> FinishPlan {
    let (command_id, message_id) = result.refs();
    let own = |s: Option<&str>| s.map(str::to_string);
    let attempt = attempt_write(f, result, now);
    let refs = (command_id.is_some() || message_id.is_some()).then(|| (own(command_id), own(message_id)));
    let evidence = command_id
        .or(message_id)
        .map(str::to_string)
        .unwrap_or_else(|| format!("attempt {}", f.n));
    let said = |signal: HistorySignal, note: Option<String>| Said {
        signal,
        cause,
        evidence: Some(evidence.clone()),
        note,
        commitment_version: Some(f.version_checked),
    };
    let mut next_attempt_at = None;
    let (record, finished) = match result {
        AttemptResult::Acknowledged {
            evidence: Some(sig),
            detail,
            ..
        } => {
            let (t, r) = history::on_signal(f.intention_id, f.state, *sig, said((*sig).into(), own(*detail)), now);
            let finished = match (t, sig) {
                (Transition::Move(_), Signal::Sent) => Finished::Sent,
                (Transition::Move(_), Signal::Delivered) => Finished::Delivered,
                (Transition::Move(_), Signal::Read) => Finished::Read,
                (Transition::Move(_), Signal::Failed) => Finished::Failed,
                (Transition::Move(_), Signal::Cancel(_)) => Finished::Withdrawn,
                (Transition::Move(_), _) => Finished::Accepted,
                _ => Finished::Late,
            };
            (r, finished)
        }
        AttemptResult::Acknowledged { evidence: None, .. } => {
            let note = "the channel reports the command as ambiguous: waiting for its own resolution";
            moved_or_late(
                f,
                Signal::Unknown,
                said(HistorySignal::Ambiguous, Some(note.into())),
                Finished::Uncertain,
                now,
            )
        }
        AttemptResult::Failed { code, detail, .. } => {
            let s = said(HistorySignal::Failed, Some(format!("{code}: {detail}")));
            moved_or_late(f, Signal::Failed, s, Finished::Failed, now)
        }
        AttemptResult::Uncertain { detail } => {
            let s = said(HistorySignal::UnknownOutcome, Some(detail.to_string()));
            moved_or_late(f, Signal::Unknown, s, Finished::Uncertain, now)
        }
        AttemptResult::Conflict { detail, .. } => {
            let s = said(HistorySignal::Conflict, Some(detail.to_string()));
            moved_or_late(f, Signal::NeedsReview, s, Finished::Review, now)
        }
        AttemptResult::ChannelDown { fault, detail, .. } => {
            let note = format!("not sent: the channel refused us ({fault}): {detail}");
            unsent_step(f, note, &said, now)
        }
        AttemptResult::Retry {
            detail,
            retry_after_secs,
            ..
        } => {
            let (record, finished, next) = retry_step(f, detail, *retry_after_secs, &said, retry, now);
            next_attempt_at = next;
            (record, finished)
        }
    };
    let state_after = match &record {
        Some(r) if r.applied => r.to,
        _ => f.state,
    };
    FinishPlan {
        intention_id: f.intention_id,
        attempt,
        refs,
        record,
        next_attempt_at,
        finished,
        state_after,
        version_moved: f.current_version != f.version_checked || f.current_version != f.intention_version,
    }
}

/// How the attempt row is written: closed with the result's outcome, or, if
/// it was already closed, annotated with the late answer.
fn attempt_write(f: &FinishFacts, result: &AttemptResult<'_>, now: DateTime<Utc>) -> AttemptWrite {
    let (command_id, message_id) = result.refs();
    let own = |s: Option<&str>| s.map(str::to_string);
    if f.attempt_ended {
        AttemptWrite::LateAnswer {
            attempt_id: f.attempt_id,
            http_status: result.http_status(),
            command_id: own(command_id),
            message_id: own(message_id),
            note: format!("late answer: {}", result.outcome().as_str()),
        }
    } else {
        AttemptWrite::End {
            attempt_id: f.attempt_id,
            outcome: result.outcome(),
            http_status: result.http_status(),
            command_id: own(command_id),
            message_id: own(message_id),
            error_code: own(result.error_code()),
            error_detail: own(result.detail()),
            at: now,
        }
    }
}

/// A try that never reached processing: back to planned after the backoff
/// (or the channel's Retry-After, if longer), to review once attempts are
/// exhausted, or only noted when the intention is no longer ours.
fn retry_step(
    f: &FinishFacts,
    detail: &str,
    retry_after_secs: Option<u64>,
    said: &dyn Fn(HistorySignal, Option<String>) -> Said,
    retry: &RetryPolicy,
    now: DateTime<Utc>,
) -> (Option<Record>, Finished, Option<DateTime<Utc>>) {
    if f.state != IntentionState::Dispatching {
        // Not ours to re-plan: the lease expired meanwhile, or this was a
        // reconciliation repeat. It stays where it is and the reconciler
        // tries again later.
        let note = format!("retry answer while {}: {detail}", f.state);
        let r = history::note(f.intention_id, f.state, said(HistorySignal::Retry, Some(note)), now);
        return (Some(r), Finished::Late, None);
    }
    // Attempts that never reached the channel are not tries at sending.
    let tries = (f.attempt_count - f.unsent).max(1);
    if tries >= i64::from(retry.max_attempts) {
        let note = format!("{tries} attempt(s) exhausted; last: {detail}");
        let s = said(HistorySignal::NeedsReview, Some(note));
        let r = history::on_signal(f.intention_id, f.state, Signal::NeedsReview, s, now).1;
        return (r, Finished::Review, None);
    }
    let idx = usize::try_from(tries - 1).unwrap_or(0);
    // The channel may ask for a longer wait (Retry-After).
    let next = now + retry.backoff.wait(idx).max(wait_secs(retry_after_secs.unwrap_or(0)));
    let note = format!("{detail}; next try at {}", next.to_rfc3339());
    let s = said(HistorySignal::Release, Some(note));
    let r = history::on_signal(f.intention_id, f.state, Signal::Release, s, now).1;
    (r, Finished::Retry, Some(next))
}

/// The channel refused us (docs/design.md, "A channel that refuses us"):
/// a claimed intention goes back to `planned`, due at once (the paused
/// channel, not a backoff, holds it); one that is no longer ours (a
/// reconciliation repeat of an uncertain one) only gets the note and stays
/// where it is.
fn unsent_step(
    f: &FinishFacts,
    note: String,
    said: &dyn Fn(HistorySignal, Option<String>) -> Said,
    now: DateTime<Utc>,
) -> (Option<Record>, Finished) {
    if f.state == IntentionState::Dispatching {
        let s = said(HistorySignal::NotSent, Some(format!("{note}; waits planned")));
        (
            history::on_signal(f.intention_id, f.state, Signal::Release, s, now).1,
            Finished::NotSent,
        )
    } else {
        let s = said(HistorySignal::NotSent, Some(format!("{note}; stays {}", f.state)));
        (Some(history::note(f.intention_id, f.state, s, now)), Finished::Late)
    }
}

fn moved_or_late(
    f: &FinishFacts,
    signal: Signal,
    said: Said,
    moved: Finished,
    now: DateTime<Utc>,
) -> (Option<Record>, Finished) {
    let (t, r) = history::on_signal(f.intention_id, f.state, signal, said, now);
    (
        r,
        if matches!(t, Transition::Move(_)) {
            moved
        } else {
            Finished::Late
        },
    )
}

/// What the ledger holds about the request that produced the channel's
/// message, when the commitment moved while it was in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceFacts {
    pub intention_id: i64,
    pub key: String,
    /// The intention's state now (after its result was applied).
    pub state: IntentionState,
    /// The version the intention's message speaks of.
    pub intention_version: i64,
    pub appointment: bool,
    /// The commitment's version now.
    pub current_version: i64,
    /// The earliest attempt that may have reached the channel: `(n,
    /// version its validity check read)`.
    pub producer: Option<(i64, i64)>,
    /// The update notice planned for the current version: `(key, state)`.
    pub notice: Option<(String, IntentionState)>,
}

/// The history row that records a version sequence observed in flight, if
/// any. Every attempt records the version its validity check read in its
/// own start transaction, so the request that produced the channel's
/// message was "in flight across a change" exactly when that version is
/// older than the current one: it started before the change was committed.
/// An appointment message whose producing request was validated against
/// the current version although it speaks of an older one passed a check
/// it should have failed: that is recorded as the bug it is
/// ([`HistorySignal::SentAfterChange`]), never as in flight. Orders are
/// exempt: each notice describes a state the order really went through.
pub fn version_sequence(s: &SequenceFacts, now: DateTime<Utc>) -> Option<Record> {
    let (producer, checked) = s.producer?;
    let current = s.current_version;
    if checked == current {
        if !s.appointment || s.intention_version == current {
            return None;
        }
        let note = format!(
            "attempt {producer} was validated against v{current} although this message speaks of v{}: it \
             should never have been sent (a validity bug; please report it)",
            s.intention_version
        );
        let said = Said::new(HistorySignal::SentAfterChange, Cause::Dispatcher)
            .evidence(format!("attempt {producer}"))
            .note(note)
            .version(current);
        return Some(history::note(s.intention_id, s.state, said, now));
    }
    let follow = match &s.notice {
        Some((key, state)) => format!("update notice {key} is {state}"),
        None => "no update notice exists for the new version (policy or appointment past): a person should check"
            .to_string(),
    };
    let note = format!(
        "commitment changed while in flight: checked v{checked}, now v{current} (attempt {producer}, the first that \
         may have reached the channel, started before the change was committed); this message speaks of \
         v{checked} and is not confirmation of v{current}; {follow}"
    );
    let mut said = Said::new(HistorySignal::VersionChangedInFlight, Cause::Dispatcher)
        .note(note)
        .version(current);
    said.evidence = s.notice.as_ref().map(|n| n.0.clone());
    Some(history::note(s.intention_id, s.state, said, now))
}

#[cfg(test)]
#[path = "finish_tests.rs"]
mod tests;
