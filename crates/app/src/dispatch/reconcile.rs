//! The reconciler: turns unknown outcomes into evidence, never into a blind
//! resend.
//!
//! 1. Expired leases: a `dispatching` intention whose worker died with an
//!    attempt open becomes `uncertain` (the request may have gone out).
//! 2. Each uncertain intention is resolved according to what its channel
//!    can prove ([`Capabilities`]):
//!    - lookup available and a command id known → ask where the command is;
//!    - idempotent keys → repeat with the same key and content (the engine
//!      returns the original command and its state, no second message).
//!      If the first request never arrived, the repeat *is* the first
//!      delivery, so it is a send like any other: validity is checked in the
//!      transaction that records its attempt and again right before it
//!      leaves ([`super::presend`]). No longer valid → not sent: a known
//!      engine command is withdrawn, else a person reviews (`repeat.rs`);
//!    - an engine-reported *ambiguous* command is never repeated: it waits
//!      for the engine's own resolution (webhook or lookup);
//!    - no idempotency (Cloud API) → wait for a status webhook; after the
//!      policy window → `review`.
//!
//!    A try that settles nothing is recorded in history (`reconcile`) and
//!    rescheduled with the backoff policy; too many → `review`.
//! 3. Attempts left open on intentions that moved on without them (their
//!    answer was lost while the ledger was down, a webhook moved the
//!    intention since) are closed with what is known (`recovery.rs`).
//! 4. Acknowledged messages without news for `status_poll_minutes` are
//!    asked about (`status_poll.rs`).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::log_limit::LogLimit;
use super::request::{evidence_for, send_request};
use super::{Db, Result, Settings};
use crate::channel::{Capabilities, Channel, LookupOutcome};
use crate::domain::attempt::AttemptOutcome;
use crate::domain::reconcile;
use crate::domain::recovery::ToReview;
use crate::store::{Finished, UncertainItem};

#[path = "recovery.rs"]
pub(crate) mod recovery;
#[path = "repeat.rs"]
mod repeat;
#[path = "status_poll.rs"]
pub(crate) mod status_poll;
use repeat::repeat;

/// Counts of what reconciliation did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReconcileReport {
    /// Leases found expired and turned into `uncertain`.
    pub expired_leases: u64,
    /// Attempts left open on intentions that moved on without them,
    /// closed with what is known.
    pub orphans_closed: u64,
    /// Acknowledged messages asked about after `status_poll_minutes`
    /// without news, and how many of those the answer moved.
    pub polled: u64,
    pub polled_moved: u64,
    pub examined: u64,
    /// Settled by evidence (accepted, sent, delivered, read, failed, withdrawn).
    pub resolved: u64,
    /// Still uncertain, tried again later.
    pub waiting: u64,
    pub review: u64,
    /// Repeats sent with the same key to an idempotent channel.
    pub repeats: u64,
    /// Repeats not sent because validity refused them (withdrawn from the
    /// engine, or handed to a person).
    pub repeats_refused: u64,
    /// Repeats the pre-send check stopped at the last moment.
    pub repeats_not_sent: u64,
    pub store_errors: u64,
}

impl ReconcileReport {
    pub fn merge(&mut self, o: &ReconcileReport) {
        self.expired_leases += o.expired_leases;
        self.orphans_closed += o.orphans_closed;
        self.polled += o.polled;
        self.polled_moved += o.polled_moved;
        self.examined += o.examined;
        self.resolved += o.resolved;
        self.waiting += o.waiting;
        self.review += o.review;
        self.repeats += o.repeats;
        self.repeats_refused += o.repeats_refused;
        self.repeats_not_sent += o.repeats_not_sent;
        self.store_errors += o.store_errors;
    }
}

/// What to do with one uncertain intention: core's rule
/// ([`crate::domain::reconcile::decide`]) on the item's facts.
pub(crate) use crate::domain::reconcile::Step;

pub(crate) fn decide(caps: Capabilities, item: &UncertainItem, s: &Settings, now: DateTime<Utc>) -> Step {
    let facts = reconcile::Facts {
        idempotent_keys: caps.idempotent_keys,
        command_lookup: caps.command_lookup,
        command_known: item.intention.provider_command_id.is_some(),
        ambiguous: item
            .last_attempt
            .as_ref()
            .is_some_and(|a| a.outcome == AttemptOutcome::Ambiguous),
        since: item.since,
        tries: item.tries,
    };
    let limits = reconcile::Limits {
        uncertain_review: s.uncertain_review,
        max_tries: s.max_reconcile_attempts,
    };
    reconcile::decide(&facts, &limits, now)
}

/// Serve mode: expire leases and reconcile until told to stop.
pub(crate) async fn reconcile_loop(
    db: Db,
    settings: Arc<Settings>,
    channel: Arc<dyn Channel>,
    stop: CancellationToken,
    control: super::Control,
) -> Result<ReconcileReport> {
    let mut report = ReconcileReport::default();
    let mut limit = LogLimit::default();
    let mut polled_at: Option<std::time::Instant> = None;
    loop {
        if stop.is_cancelled() {
            break;
        }
        // A channel that refuses us (docs/design.md, "A channel that
        // refuses us") would answer every lookup and repeat with the same
        // refusal, and each would count as a try towards `review`: while
        // sending is paused, only the ledger's own recovery runs.
        let channel_down = control.channel_hold().is_some();
        let pass = if channel_down {
            recover_ledger(&db, &settings)
                .await
                .map(|(expired, orphans)| ReconcileReport {
                    expired_leases: expired,
                    orphans_closed: orphans,
                    ..ReconcileReport::default()
                })
        } else {
            reconcile_once(&db, &settings, &channel, None).await
        };
        match pass {
            Ok(r) => {
                if r.expired_leases > 0 || r.examined > 0 || r.orphans_closed > 0 {
                    control.bump();
                }
                report.merge(&r);
                limit.clear();
            }
            Err(e) => {
                control.error(&e);
                report.store_errors += 1;
                crate::warn_limited!(limit, "reconciliation pass failed, retrying: {e}");
            }
        }
        // The status poll asks about messages quiet for minutes: it looks
        // for them every quarter window (`StatusPoll::pass_every`), not on
        // every short poll.
        let every = settings.status_poll.pass_every().to_std().unwrap_or_default();
        if !channel_down && polled_at.is_none_or(|t| t.elapsed() >= every) {
            polled_at = Some(std::time::Instant::now());
            match status_poll::poll_once(&db, &settings, &channel).await {
                Ok((asked, moved)) => {
                    report.polled += asked;
                    report.polled_moved += moved;
                    if moved > 0 {
                        control.bump();
                    }
                }
                Err(e) => {
                    report.store_errors += 1;
                    crate::warn_limited!(limit, "status poll failed, retrying: {e}");
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.poll) => {}
            _ = stop.cancelled() => {}
        }
    }
    Ok(report)
}

/// The ledger-only part of a pass, which asks the channel nothing: dead
/// leases become `uncertain` and orphaned attempts are closed. Returns how
/// many of each.
async fn recover_ledger(db: &Db, settings: &Arc<Settings>) -> Result<(u64, u64)> {
    // An attempt open for two leases on an intention nobody holds is no
    // send in flight: a send outlives neither its lease nor the channel's
    // timeout, which is far shorter.
    let grace = settings.lease * 2;
    let (expired, orphans) = db
        .call(move |store| {
            Ok(store.write(|tx| {
                let now = Utc::now();
                Ok::<_, crate::store::StoreError>((
                    recovery::expire_leases(tx, now)?,
                    recovery::close_orphans(tx, now, grace)?,
                ))
            })?)
        })
        .await?;
    Ok((expired.len() as u64, orphans as u64))
}

/// One pass: expire dead leases, then reconcile the uncertain intentions due
/// now (or exactly `only`, due or not, when reprocessing).
pub async fn reconcile_once(
    db: &Db,
    settings: &Arc<Settings>,
    channel: &Arc<dyn Channel>,
    only: Option<Vec<i64>>,
) -> Result<ReconcileReport> {
    let mut report = ReconcileReport::default();
    (report.expired_leases, report.orphans_closed) = recover_ledger(db, settings).await?;
    loop {
        let s = settings.clone();
        let only_now = only.clone();
        let items = db
            .call(move |store| {
                let now = Utc::now();
                let hold = s.reconcile_wait(0);
                Ok(store.write(|tx| match &only_now {
                    Some(ids) => tx.take_uncertain_ids(ids, now, hold),
                    None => tx.take_uncertain(now, hold, s.batch_size),
                })?)
            })
            .await?;
        if items.is_empty() {
            break;
        }
        let full = only.is_none() && items.len() as u32 >= settings.batch_size;
        let mut set = JoinSet::new();
        for item in items {
            report.examined += 1;
            while set.len() >= settings.concurrency {
                if let Some(r) = set.join_next().await {
                    tally(&mut report, r);
                }
            }
            set.spawn(reconcile_item(db.clone(), settings.clone(), channel.clone(), item));
        }
        while let Some(r) = set.join_next().await {
            tally(&mut report, r);
        }
        if !full {
            break;
        }
    }
    Ok(report)
}

#[derive(Debug)]
enum ItemResult {
    Resolved,
    Waiting,
    Review,
    Repeated(Finished),
    /// Validity refused the repeat: nothing was sent; what came of it.
    Refused(Settled),
    /// The pre-send check stopped the repeat at the last moment.
    NotSent,
}

#[derive(Debug, Clone, Copy)]
enum Settled {
    Resolved,
    Waiting,
    Review,
}

fn tally(report: &mut ReconcileReport, r: std::result::Result<Result<ItemResult>, tokio::task::JoinError>) {
    match r {
        Ok(Ok(ItemResult::Resolved)) => report.resolved += 1,
        Ok(Ok(ItemResult::Waiting)) => report.waiting += 1,
        Ok(Ok(ItemResult::Review)) => report.review += 1,
        Ok(Ok(ItemResult::Refused(settled))) => {
            report.repeats_refused += 1;
            match settled {
                Settled::Resolved => report.resolved += 1,
                Settled::Waiting => report.waiting += 1,
                Settled::Review => report.review += 1,
            }
        }
        Ok(Ok(ItemResult::NotSent)) => {
            report.repeats_not_sent += 1;
            report.waiting += 1;
        }
        Ok(Ok(ItemResult::Repeated(f))) => {
            report.repeats += 1;
            match f {
                Finished::Review => report.review += 1,
                Finished::Accepted
                | Finished::Sent
                | Finished::Delivered
                | Finished::Read
                | Finished::Failed
                | Finished::Withdrawn => report.resolved += 1,
                _ => report.waiting += 1,
            }
        }
        Ok(Err(e)) => {
            report.store_errors += 1;
            tracing::warn!("reconciling one intention failed: {e}");
        }
        Err(e) => {
            report.store_errors += 1;
            tracing::warn!("reconciliation task died: {e}");
        }
    }
}

async fn reconcile_item(
    db: Db,
    settings: Arc<Settings>,
    channel: Arc<dyn Channel>,
    item: UncertainItem,
) -> Result<ItemResult> {
    let now = Utc::now();
    let id = item.intention.id;
    let wait = settings.reconcile_wait(item.tries);
    match decide(channel.capabilities(), &item, &settings, now) {
        Step::Review(why) => {
            db.call(move |store| {
                Ok(store.write(|tx| recovery::to_review(tx, id, ToReview::NoEvidence, &why, Utc::now()))?)
            })
            .await?;
            Ok(ItemResult::Review)
        }
        Step::Wait(why) => {
            // Come back no later than the end of the review window, so the
            // hand-over to a person is not delayed by a long backoff.
            let window_left = (item.since + settings.uncertain_review) - now;
            let wait = wait.min(window_left).max(chrono::Duration::seconds(1));
            waiting(&db, id, why, None, wait).await?;
            Ok(ItemResult::Waiting)
        }
        Step::Repeat => {
            let known = item.intention.provider_command_id.clone();
            repeat(&db, &settings, &channel, &item, known).await
        }
        Step::Lookup => {
            let req = send_request(&item.intention, item.contact.as_ref(), now);
            let command = item.intention.provider_command_id.clone();
            match channel.lookup(&req, command.as_deref()).await {
                LookupOutcome::Found {
                    command_id,
                    message_id,
                    state,
                    detail,
                } => match evidence_for(state) {
                    Some(sig) => {
                        let note = format!(
                            "lookup: the channel reports {state:?}{}",
                            detail.map(|d| format!(" ({d})")).unwrap_or_default()
                        );
                        db.call(move |store| {
                            Ok(store.write(|tx| {
                                let refs = (command_id.as_deref(), message_id.as_deref());
                                recovery::evidence(tx, id, sig, refs, &note, Utc::now())
                            })?)
                        })
                        .await?;
                        Ok(ItemResult::Resolved)
                    }
                    None => {
                        waiting(
                            &db,
                            id,
                            "lookup: still ambiguous in the channel".into(),
                            command_id,
                            wait,
                        )
                        .await?;
                        Ok(ItemResult::Waiting)
                    }
                },
                LookupOutcome::NotFound => {
                    let caps = channel.capabilities();
                    let ambiguous = item
                        .last_attempt
                        .as_ref()
                        .is_some_and(|a| a.outcome == AttemptOutcome::Ambiguous);
                    if caps.idempotent_keys && !ambiguous {
                        // The request never arrived: sending it now, with the
                        // same key, cannot duplicate anything — and is the
                        // first delivery, so validity decides first. The
                        // engine knows no command to withdraw.
                        repeat(&db, &settings, &channel, &item, None).await
                    } else {
                        waiting(&db, id, "lookup: the channel has no record of it".into(), None, wait).await?;
                        Ok(ItemResult::Waiting)
                    }
                }
                LookupOutcome::Unavailable { detail } => {
                    waiting(&db, id, format!("lookup unavailable: {detail}"), None, wait).await?;
                    Ok(ItemResult::Waiting)
                }
            }
        }
    }
}

/// Records a try that settled nothing and schedules the next one.
async fn waiting(db: &Db, id: i64, note: String, evidence: Option<String>, wait: chrono::Duration) -> Result<()> {
    db.call(move |store| {
        let now = Utc::now();
        Ok(store.write(|tx| {
            recovery::note(tx, id, &note, evidence.as_deref(), now)?;
            tx.hold_uncertain(id, now + wait)
        })?)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::store::AttemptRow;
    use chrono::Duration;

    fn item(outcome: &str, since_min: i64, tries: u32, now: DateTime<Utc>) -> UncertainItem {
        UncertainItem {
            intention: row(),
            contact: None,
            last_attempt: Some(AttemptRow {
                id: 1,
                n: 1,
                worker: "w".into(),
                channel: "motor".into(),
                started_at: now,
                ended_at: Some(now),
                outcome: outcome.parse().unwrap(),
                http_status: None,
                command_id: None,
                message_id: None,
                error_code: None,
                error_detail: None,
                commitment_version_checked: 1,
            }),
            since: now - Duration::minutes(since_min),
            tries,
        }
    }

    fn row() -> crate::store::IntentionRow {
        let now = Utc::now();
        crate::store::IntentionRow {
            id: 1,
            key: "cita-1:aviso-reserva:v1".into(),
            commitment_id: 1,
            commitment_ref: "cita-1".into(),
            commitment_version: 1,
            purpose: "aviso-reserva".into(),
            recipient: "+51987654321".into(),
            category: "transactional".into(),
            channel: "whatsapp".into(),
            template: "t".into(),
            language: "es".into(),
            parameters: vec![],
            body: "b".into(),
            fingerprint: "f".into(),
            correlation_id: "c".into(),
            asks_confirmation: false,
            due_at: now,
            expires_at: None,
            day: "2026-11-29".parse().unwrap(),
            state: crate::domain::state::IntentionState::Uncertain,
            state_reason: None,
            state_changed_at: now,
            related_id: None,
            created_by: "planner".into(),
            authorized_by: None,
            reason: None,
            lease_owner: None,
            lease_until: None,
            attempt_count: 1,
            next_attempt_at: None,
            provider_command_id: None,
            provider_message_id: None,
            created_at: now,
        }
    }

    const MOTOR: Capabilities = Capabilities {
        idempotent_keys: true,
        command_lookup: true,
        cancel: true,
    };
    const MOTOR_NO_LOOKUP: Capabilities = Capabilities {
        idempotent_keys: true,
        command_lookup: false,
        cancel: false,
    };
    const CLOUD: Capabilities = Capabilities {
        idempotent_keys: false,
        command_lookup: false,
        cancel: false,
    };

    #[test]
    fn strategies_follow_channel_capabilities() {
        let s = Settings::from_config(&Config::default());
        let now = Utc::now();
        let with_command = |mut i: UncertainItem| {
            i.intention.provider_command_id = Some("cmd-1".into());
            i
        };
        // A timeout before any answer: no command id, repeat with the key.
        assert_eq!(decide(MOTOR, &item("uncertain", 0, 0, now), &s, now), Step::Repeat);
        assert_eq!(
            decide(MOTOR, &with_command(item("uncertain", 0, 0, now)), &s, now),
            Step::Lookup
        );
        assert_eq!(
            decide(MOTOR_NO_LOOKUP, &item("uncertain", 0, 0, now), &s, now),
            Step::Repeat
        );
        // Ambiguous: never repeated; looked up when possible, else waits.
        assert_eq!(
            decide(MOTOR, &with_command(item("ambiguous", 0, 0, now)), &s, now),
            Step::Lookup
        );
        assert!(matches!(
            decide(MOTOR_NO_LOOKUP, &item("ambiguous", 0, 0, now), &s, now),
            Step::Wait(_)
        ));
        // Cloud: waits, never resends; review after the window.
        assert!(matches!(
            decide(CLOUD, &item("uncertain", 5, 0, now), &s, now),
            Step::Wait(_)
        ));
        assert!(matches!(
            decide(CLOUD, &item("uncertain", 30, 0, now), &s, now),
            Step::Review(_)
        ));
        assert!(matches!(
            decide(MOTOR_NO_LOOKUP, &item("ambiguous", 31, 0, now), &s, now),
            Step::Review(_)
        ));
        // Idempotent channels: bounded tries, then a person.
        assert!(matches!(
            decide(MOTOR, &item("uncertain", 0, 20, now), &s, now),
            Step::Review(_)
        ));
        // …but time alone does not send an idempotent timeout to review.
        assert_eq!(decide(MOTOR, &item("uncertain", 300, 3, now), &s, now), Step::Repeat);
    }
}
