//! The console's database worker: a plain thread that owns its own
//! [`Store`] and answers typed [`Request`]s with [`Response`]s over
//! channels, so the render loop never waits on SQLite (a write lock held by
//! the dispatcher, a slow page at a million rows).
//!
//! [`handle`] is a plain function: tests call it directly and
//! deterministically, the running console calls it from the thread.

use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::channel::{CancelOutcome, Channel, LookupOutcome};
use crate::config::{Config, Role};
use crate::dispatch::{Control, Db, ServiceStatus, Settings, reprocess};
use crate::domain::state::IntentionState;
use crate::ops::{self, Actor, OpKind, OpReport, ResendEvidence, ResendGuard, VerifyOutcome};
use crate::planner::Planner;
use crate::store::{AttentionQuery, AttentionRow, Board, CounterQuery, IntentionDetail, Page, Store, UpcomingRow};
use crate::templates::Templates;

/// An operator action, fully specified and confirmed.
#[derive(Debug, Clone, PartialEq)]
pub enum PendingOp {
    Cancel {
        intention_id: i64,
    },
    Verify {
        intention_id: i64,
        outcome: VerifyOutcome,
    },
    /// Authorize a resend; `acknowledge_delivered` when the supervisor
    /// typed the word after seeing an earlier message was delivered or read.
    Resend {
        intention_id: i64,
        acknowledge_delivered: bool,
    },
    ManualContact {
        commitment_id: i64,
        intention_id: Option<i64>,
    },
    /// Reprocess one operating day by state (technicians).
    Reprocess {
        day: String,
        states: Vec<IntentionState>,
    },
    /// Verify by asking the channel now.
    VerifyChannel {
        intention_id: i64,
    },
    /// Stop new claims of the embedded dispatcher.
    PauseDispatch,
    ResumeDispatch,
}

impl PendingOp {
    pub fn kind(&self) -> OpKind {
        match self {
            PendingOp::Cancel { .. } => OpKind::Cancel,
            PendingOp::Verify { .. } => OpKind::Verify,
            PendingOp::Resend { .. } => OpKind::AuthorizeResend,
            PendingOp::ManualContact { .. } => OpKind::ManualContact,
            PendingOp::Reprocess { .. } => OpKind::Reprocess,
            PendingOp::VerifyChannel { .. } => OpKind::Verify,
            PendingOp::PauseDispatch => OpKind::PauseDispatch,
            PendingOp::ResumeDispatch => OpKind::ResumeDispatch,
        }
    }
}

/// What the UI asks of the database.
#[derive(Debug, Clone)]
pub enum Request {
    /// Dry run of reprocessing a day (writes nothing).
    ReprocessPlan {
        day: String,
        states: Vec<IntentionState>,
    },
    /// The real run, with the dispatcher's and reconciler's own code.
    Reprocess {
        day: String,
        states: Vec<IntentionState>,
        operator: String,
        role: Role,
        reason: String,
    },
    Attention(AttentionQuery),
    Upcoming {
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        filter: Option<String>,
        limit: u32,
        offset: u32,
    },
    Board {
        day: String,
    },
    Counter {
        query: CounterQuery,
        limit: u32,
        offset: u32,
    },
    Detail {
        id_or_key: String,
    },
    /// What already exists for a resend's family, for its confirmation.
    ResendEvidence {
        intention_id: i64,
        now: DateTime<Utc>,
    },
    Status {
        now: DateTime<Utc>,
    },
    Op {
        op: PendingOp,
        operator: String,
        role: Role,
        reason: String,
        now: DateTime<Utc>,
    },
}

/// The worker's answers; errors are already text for the flash line.
#[derive(Debug, Clone)]
pub enum Response {
    ReprocessPlan(Result<Vec<reprocess::Item>, String>),
    Reprocessed(Result<Box<reprocess::Report>, String>),
    Attention(Result<Page<AttentionRow>, String>),
    Upcoming(Result<Page<UpcomingRow>, String>),
    Board(Result<Board, String>),
    Counter(Result<Page<AttentionRow>, String>),
    Detail(Result<Box<IntentionDetail>, String>),
    Status {
        queue: Option<i64>,
        last_error: Option<String>,
        /// The embedded services' own state (`None`: not embedded); its
        /// error is dropped once older than the attempts' window.
        service: Option<ServiceStatus>,
    },
    Op(Result<OpReport, String>),
    ResendEvidence {
        intention_id: i64,
        evidence: Result<Box<ResendEvidence>, String>,
    },
}

/// What the worker needs besides the store: the planner's inputs.
pub struct WorkerCtx {
    pub config: Config,
    pub templates: Templates,
    /// The ledger file and channel for reprocessing (which runs the
    /// dispatcher's code on its own connection); `None` disables it.
    pub reprocess: Option<ReprocessCtx>,
    /// The embedded dispatcher's switch and status; `None`: not embedded.
    pub control: Option<Control>,
}

/// What reprocessing needs besides the request.
pub struct ReprocessCtx {
    pub db: std::path::PathBuf,
    pub settings: Arc<Settings>,
    /// `None`: only dry runs (no channel configured or reachable).
    pub channel: Option<Arc<dyn Channel>>,
    /// The runtime the channel's HTTP client lives on. Channel calls and
    /// reprocessing run on it (never on a runtime built per call, whose
    /// death would take the client's pooled connections with it and turn a
    /// send that never left into an "uncertain" one).
    pub runtime: tokio::runtime::Handle,
}

fn reprocess_request(
    ctx: &WorkerCtx,
    req: reprocess::Request,
) -> Result<Result<Vec<reprocess::Item>, Box<reprocess::Report>>, String> {
    // An empty error means "not available": the console says it in the
    // operator's language.
    let r = ctx.reprocess.as_ref().ok_or_else(String::new)?;
    r.runtime.block_on(async {
        let db = Db::open(&r.db).map_err(|e| e.to_string())?;
        if req.dry_run {
            return reprocess::plan(&db, &r.settings, &req.day, &req.states)
                .await
                .map(Ok)
                .map_err(|e| e.to_string());
        }
        let channel = r
            .channel
            .clone()
            .ok_or_else(|| "no channel configured: only the dry run is possible".to_string())?;
        reprocess::run(&db, &r.settings, &channel, &req)
            .await
            .map(|rep| Err(Box::new(rep)))
            .map_err(|e| e.to_string())
    })
}

/// Answers one request.
pub fn handle(store: &mut Store, ctx: &WorkerCtx, req: Request) -> Response {
    let s = |e: crate::store::StoreError| e.to_string();
    match req {
        Request::ReprocessPlan { day, states } => {
            let req = reprocess::Request {
                day,
                states,
                dry_run: true,
                operator: String::new(),
                role: String::new(),
                reason: String::new(),
            };
            Response::ReprocessPlan(reprocess_request(ctx, req).and_then(|r| r.map_err(|_| "unexpected report".into())))
        }
        Request::Reprocess {
            day,
            states,
            operator,
            role,
            reason,
        } => {
            if !ops::allowed(role, OpKind::Reprocess) {
                return Response::Reprocessed(Err(format!("role {} may not reprocess", role.as_str())));
            }
            let req = reprocess::Request {
                day,
                states,
                dry_run: false,
                operator,
                role: role.as_str().into(),
                reason,
            };
            Response::Reprocessed(reprocess_request(ctx, req).and_then(|r| match r {
                Err(report) => Ok(report),
                Ok(_) => Err("unexpected dry run".into()),
            }))
        }
        Request::Attention(q) => Response::Attention(store.read(|tx| tx.attention(&q)).map_err(s)),
        Request::Upcoming {
            from,
            to,
            filter,
            limit,
            offset,
        } => Response::Upcoming(
            store
                .read(|tx| tx.upcoming(from, to, filter.as_deref(), limit, offset))
                .map_err(s),
        ),
        Request::Board { day } => Response::Board(store.read(|tx| tx.board(&day)).map_err(s)),
        Request::Counter { query, limit, offset } => {
            Response::Counter(store.read(|tx| tx.counter_rows(&query, limit, offset)).map_err(s))
        }
        Request::Detail { id_or_key } => Response::Detail(
            store
                .read(|tx| tx.intention_detail(&id_or_key))
                .map(Box::new)
                .map_err(s),
        ),
        Request::ResendEvidence { intention_id, now } => {
            let (cap, tz) = (ctx.config.policy.max_resends_per_day, ctx.config.tz());
            Response::ResendEvidence {
                intention_id,
                evidence: store
                    .read(|tx| ops::resend_evidence(tx, intention_id, cap, tz, now))
                    .map(Box::new)
                    .map_err(|e| e.to_string()),
            }
        }
        Request::Status { now } => {
            let since = now - chrono::Duration::minutes(5);
            let service = ctx.control.as_ref().map(|c| {
                let mut st = c.status();
                st.last_error = st.last_error.filter(|(at, _)| *at >= since);
                st
            });
            let read =
                store.read(|tx| Ok::<_, crate::store::StoreError>((tx.due_queue(now)?, tx.last_attempt_error(since)?)));
            match read {
                Ok((queue, last_error)) => Response::Status {
                    queue: Some(queue),
                    last_error,
                    service,
                },
                Err(_) => Response::Status {
                    queue: None,
                    last_error: None,
                    service,
                },
            }
        }
        Request::Op {
            op,
            operator,
            role,
            reason,
            now,
        } => operator_action(store, ctx, op, &Actor { name: &operator, role }, &reason, now),
    }
}

/// Runs one confirmed operator action: asks the channel first where the
/// action needs it (outside any transaction), then decides in one write.
fn operator_action(
    store: &mut Store,
    ctx: &WorkerCtx,
    op: PendingOp,
    actor: &Actor<'_>,
    reason: &str,
    now: DateTime<Utc>,
) -> Response {
    let planner = Planner::new(&ctx.config.policy, &ctx.templates, ctx.config.tz());
    let tz = ctx.config.tz();
    if let PendingOp::PauseDispatch | PendingOp::ResumeDispatch = op {
        return Response::Op(switch_dispatch(
            store,
            ctx,
            actor,
            op == PendingOp::PauseDispatch,
            reason,
            now,
        ));
    }
    // A verification through the channel asks it first, outside any
    // transaction (a slow channel must not hold the write lock).
    let lookup = match &op {
        PendingOp::VerifyChannel { intention_id } => match channel_lookup(store, ctx, *intention_id, now) {
            Ok(l) => l,
            Err(e) => return Response::Op(Err(e)),
        },
        _ => None,
    };
    // Cancelling an accepted command asks the channel to withdraw
    // it first, also outside any transaction.
    let withdraw = match &op {
        PendingOp::Cancel { intention_id } => match channel_withdraw(store, ctx, *intention_id) {
            Ok(w) => w,
            Err(e) => return Response::Op(Err(e)),
        },
        _ => None,
    };
    let r = store.write(|tx| match op {
        PendingOp::Cancel { intention_id } => {
            ops::cancel_with_channel(tx, actor, intention_id, withdraw.as_ref(), reason, now)
        }
        PendingOp::Verify { intention_id, outcome } => {
            ops::verify_manual(tx, actor, intention_id, outcome, reason, now)
        }
        PendingOp::Resend {
            intention_id,
            acknowledge_delivered,
        } => {
            let guard = ResendGuard::from_policy(&ctx.config.policy, acknowledge_delivered);
            ops::authorize_resend(tx, actor, intention_id, reason, guard, tz, now)
        }
        PendingOp::ManualContact {
            commitment_id,
            intention_id,
        } => ops::manual_contact(tx, &planner, actor, commitment_id, intention_id, reason, now),
        PendingOp::VerifyChannel { intention_id } => {
            ops::verify_with_channel(tx, actor, intention_id, lookup.as_ref(), reason, now)
        }
        // The app sends reprocessing as its own request, and the
        // dispatch switch returned above; never here.
        PendingOp::Reprocess { .. } | PendingOp::PauseDispatch | PendingOp::ResumeDispatch => {
            Err(ops::OpsError::NotAllowed {
                role: actor.role.as_str(),
                op: "reprocess",
            })
        }
    });
    Response::Op(r.map_err(|e| e.to_string()))
}

/// Records the pause/resume, then flips the switch: committed first, so a
/// switch nobody can account for never happens.
fn switch_dispatch(
    store: &mut Store,
    ctx: &WorkerCtx,
    actor: &Actor<'_>,
    pause: bool,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<OpReport, String> {
    let control = ctx
        .control
        .as_ref()
        .ok_or_else(|| "the dispatcher does not run in this console".to_string())?;
    let report = store
        .write(|tx| ops::switch_dispatch(tx, actor, pause, reason, now))
        .map_err(|e| e.to_string())?;
    if pause {
        control.pause();
    } else {
        control.resume();
    }
    Ok(report)
}

/// Asks the channel where the intention's command is. `None` when the
/// channel cannot be asked (no lookup capability).
fn channel_lookup(
    store: &mut Store,
    ctx: &WorkerCtx,
    intention_id: i64,
    now: DateTime<Utc>,
) -> Result<Option<LookupOutcome>, String> {
    let (channel, rt) = ctx
        .reprocess
        .as_ref()
        .and_then(|r| Some((r.channel.clone()?, &r.runtime)))
        .ok_or_else(|| "no channel configured".to_string())?;
    if !channel.capabilities().command_lookup {
        return Ok(None);
    }
    let row = store.read(|tx| tx.intention(intention_id)).map_err(|e| e.to_string())?;
    let Some(command_id) = row.provider_command_id.as_deref() else {
        // Without an engine command id, the only way to ask an idempotent
        // engine is to repeat the request with the same key, and if the
        // first request never arrived that repeat is the first delivery.
        // A verification never sends: the reconciler makes that repeat,
        // with the validity check in the transaction that records it.
        // `ops::verify_with_channel` refuses it as `NoCommandId`.
        return Ok(Some(LookupOutcome::NotFound));
    };
    let req = crate::dispatch::request::send_request(&row, None, now);
    Ok(Some(rt.block_on(channel.lookup(&req, Some(command_id)))))
}

/// For an accepted intention on a channel that can withdraw queued
/// commands: the channel's answer to `cancel`. `None` for any other state
/// (the ledger decides alone) or when there is no channel to ask.
fn channel_withdraw(store: &mut Store, ctx: &WorkerCtx, intention_id: i64) -> Result<Option<CancelOutcome>, String> {
    let row = store.read(|tx| tx.intention(intention_id)).map_err(|e| e.to_string())?;
    let Some(r) = ctx.reprocess.as_ref() else {
        return Ok(None);
    };
    let (Some(channel), Some(command_id), IntentionState::Accepted) =
        (r.channel.clone(), row.provider_command_id, row.state)
    else {
        return Ok(None);
    };
    if !channel.capabilities().cancel {
        return Ok(Some(CancelOutcome::Unsupported));
    }
    Ok(Some(r.runtime.block_on(channel.cancel(&command_id))))
}

/// Starts the worker thread. It stops when the request channel closes.
pub fn spawn(
    mut store: Store,
    ctx: WorkerCtx,
    rx: Receiver<Request>,
    tx: Sender<Response>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("unavez-console-db".into())
        .spawn(move || {
            while let Ok(req) = rx.recv() {
                if tx.send(handle(&mut store, &ctx, req)).is_err() {
                    break;
                }
            }
        })
}
