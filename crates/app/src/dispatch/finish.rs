//! Finishing attempts: what the channel answered, recorded for a whole
//! batch in one transaction. The ledger reads the facts of every attempt
//! at once; `unavez-core` decides each one (`domain::finish`: retry,
//! review or late, the history row, the next try); the ledger writes the
//! rows. Also the attempts the pre-send check stopped: closed as
//! `not_sent`, and a claim still held goes straight back through validity.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::claim::evaluate;
use super::presend::Holder;
use crate::domain::attempt::{AttemptOutcome, AttemptResult, Finished, RetryPolicy};
use crate::domain::finish::{self, AttemptWrite, FinishPlan};
use crate::domain::history::{self, Cause, HistorySignal, Said};
use crate::domain::key::Purpose;
use crate::domain::state::{IntentionState, Signal};
use crate::domain::validity::{Rules, Validity};
use crate::store::{LedgerTx, StoreError};

/// Records what the channel answered for each attempt and moves its
/// intention accordingly; returns what each did, in order. When the
/// commitment changed while an attempt was in flight, both versions are
/// written to history: the message speaks of the version checked, never
/// of the new one.
pub fn finish_attempts<L: LedgerTx + ?Sized>(
    tx: &L,
    results: &[(i64, AttemptResult<'_>)],
    cause: Cause,
    retry: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<Vec<Finished>, StoreError> {
    let now = tx.clock(now)?;
    let ids: Vec<i64> = results.iter().map(|r| r.0).collect();
    let facts = tx.finish_facts(&ids)?;
    // Two answers for one intention in a batch are decided in order, each
    // on the state the previous one leaves.
    let mut state_now: HashMap<i64, IntentionState> = HashMap::new();
    let plans: Vec<FinishPlan> = facts
        .into_iter()
        .zip(results)
        .map(|(mut f, (_, result))| {
            if let Some(s) = state_now.get(&f.intention_id) {
                f.state = *s;
            }
            let plan = finish::decide(&f, result, cause, retry, now);
            state_now.insert(f.intention_id, plan.state_after);
            plan
        })
        .collect();
    write_plans(tx, &plans, now)?;
    Ok(plans.iter().map(|p| p.finished).collect())
}

/// [`finish_attempts`] for one attempt.
pub fn finish_attempt<L: LedgerTx + ?Sized>(
    tx: &L,
    attempt_id: i64,
    result: &AttemptResult<'_>,
    cause: Cause,
    retry: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<Finished, StoreError> {
    Ok(finish_attempts(tx, &[(attempt_id, result.clone())], cause, retry, now)?[0])
}

fn write_plans<L: LedgerTx + ?Sized>(tx: &L, plans: &[FinishPlan], now: DateTime<Utc>) -> Result<(), StoreError> {
    let attempts: Vec<AttemptWrite> = plans.iter().map(|p| p.attempt.clone()).collect();
    tx.write_attempts(&attempts)?;
    let refs: Vec<_> = plans
        .iter()
        .filter_map(|p| p.refs.clone().map(|(c, m)| (p.intention_id, c, m)))
        .collect();
    let records: Vec<_> = plans.iter().filter_map(|p| p.record.clone()).collect();
    tx.apply_results(&records, &refs)?;
    let retries: Vec<_> = plans
        .iter()
        .filter_map(|p| p.next_attempt_at.map(|t| (p.intention_id, Some(t))))
        .collect();
    tx.set_next_attempt(&retries, now)?;
    let notices = [Purpose::Update.slug(), Purpose::Cancellation.slug()];
    let notices: Vec<&str> = notices.iter().map(String::as_str).collect();
    for p in plans.iter().filter(|p| p.version_moved) {
        let facts = tx.sequence_facts(p.intention_id, &notices)?;
        if let Some(r) = finish::version_sequence(&facts, now) {
            if r.said.signal == HistorySignal::SentAfterChange {
                tracing::error!(
                    "intention {} ({}): {}",
                    facts.intention_id,
                    facts.key,
                    r.said.note.as_deref().unwrap_or_default()
                );
            }
            tx.apply_records(&[r])?;
        }
    }
    // A status webhook may have arrived before this answer told us the
    // message id: apply it now, after our own evidence, in received order.
    let with_refs: Vec<i64> = plans
        .iter()
        .filter(|p| p.refs.is_some())
        .map(|p| p.intention_id)
        .collect();
    crate::status::apply_pending(tx, &with_refs, now)?;
    Ok(())
}

/// The pre-send check stopped this attempt: nothing left. The attempt is
/// closed as `not_sent`. A claim still held by `holder` goes straight back
/// through validity, with the same rules as a claim (cancelled with its
/// reason, deferred, or planned and due again); a repeat leaves the
/// intention uncertain and due for the next reconciliation pass, whose own
/// validity check decides. Anything else only gets a history note: it is
/// no longer this holder's to move.
pub fn abandon_unsent<L: LedgerTx + ?Sized>(
    tx: &L,
    attempt_id: i64,
    holder: &Holder,
    why: &str,
    rules: &Rules,
    now: DateTime<Utc>,
) -> Result<Finished, StoreError> {
    let f = tx
        .finish_facts(&[attempt_id])?
        .pop()
        .ok_or(StoreError::NoAttempt(attempt_id))?;
    let detail = format!("not sent: {why}");
    if !f.attempt_ended {
        tx.write_attempts(&[AttemptWrite::End {
            attempt_id,
            outcome: AttemptOutcome::NotSent,
            http_status: None,
            command_id: None,
            message_id: None,
            error_code: None,
            error_detail: Some(detail.clone()),
            at: now,
        }])?;
    }
    let i = tx.intention(f.intention_id)?;
    let cause = match holder {
        Holder::Lease(_) => Cause::Dispatcher,
        Holder::Reconciler => Cause::Reconciler,
    };
    let said = |s, note: String| Said::new(s, cause).evidence(format!("attempt {}", f.n)).note(note);
    match holder {
        Holder::Lease(owner)
            if i.state == IntentionState::Dispatching && i.lease_owner.as_deref() == Some(owner.as_str()) =>
        {
            let note = format!("{detail}; back through validity");
            let (_, r) = history::on_signal(i.id, i.state, Signal::Release, said(HistorySignal::NotSent, note), now);
            tx.apply_records(&r.into_iter().collect::<Vec<_>>())?;
            tx.set_next_attempt(&[(i.id, None)], now)?;
            revalidate(tx, i.id, rules, now)?;
        }
        Holder::Reconciler if i.state == IntentionState::Uncertain => {
            tx.apply_records(&[history::note(i.id, i.state, said(HistorySignal::NotSent, detail), now)])?;
            tx.set_next_attempt(&[(i.id, Some(now))], now)?;
        }
        _ => {
            let note = format!("{detail}; the intention is {} and no longer this sender's", i.state);
            tx.apply_records(&[history::note(
                i.id,
                i.state,
                said(HistorySignal::NotSentLate, note),
                now,
            )])?;
        }
    }
    Ok(Finished::NotSent)
}

/// A planned intention released by the pre-send check meets validity
/// right away, so the reason it stopped is recorded now, not at some
/// later claim.
fn revalidate<L: LedgerTx + ?Sized>(tx: &L, id: i64, rules: &Rules, now: DateTime<Utc>) -> Result<(), StoreError> {
    let i = tx.intention(id)?;
    let (verdict, version, _) = evaluate(tx, &i, rules, now)?;
    let said = |s| {
        Said::new(s, Cause::Dispatcher)
            .evidence("validity_before_send")
            .version(version)
    };
    match verdict {
        Validity::Cancel { reason, explanation } => {
            let (_, r) = history::on_signal(
                id,
                i.state,
                Signal::Cancel(reason),
                said(HistorySignal::Cancel).note(explanation),
                now,
            );
            tx.apply_records(&r.into_iter().collect::<Vec<_>>())?;
        }
        Validity::Defer { until, why } => {
            tx.set_next_attempt(&[(id, Some(until))], now)?;
            let note = format!("{why} (until {})", until.to_rfc3339());
            tx.apply_records(&[history::note(
                id,
                i.state,
                said(HistorySignal::Deferred).note(note),
                now,
            )])?;
        }
        // Still valid (e.g. an order notice): due again now, and the next
        // claim checks it once more.
        Validity::Valid => {}
    }
    Ok(())
}

#[cfg(test)]
#[path = "finish_tests.rs"]
mod tests;
