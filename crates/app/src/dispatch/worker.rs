//! The dispatch loop: claim a batch (one transaction, one fsync, validity
//! checked inside it, attempts recorded as started), send each claimed
//! intention with bounded concurrency — each one passing the pre-send check
//! right before its request leaves — and record the results in batches.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use super::claim::{ClaimDecision, Claimant, Claimed, claim_batch};
use super::finish::{abandon_unsent, finish_attempts};
use super::gate::Gate;
use super::presend::Clearance;
use super::presend::Holder;
use super::request::{attempt_result, send_request};
use super::{Control, Db, DispatchError, Result, Settings};
use crate::channel::{Channel, SendOutcome};
use crate::store::{Cause, ClaimScope, Finished, StoreError, Tx};

/// Counts of what one dispatcher run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DispatchReport {
    pub claimed: u64,
    pub accepted: u64,
    pub failed: u64,
    pub uncertain: u64,
    pub retried: u64,
    pub review: u64,
    pub cancelled: u64,
    pub deferred: u64,
    /// Not claimed: an earlier attempt was acknowledged (sent to review).
    pub guarded: u64,
    /// Results that arrived after the intention had moved on.
    pub late: u64,
    /// Stopped by the pre-send check (the commitment or the lease moved
    /// after the claim): the request never left.
    pub not_sent: u64,
    /// Sends still in flight at shutdown, recorded as uncertain.
    pub abandoned: u64,
    /// Store errors survived (the loop retries after the poll interval).
    pub store_errors: u64,
    /// The channel refused us and sending on it is paused (a one-shot run
    /// ends there; `serve` probes and resumes by itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel_paused: Option<crate::domain::fault::ChannelPause>,
}

impl DispatchReport {
    /// Counts a claim decision; a claimed intention comes back to be sent.
    fn add_claim(&mut self, d: ClaimDecision) -> Option<Claimed> {
        match d {
            ClaimDecision::Claimed(c) => {
                self.claimed += 1;
                return Some(*c);
            }
            ClaimDecision::Cancelled { .. } => self.cancelled += 1,
            ClaimDecision::Deferred { .. } => self.deferred += 1,
            ClaimDecision::Guarded { .. } => self.guarded += 1,
        }
        None
    }

    fn add_finished(&mut self, f: Finished) {
        match f {
            Finished::Accepted | Finished::Sent | Finished::Delivered | Finished::Read => self.accepted += 1,
            Finished::Failed => self.failed += 1,
            Finished::Withdrawn => self.cancelled += 1,
            Finished::Uncertain => self.uncertain += 1,
            Finished::Retry => self.retried += 1,
            Finished::Review => self.review += 1,
            Finished::Late => self.late += 1,
            Finished::NotSent => self.not_sent += 1,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Mode {
    /// Until told to stop (serve, console).
    Forever,
    /// Until nothing is due and nothing is in flight (cron, tests).
    UntilIdle,
    /// One claimed batch and its results.
    Once,
    /// Only these intentions, until none of them is due (reprocess).
    Ids(Vec<i64>),
}

/// What became of one claimed send.
#[derive(Debug)]
enum Sent {
    /// The request left; the channel's answer.
    Answered(SendOutcome),
    /// The pre-send check stopped it; why.
    NotSent(String),
}

type Done = (i64, Sent);

/// Claims one batch, sends it and records the results (plus the same
/// reconciliation passes as [`dispatch_until_idle`]).
pub async fn dispatch_once(
    db: Db,
    settings: Arc<Settings>,
    channel: Arc<dyn Channel>,
) -> Result<(DispatchReport, super::ReconcileReport)> {
    between_reconciliations(db, settings, channel, Mode::Once).await
}

/// Dispatches until nothing is due and nothing is in flight; also expires
/// dead leases first and runs one reconciliation pass at the end, so that a
/// cron job leaves the ledger as settled as it can be right now.
pub async fn dispatch_until_idle(
    db: Db,
    settings: Arc<Settings>,
    channel: Arc<dyn Channel>,
) -> Result<(DispatchReport, super::ReconcileReport)> {
    between_reconciliations(db, settings, channel, Mode::UntilIdle).await
}

/// A one-shot dispatch run (`mode` ends on its own) with a reconciliation
/// pass before it (expired leases first) and one after it.
async fn between_reconciliations(
    db: Db,
    settings: Arc<Settings>,
    channel: Arc<dyn Channel>,
    mode: Mode,
) -> Result<(DispatchReport, super::ReconcileReport)> {
    let never = CancellationToken::new();
    let mut rec = super::reconcile_once(&db, &settings, &channel, None).await?;
    let report = dispatch_loop(
        db.clone(),
        settings.clone(),
        channel.clone(),
        never,
        mode,
        Control::new(),
    )
    .await?;
    let mut more = super::reconcile_once(&db, &settings, &channel, None).await?;
    (more.polled, more.polled_moved) = super::reconcile::status_poll::poll_once(&db, &settings, &channel).await?;
    rec.merge(&more);
    Ok((report, rec))
}

pub(crate) async fn dispatch_loop(
    db: Db,
    settings: Arc<Settings>,
    channel: Arc<dyn Channel>,
    stop: CancellationToken,
    mode: Mode,
    ctl: Control,
) -> Result<DispatchReport> {
    let mut report = DispatchReport::default();
    // This session's statements name their rows by key; planned so, they
    // cost the same on a fresh ledger as on an analyzed one (see
    // `Store::plan_by_keys`). A ledger that is down fails here as it
    // fails the first claim: the loop below retries and reports.
    if let Err(e) = db.call(|s| Ok(s.plan_by_keys()?)).await {
        tracing::warn!("could not set the dispatcher's session to plan by keys: {e}");
    }
    // Paused: no new claims; in flight finishes (see `control.rs`).
    let mut paused = ctl.paused_rx();
    let mut claimed_once = false;
    let mut inflight: JoinSet<Done> = JoinSet::new();
    // Which attempt each task carries, to record it if the task dies.
    let mut attempts: HashMap<Id, i64> = HashMap::new();
    // Reprocessing walks its list once, a batch at a time: an id is offered
    // to one claim and then dropped (a retry comes back later, not now).
    let mut queue: std::collections::VecDeque<i64> = match &mode {
        Mode::Ids(ids) => ids.iter().copied().collect(),
        _ => Default::default(),
    };
    // Answers collected and not recorded yet: written at the top of the
    // next turn, in the same transaction as the claim that refills the
    // freed slots (one commit and one fsync for both), or alone.
    let mut results = Results::default();
    // A channel that refuses us pauses claims until a probe passes.
    let mut gate = Gate::new(&settings);
    // A ledger that is down fails every claim, every poll.
    let mut limit = super::log_limit::LogLimit::default();
    // The last claim took all it asked for: more is due than fits, so the
    // next claim waits for a refill's worth of free slots (see
    // [`refill_floor`]).
    let mut backlog = false;
    loop {
        if stop.is_cancelled() {
            break;
        }
        let one_shot = !matches!(mode, Mode::Forever);
        if gate.ends_run(&channel, &ctl, one_shot, inflight.is_empty()).await {
            break;
        }
        let free = settings.concurrency.saturating_sub(inflight.len());
        let mut full_batch = false;
        let mut claimed_any = false;
        // Claims stop while an operator paused the dispatcher or the
        // channel refused us.
        let held = *paused.borrow_and_update() || gate.down(&ctl);
        // With a backlog, claiming the one or two slots each finished send
        // frees costs a whole transaction (and its commit) per handful of
        // messages; waiting until a refill's worth is free makes each
        // commit carry many claims and results. Without one (the normal
        // trickle of due messages), claims go at once: no added latency.
        let refill = !backlog || inflight.is_empty() || free >= refill_floor(&settings);
        if free > 0 && !held && !refill && !matches!(mode, Mode::Once) {
            // Only the answers this wait collected: the earlier ones were
            // noted when they came.
            let seen = results.done.len();
            wait_for_sends(&mut inflight, &mut attempts, &mut results, None, &stop).await;
            gate.note(results.answers_from(seen), &ctl);
            continue;
        }
        if free > 0 && !held && !(matches!(mode, Mode::Once) && claimed_once) {
            claimed_once = true;
            let want = u32::try_from(free).unwrap_or(u32::MAX).min(settings.batch_size);
            let scope = match &mode {
                Mode::Ids(_) => ClaimScope::Ids(queue.drain(..queue.len().min(want as usize)).collect()),
                _ => ClaimScope::Due,
            };
            let (recorded, claimed) = claim(&db, &settings, &channel, &scope, want, results.take()).await;
            recorded.note(&mut report, &ctl);
            match claimed {
                Ok(decisions) => {
                    limit.clear();
                    if !decisions.is_empty() {
                        ctl.bump();
                    }
                    full_batch = decisions.len() as u32 >= want || (matches!(mode, Mode::Ids(_)) && !queue.is_empty());
                    claimed_any = !decisions.is_empty() || !queue.is_empty();
                    backlog = full_batch;
                    for d in decisions {
                        if let Some(c) = report.add_claim(d) {
                            // Chaos kill point: claimed and attempt recorded (one
                            // committed transaction), nothing sent yet.
                            #[cfg(feature = "failpoints")]
                            crate::failpoint::hit("after_claim");
                            let attempt_id = c.attempt_id;
                            let h = inflight.spawn(send_one(channel.clone(), c, db.clone(), settings.clone()));
                            attempts.insert(h.id(), attempt_id);
                        }
                    }
                }
                Err(e) => {
                    ctl.error(&e);
                    report.store_errors += 1;
                    crate::warn_limited!(limit, "claim failed, retrying after the poll interval: {e}");
                }
            }
        } else if !results.is_empty() {
            record(&db, &settings, results.take(), &mut report, &ctl).await;
        }
        if inflight.is_empty() {
            if claimed_any && !matches!(mode, Mode::Once) {
                continue;
            }
            if !matches!(mode, Mode::Forever) {
                break;
            }
            let wait = gate.until_probe(&ctl).map_or(settings.poll, |p| p.min(settings.poll));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.cancelled() => {}
                _ = paused.changed() => {}
            }
            continue;
        }
        if full_batch && inflight.len() < settings.concurrency {
            // More may be due right now: keep filling before waiting.
            continue;
        }
        let poll = (!full_batch).then_some(settings.poll);
        wait_for_sends(&mut inflight, &mut attempts, &mut results, poll, &stop).await;
        gate.note(results.answers(), &ctl);
    }
    record(&db, &settings, results.take(), &mut report, &ctl).await;
    report.channel_paused = ctl.channel_hold().map(|h| h.pause);
    drain(&db, &settings, &mut inflight, &mut attempts, &mut report, &ctl).await;
    Ok(report)
}

/// Free slots a claim waits for while more is due than fits: half of
/// what one claim may take, so that a commit carries a batch rather than
/// the few sends that finished during the previous one, while the other
/// half stays in flight.
fn refill_floor(s: &Settings) -> usize {
    (s.concurrency.min(s.batch_size as usize) / 2).max(1)
}

/// Waits until a send finishes (then collects every finished one), the
/// poll interval passes (`None`: more is due now, wait for sends only) or
/// the run is told to stop.
async fn wait_for_sends(
    inflight: &mut JoinSet<Done>,
    attempts: &mut HashMap<Id, i64>,
    results: &mut Results,
    poll: Option<std::time::Duration>,
    stop: &CancellationToken,
) {
    tokio::select! {
        first = inflight.join_next_with_id() => {
            collect(first, attempts, &mut results.done, &mut results.dead);
            while let Some(next) = inflight.try_join_next_with_id() {
                collect(Some(next), attempts, &mut results.done, &mut results.dead);
            }
        }
        _ = tokio::time::sleep(poll.unwrap_or_default()), if poll.is_some() => {}
        _ = stop.cancelled() => {}
    }
}

/// Answers of finished sends, and the attempts of send tasks that died,
/// waiting to be recorded.
#[derive(Debug, Default)]
struct Results {
    done: Vec<Done>,
    dead: Vec<i64>,
    /// Why a dead task's attempt is uncertain.
    why: Option<&'static str>,
}

impl Results {
    fn is_empty(&self) -> bool {
        self.done.is_empty() && self.dead.is_empty()
    }

    fn take(&mut self) -> Results {
        std::mem::take(self)
    }

    /// The channel's answers among the results.
    fn answers(&self) -> impl Iterator<Item = &SendOutcome> {
        self.answers_from(0)
    }

    /// The channel's answers among the results from the `start`th on.
    fn answers_from(&self, start: usize) -> impl Iterator<Item = &SendOutcome> {
        self.done[start.min(self.done.len())..]
            .iter()
            .filter_map(|(_, sent)| match sent {
                Sent::Answered(o) => Some(o),
                Sent::NotSent(_) => None,
            })
    }

    fn why(&self) -> &'static str {
        self.why.unwrap_or("the send task ended without an answer")
    }

    /// Records the answers (one set-based write, in order), the few the
    /// pre-send check stopped one by one, and the dead tasks' attempts as
    /// uncertain, inside `tx`.
    fn write(&self, tx: &Tx<'_>, s: &Settings, now: DateTime<Utc>) -> std::result::Result<Vec<Finished>, StoreError> {
        let answered: Vec<(i64, _)> = self
            .done
            .iter()
            .filter_map(|(a, sent)| match sent {
                Sent::Answered(outcome) => Some((*a, attempt_result(outcome))),
                Sent::NotSent(_) => None,
            })
            .collect();
        let mut out = finish_attempts(tx, &answered, Cause::Dispatcher, &s.retry, now)?;
        let holder = Holder::Lease(s.owner.clone());
        for (attempt_id, sent) in &self.done {
            if let Sent::NotSent(why) = sent {
                out.push(abandon_unsent(tx, *attempt_id, &holder, why, &s.rules, now)?);
            }
        }
        super::reconcile::recovery::abandon_attempts(tx, &self.dead, self.why(), now)?;
        Ok(out)
    }
}

/// What recording some results did: their outcomes, or the error (the
/// leases then expire into `uncertain`: safe, only slower).
struct Recorded {
    outcome: Result<Vec<Finished>>,
    dead: u64,
}

impl Recorded {
    fn note(self, report: &mut DispatchReport, ctl: &Control) {
        match self.outcome {
            Ok(finished) => {
                if finished.is_empty() && self.dead == 0 {
                    return;
                }
                // Chaos kill point: results committed.
                #[cfg(feature = "failpoints")]
                crate::failpoint::hit("after_result");
                ctl.bump();
                for f in finished {
                    report.add_finished(f);
                }
                report.abandoned += self.dead;
            }
            Err(e) => {
                ctl.error(&e);
                report.store_errors += 1;
                tracing::warn!("recording results failed; their leases will expire into uncertain: {e}");
            }
        }
    }
}

/// Records `results` and claims up to `want` in one transaction (one
/// commit, one fsync). Should the claim fail, the results are recorded
/// alone, so a claim's error never costs an answer.
async fn claim(
    db: &Db,
    settings: &Arc<Settings>,
    channel: &Arc<dyn Channel>,
    scope: &ClaimScope,
    want: u32,
    results: Results,
) -> (Recorded, Result<Vec<ClaimDecision>>) {
    let s = settings.clone();
    let kind = channel.kind();
    let scope = scope.clone();
    let dead = results.dead.len() as u64;
    let call = db
        .call(move |store| {
            let who = Claimant {
                owner: &s.owner,
                channel: kind,
                lease: s.lease,
                rules: &s.rules,
            };
            let now = Utc::now();
            let both = store.write(|tx| {
                let finished = results.write(tx, &s, now)?;
                let decisions = claim_batch(tx, &scope, who, want, now)?;
                Ok::<_, StoreError>((finished, decisions))
            });
            Ok(match both {
                Ok((finished, decisions)) => (Ok(finished), Ok(decisions)),
                Err(e) if results.is_empty() => (Ok(Vec::new()), Err(e)),
                Err(e) => {
                    let alone = store.write(|tx| results.write(tx, &s, Utc::now()));
                    (alone.map_err(Into::into), Err(e))
                }
            })
        })
        .await;
    match call {
        Ok((recorded, claimed)) => (
            Recorded {
                outcome: recorded,
                dead,
            },
            claimed.map_err(Into::into),
        ),
        // The database task itself failed: nothing is known to be written.
        Err(e) => {
            let again = DispatchError::Worker(e.to_string());
            (Recorded { outcome: Err(e), dead }, Err(again))
        }
    }
}

async fn send_one(channel: Arc<dyn Channel>, c: Claimed, db: Db, settings: Arc<Settings>) -> Done {
    // Test point: hold the claimed message here, as a busy runtime or a
    // slow store can, so the world may move before it leaves.
    #[cfg(feature = "failpoints")]
    if let Some(crate::failpoint::Action::Sleep(ms)) = crate::failpoint::hit("before_send") {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    let holder = Holder::Lease(settings.owner.clone());
    if let Clearance::Stop(why) = db.presend().check(c.attempt_id, holder).await {
        return (c.attempt_id, Sent::NotSent(why));
    }
    let req = send_request(&c.intention, c.contact.as_ref(), Utc::now());
    let outcome = channel.send(&req).await;
    // Chaos kill point: the channel answered, the result is not recorded.
    #[cfg(feature = "failpoints")]
    crate::failpoint::hit("after_send");
    (c.attempt_id, Sent::Answered(outcome))
}

fn collect(
    joined: Option<std::result::Result<(Id, Done), tokio::task::JoinError>>,
    attempts: &mut HashMap<Id, i64>,
    done: &mut Vec<Done>,
    dead: &mut Vec<i64>,
) {
    match joined {
        Some(Ok((id, d))) => {
            attempts.remove(&id);
            done.push(d);
        }
        Some(Err(e)) => {
            if let Some(a) = attempts.remove(&e.id()) {
                dead.push(a);
            }
        }
        None => {}
    }
}

/// Records finished attempts in one transaction of their own; a task that
/// died (panic, abort) leaves its intention uncertain, never planned.
async fn record(db: &Db, settings: &Arc<Settings>, results: Results, report: &mut DispatchReport, ctl: &Control) {
    if results.is_empty() {
        return;
    }
    let s = settings.clone();
    let dead = results.dead.len() as u64;
    let outcome = db
        .call(move |store| Ok(store.write(|tx| results.write(tx, &s, Utc::now()))?))
        .await;
    Recorded { outcome, dead }.note(report, ctl);
}

/// Shutdown: wait for in-flight sends up to the grace period, then record
/// the rest as uncertain (they may have been processed).
async fn drain(
    db: &Db,
    settings: &Arc<Settings>,
    inflight: &mut JoinSet<Done>,
    attempts: &mut HashMap<Id, i64>,
    report: &mut DispatchReport,
    ctl: &Control,
) {
    let deadline = tokio::time::Instant::now() + settings.shutdown_grace;
    let mut results = Results {
        why: Some("shutdown while the send was in flight: it may have been processed"),
        ..Results::default()
    };
    while !inflight.is_empty() {
        match tokio::time::timeout_at(deadline, inflight.join_next_with_id()).await {
            Ok(j) => collect(j, attempts, &mut results.done, &mut results.dead),
            Err(_) => break,
        }
    }
    inflight.abort_all();
    while let Some(j) = inflight.join_next_with_id().await {
        collect(Some(j), attempts, &mut results.done, &mut results.dead);
    }
    results.dead.extend(attempts.drain().map(|(_, a)| a));
    record(db, settings, results, report, ctl).await;
}
