//! Reprocessing one operating day, by state — never "everything of that
//! date" (docs/design.md, "Reprocessing a day"):
//!
//! | state | action |
//! |---|---|
//! | planned, due | validity check, then dispatch (or cancel / defer) |
//! | planned, not due / backing off | nothing yet: it waits for its time |
//! | dispatching | in flight elsewhere: left alone (an expired lease becomes uncertain) |
//! | uncertain | reconciliation |
//! | accepted, sent, delivered, read | keep their evidence |
//! | cancelled | stay cancelled |
//! | failed, every attempt ended before reaching the channel, `--state failed` named | back to planned, then dispatch (a technician's action) |
//! | failed, review | stay for a person |
//!
//! The one way back from `failed` is core's explicit exception
//! (`domain::state::replan_failed`): a "failure" that was the channel
//! refusing us (a rejected credential, before unavez told the two apart)
//! or a request that never left. A failed message that may have reached
//! the channel never goes back.
//!
//! The dry run computes exactly this plan in a read transaction and writes
//! nothing. The real run executes it with the dispatcher's and reconciler's
//! own code paths (so an intention with an acknowledged attempt can never be
//! sent again), then records one operator action. Shared by the CLI and the
//! console.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::worker::{Mode, dispatch_loop};
use super::{Db, DispatchError, ReconcileReport, Result, Settings, reconcile_once};
use crate::channel::Channel;
use crate::domain::history::{self, Cause, HistorySignal, Said};
use crate::domain::lifecycle::OperatingDay;
use crate::domain::operator::Role;
use crate::domain::state::{AttemptTrace, IntentionState, replan_failed};
use crate::domain::validity::Validity;
use crate::store::{IntentionRow, OperatorAction, StoreError};

#[path = "reprocess_why.rs"]
mod why;
pub use why::{Because, ReplanRefusal};

/// What reprocessing does (or would do) with one intention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Dispatch,
    Cancel,
    Defer,
    Wait,
    InFlight,
    Reconcile,
    KeepEvidence,
    StayCancelled,
    StayForPerson,
    /// A failed intention whose attempts all ended before anything reached
    /// the channel: back to planned, then dispatched.
    Replan,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Dispatch => "dispatch",
            Action::Cancel => "cancel",
            Action::Defer => "defer",
            Action::Wait => "wait",
            Action::InFlight => "in_flight",
            Action::Reconcile => "reconcile",
            Action::KeepEvidence => "keep_evidence",
            Action::StayCancelled => "stay_cancelled",
            Action::StayForPerson => "stay_for_person",
            Action::Replan => "replan",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Item {
    pub id: i64,
    pub key: String,
    pub state: IntentionState,
    pub action: Action,
    /// Why, in English words an operator can check (logs, `--json`).
    pub why: String,
    /// Why, as facts: what the console and the CLI say in the configured
    /// language and local time.
    pub because: Because,
    /// After a real run: the state the intention ended in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<IntentionState>,
}

/// Who asks, and why (both mandatory: it is an operator action).
#[derive(Debug, Clone)]
pub struct Request {
    pub day: OperatingDay,
    pub states: Vec<IntentionState>,
    pub dry_run: bool,
    pub operator: String,
    /// The operator's role; `None` only for a preview that records
    /// nothing (the console's dry run before the form).
    pub role: Option<Role>,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub day: OperatingDay,
    pub states: Vec<IntentionState>,
    pub dry_run: bool,
    pub items: Vec<Item>,
    /// Count per action (a JSON object `{"dispatch": 3, …}` in the
    /// table's order).
    #[serde(serialize_with = "summary_as_object")]
    pub summary: Vec<(Action, usize)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator_action_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<super::DispatchReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<ReconcileReport>,
}

/// Checks the request before anything runs.
pub fn validate(req: &Request) -> Result<()> {
    if req.reason.trim().is_empty() {
        return Err(DispatchError::Invalid("--reason must not be empty".into()));
    }
    if req.operator.trim().is_empty() {
        return Err(DispatchError::Invalid("--operator must not be empty".into()));
    }
    // Checked before anything is sent: a real run ends in an operator
    // action naming the role, and must not send first and fail to say who.
    if !req.dry_run && req.role.is_none() {
        return Err(DispatchError::Invalid(
            "a reprocess that sends needs the operator's role".into(),
        ));
    }
    Ok(())
}

/// The plan for a day, computed in one read transaction: writes nothing.
pub async fn plan(
    db: &Db,
    settings: &Arc<Settings>,
    day: OperatingDay,
    states: &[IntentionState],
) -> Result<Vec<Item>> {
    let s = settings.clone();
    let states = states.to_vec();
    // Only a run that names `failed` may take a failed message back.
    let replan = states.contains(&IntentionState::Failed);
    db.call(move |store| {
        let now = Utc::now();
        Ok(store.read(|tx| {
            let rows = tx.day_intentions(day, &states)?;
            let mut items = Vec::with_capacity(rows.len());
            for r in rows {
                let (action, because) = match r.state {
                    IntentionState::Planned => planned(tx, &r, &s, now)?,
                    IntentionState::Dispatching => (
                        Action::InFlight,
                        Because::InFlight {
                            owner: r.lease_owner.clone(),
                            until: r.lease_until,
                        },
                    ),
                    IntentionState::Uncertain => (Action::Reconcile, Because::Uncertain),
                    IntentionState::Accepted
                    | IntentionState::Sent
                    | IntentionState::Delivered
                    | IntentionState::Read => (Action::KeepEvidence, Because::Reported { state: r.state }),
                    IntentionState::Cancelled => (
                        Action::StayCancelled,
                        Because::Cancelled {
                            reason: r.state_reason.clone(),
                        },
                    ),
                    IntentionState::Failed if replan => failed(tx, &r)?,
                    IntentionState::Failed | IntentionState::Review => (
                        Action::StayForPerson,
                        Because::ForPerson {
                            state: r.state,
                            reason: r.state_reason.clone(),
                        },
                    ),
                };
                items.push(Item {
                    id: r.id,
                    key: r.key,
                    state: r.state,
                    action,
                    why: because.to_string(),
                    because,
                    result: None,
                });
            }
            Ok::<_, StoreError>(items)
        })?)
    })
    .await
}

fn planned(
    tx: &crate::store::Tx<'_>,
    r: &IntentionRow,
    s: &Settings,
    now: DateTime<Utc>,
) -> std::result::Result<(Action, Because), StoreError> {
    if r.due_at > now {
        return Ok((Action::Wait, Because::NotDue { at: r.due_at }));
    }
    if let Some(t) = r.next_attempt_at
        && t > now
    {
        return Ok((Action::Wait, Because::NextTry { at: t }));
    }
    if tx.acknowledged(r.id)? {
        return Ok((Action::StayForPerson, Because::Acknowledged));
    }
    Ok(match super::claim::evaluate(tx, r, &s.rules, now)?.0 {
        Validity::Valid => (Action::Dispatch, Because::Valid),
        Validity::Cancel { reason, explanation } => (Action::Cancel, Because::Closes { reason, explanation }),
        Validity::Defer { until, why } => (Action::Defer, Because::Deferred { until, why }),
    })
}

/// What the exception makes of a failed intention: back to planned when
/// every attempt ended before reaching the channel, else it stays.
fn failed(tx: &crate::store::Tx<'_>, r: &IntentionRow) -> std::result::Result<(Action, Because), StoreError> {
    let attempts = traces(tx, r.id)?;
    let refs = r.provider_command_id.is_some() || r.provider_message_id.is_some();
    Ok(match replan_failed(r.state, &attempts, refs) {
        Ok(_) => (
            Action::Replan,
            Because::Replan {
                attempts: attempts.len(),
            },
        ),
        Err(why) => (Action::StayForPerson, Because::FailedStays { refused: (&why).into() }),
    })
}

fn traces(tx: &crate::store::Tx<'_>, id: i64) -> std::result::Result<Vec<AttemptTrace>, StoreError> {
    Ok(tx
        .attempts(id)?
        .into_iter()
        .map(|a| AttemptTrace {
            outcome: a.outcome,
            http_status: a.http_status.and_then(|h| u16::try_from(h).ok()),
            error_code: a.error_code,
        })
        .collect())
}

/// Returns the planned-to-replan intentions to `planned` in one write
/// transaction, each checked again by core's exception on what the ledger
/// holds now and recorded in its history with who and why. Returns the
/// ones that went back.
async fn replan(db: &Db, req: &Request, ids: Vec<i64>) -> Result<Vec<i64>> {
    if ids.is_empty() {
        return Ok(ids);
    }
    if req.role != Some(Role::Technician) {
        return Err(DispatchError::Invalid(
            "returning failed messages to planned is a technician's action".into(),
        ));
    }
    let note = format!(
        "{} (technician): {}; every attempt ended before reaching the channel",
        req.operator, req.reason
    );
    db.call(move |store| {
        Ok(store.write(|tx| {
            let now = tx.clock(Utc::now())?;
            let mut back = Vec::with_capacity(ids.len());
            for &id in &ids {
                let i = tx.intention(id)?;
                let refs = i.provider_command_id.is_some() || i.provider_message_id.is_some();
                let Ok(to) = replan_failed(i.state, &traces(tx, id)?, refs) else {
                    continue;
                };
                let said = Said::new(HistorySignal::Replan, Cause::Operator)
                    .evidence("reprocess")
                    .note(note.clone());
                tx.apply_records(&[history::replanned(id, to, said, now)])?;
                tx.set_next_attempt(&[(id, None)], now)?;
                back.push(id);
            }
            Ok::<_, StoreError>(back)
        })?)
    })
    .await
}

/// How far a real run is: intentions acted on (dispatched, cancelled,
/// deferred or reconciled) out of those the plan acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

/// Dry run or real run of a day.
pub async fn run(db: &Db, settings: &Arc<Settings>, channel: &Arc<dyn Channel>, req: &Request) -> Result<Report> {
    run_with_progress(db, settings, channel, req, &|_| {}).await
}

/// [`run`], telling `progress` how far it is (the command line's bar, the
/// console's gauge): once with nothing done, then after every slice of the
/// work, each at most one claim batch, so a long run shows it moves.
pub async fn run_with_progress(
    db: &Db,
    settings: &Arc<Settings>,
    channel: &Arc<dyn Channel>,
    req: &Request,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<Report> {
    validate(req)?;
    let mut items = plan(db, settings, req.day, &req.states).await?;
    let mut report = Report {
        day: req.day,
        states: req.states.clone(),
        dry_run: req.dry_run,
        summary: summarize(&items),
        items: Vec::new(),
        operator_action_id: None,
        dispatch: None,
        reconcile: None,
    };
    if req.dry_run {
        report.items = items;
        return Ok(report);
    }
    let to_replan: Vec<i64> = items
        .iter()
        .filter(|i| i.action == Action::Replan)
        .map(|i| i.id)
        .collect();
    let replanned = replan(db, req, to_replan).await?;
    let to_claim: Vec<i64> = items
        .iter()
        .filter(|i| matches!(i.action, Action::Dispatch | Action::Cancel | Action::Defer))
        .map(|i| i.id)
        .chain(replanned)
        .collect();
    let to_reconcile: Vec<i64> = items
        .iter()
        .filter(|i| i.action == Action::Reconcile)
        .map(|i| i.id)
        .collect();
    let total = to_claim.len() + to_reconcile.len();
    let mut done = 0;
    progress(Progress { done, total });
    // Slices of at most one claim batch (and at least what runs at once),
    // each run to its end before the next: the same code paths as one
    // long run, with a point between slices to say how far it is.
    let slice = (settings.batch_size as usize).max(settings.concurrency).max(1);
    for ids in to_claim.chunks(slice) {
        let d = dispatch_loop(
            db.clone(),
            settings.clone(),
            channel.clone(),
            tokio_util::sync::CancellationToken::new(),
            Mode::Ids(ids.to_vec()),
            super::Control::new(),
        )
        .await?;
        add_dispatch(report.dispatch.get_or_insert_with(Default::default), &d);
        done += ids.len();
        progress(Progress { done, total });
        if d.channel_paused.is_some() {
            // The channel refuses us: the rest stays planned, and another
            // slice would only be refused again.
            break;
        }
    }
    for ids in to_reconcile.chunks(slice) {
        let r = reconcile_once(db, settings, channel, Some(ids.to_vec())).await?;
        report.reconcile.get_or_insert_with(Default::default).merge(&r);
        done += ids.len();
        progress(Progress { done, total });
    }
    // Final states, and the operator action that explains them.
    let ids: Vec<i64> = items.iter().map(|i| i.id).collect();
    let (states, action_id) = record(db, req, &report.summary, ids).await?;
    for (item, st) in items.iter_mut().zip(states) {
        item.result = Some(st);
    }
    report.items = items;
    report.operator_action_id = Some(action_id);
    Ok(report)
}

/// Adds one slice's dispatch counts to the run's.
fn add_dispatch(sum: &mut super::DispatchReport, d: &super::DispatchReport) {
    sum.claimed += d.claimed;
    sum.accepted += d.accepted;
    sum.failed += d.failed;
    sum.uncertain += d.uncertain;
    sum.retried += d.retried;
    sum.review += d.review;
    sum.cancelled += d.cancelled;
    sum.deferred += d.deferred;
    sum.guarded += d.guarded;
    sum.late += d.late;
    sum.not_sent += d.not_sent;
    sum.abandoned += d.abandoned;
    sum.store_errors += d.store_errors;
    if d.channel_paused.is_some() {
        sum.channel_paused = d.channel_paused.clone();
    }
}

fn summary_as_object<S: serde::Serializer>(v: &[(Action, usize)], s: S) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(v.len()))?;
    for (a, n) in v {
        m.serialize_entry(a.as_str(), n)?;
    }
    m.end()
}

fn summarize(items: &[Item]) -> Vec<(Action, usize)> {
    let order = [
        Action::Dispatch,
        Action::Cancel,
        Action::Defer,
        Action::Wait,
        Action::InFlight,
        Action::Reconcile,
        Action::KeepEvidence,
        Action::StayCancelled,
        Action::StayForPerson,
        Action::Replan,
    ];
    order
        .into_iter()
        .map(|a| (a, items.iter().filter(|i| i.action == a).count()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Reads the final states of `ids` and records the operator action of a
/// real run, in one write transaction.
async fn record(
    db: &Db,
    req: &Request,
    summary: &[(Action, usize)],
    ids: Vec<i64>,
) -> Result<(Vec<IntentionState>, i64)> {
    let summary_text = summary
        .iter()
        .map(|(a, n)| format!("{}={n}", a.as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    let scope = format!(
        "day={} states={}",
        req.day,
        if req.states.is_empty() {
            "all".to_string()
        } else {
            req.states.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
        }
    );
    let role = req
        .role
        .ok_or_else(|| DispatchError::Invalid("a reprocess that sends needs the operator's role".into()))?;
    let (operator, reason) = (req.operator.clone(), req.reason.clone());
    db.call(move |store| {
        Ok(store.write(|tx| {
            let mut states = Vec::with_capacity(ids.len());
            for id in &ids {
                states.push(tx.intention(*id)?.state);
            }
            let action_id = tx.record_operator_action(
                &OperatorAction {
                    operator: &operator,
                    role: role.as_str(),
                    action: "reprocess",
                    intention_id: None,
                    commitment_id: None,
                    scope: Some(&scope),
                    reason: &reason,
                    result: "done",
                    detail: Some(&summary_text),
                },
                Utc::now(),
            )?;
            Ok::<_, StoreError>((states, action_id))
        })?)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(dry_run: bool, role: Option<Role>) -> Request {
        Request {
            day: "2026-12-01".parse().unwrap(),
            states: vec![IntentionState::Failed],
            dry_run,
            operator: "tecnica".into(),
            role,
            reason: "corte de luz".into(),
        }
    }

    #[test]
    fn a_run_that_sends_needs_a_role_before_anything_leaves() {
        assert!(validate(&request(true, None)).is_ok(), "a preview records nothing");
        assert!(validate(&request(false, Some(Role::Technician))).is_ok());
        let err = validate(&request(false, None)).unwrap_err();
        assert!(err.to_string().contains("role"), "{err}");
    }
}
