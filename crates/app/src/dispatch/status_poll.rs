//! The status poll: an acknowledged message (accepted, sent, delivered)
//! that has had no news for `[policy] status_poll_minutes` is asked about,
//! because status webhooks can be lost for good (an engine gives up
//! re-sending the ones we refused, a full disk on our side). The engine is
//! asked for the command by id (`GET /v1/commands/{id}`): a read, never a
//! send. Its answer is evidence, applied by the state machine, so it only
//! ever moves an intention forward; an answer with no news writes nothing
//! and the message is asked about again after a longer silence
//! (`domain::recovery::StatusPoll`). A channel that cannot be asked (the
//! Cloud API) is not polled: its quiet messages become front-desk cases
//! instead (`domain::attention::Clause::Unconfirmed`).

use std::sync::Arc;

use chrono::Utc;
use tokio::task::JoinSet;

use super::recovery;
use crate::channel::{Channel, LookupOutcome};
use crate::dispatch::request::{evidence_for, send_request};
use crate::dispatch::{Db, Result, Settings};
use crate::store::IntentionRow;
use unavez_ledger::api_recovery::RecoveryTx;

/// One pass: takes the messages due for a poll (held until their next
/// poll in the same transaction, so another reconciler skips them), asks
/// the channel about each with bounded concurrency and applies what moves.
/// Returns (asked, moved).
pub(crate) async fn poll_once(db: &Db, settings: &Arc<Settings>, channel: &Arc<dyn Channel>) -> Result<(u64, u64)> {
    if !channel.capabilities().command_lookup {
        return Ok((0, 0));
    }
    let poll = settings.status_poll;
    let limit = settings.batch_size;
    let rows: Vec<IntentionRow> = db
        .call(move |store| {
            Ok(store.write(|tx| {
                let now = tx.clock(Utc::now())?;
                let rows = RecoveryTx::status_polls_due(tx, &poll, now, limit)?;
                let next: Vec<_> = rows
                    .iter()
                    .map(|r| (r.id, poll.next(r.state_changed_at, now)))
                    .collect();
                RecoveryTx::hold_status_polls(tx, &next)?;
                Ok::<_, crate::store::StoreError>(rows)
            })?)
        })
        .await?;
    let asked = rows.len() as u64;
    let mut moved = 0;
    let mut set = JoinSet::new();
    let mut tally = |r: std::result::Result<Result<bool>, tokio::task::JoinError>| match r {
        Ok(Ok(true)) => moved += 1,
        Ok(Ok(false)) => {}
        Ok(Err(e)) => tracing::warn!("applying a status poll's answer failed: {e}"),
        Err(e) => tracing::warn!("a status poll task died: {e}"),
    };
    for row in rows {
        while set.len() >= settings.concurrency {
            if let Some(r) = set.join_next().await {
                tally(r);
            }
        }
        set.spawn(poll_one(db.clone(), channel.clone(), row));
    }
    while let Some(r) = set.join_next().await {
        tally(r);
    }
    Ok((asked, moved))
}

/// Asks the channel about one message; whether its answer moved it.
async fn poll_one(db: Db, channel: Arc<dyn Channel>, row: IntentionRow) -> Result<bool> {
    let Some(command) = row.provider_command_id.clone() else {
        return Ok(false);
    };
    let req = send_request(&row, None, Utc::now());
    match channel.lookup(&req, Some(&command)).await {
        LookupOutcome::Found {
            command_id,
            message_id,
            state,
            detail,
        } => {
            let Some(signal) = evidence_for(state) else {
                return Ok(false);
            };
            let note = format!(
                "status poll after {} without news: the channel reports {state:?}{}",
                row.state,
                detail.map(|d| format!(" ({d})")).unwrap_or_default()
            );
            let id = row.id;
            db.call(move |store| {
                Ok(store.write(|tx| {
                    let refs = (command_id.as_deref(), message_id.as_deref());
                    recovery::poll_evidence(tx, id, signal, refs, &note, Utc::now())
                })?)
            })
            .await
        }
        // Asked again at the next poll: a lookup that fails settles nothing
        // and changes nothing.
        LookupOutcome::NotFound | LookupOutcome::Unavailable { .. } => Ok(false),
    }
}
