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

use crate::board::DayFigures;
use crate::channel::Channel;
use crate::config::{Config, Role};
use crate::dispatch::{Control, Db, ServiceStatus, Settings, reprocess};
use crate::domain::alert::{self, BlockedTemplate, FeedHealth, Reading};
use crate::domain::fault::ChannelPause;
use crate::domain::heartbeat::{self, Heartbeat};
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;
use crate::ledger::Ledger;
use crate::ops::{self, Actor, OpKind, OpReport, ResendEvidence};
use crate::store::{
    AttentionQuery, AttentionRow, Board, CounterQuery, HourCount, IntentionDetail, Page, PatientCard, PatientMatch,
    Store, UpcomingRow,
};
use crate::templates::Templates;

use super::failure::{Failure, FailureKind};
pub use crate::ops::PendingOp;

/// What the UI asks of the database.
#[derive(Debug, Clone)]
pub enum Request {
    /// Dry run of reprocessing a day (writes nothing).
    ReprocessPlan {
        day: OperatingDay,
        states: Vec<IntentionState>,
    },
    /// The real run, with the dispatcher's and reconciler's own code.
    Reprocess {
        day: OperatingDay,
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
        day: OperatingDay,
    },
    /// The Tablero's chart: the day's outcomes by the hour.
    BoardHours {
        day: OperatingDay,
        day_start: DateTime<Utc>,
    },
    /// The Tablero's day figures: latency and queue depth by the hour
    /// (`[day_start, day_end)`, until `now`).
    BoardDay {
        day: OperatingDay,
        day_start: DateTime<Utc>,
        day_end: DateTime<Utc>,
        now: DateTime<Utc>,
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
    /// The unanswered calls recorded for the call list's cases.
    CallTries {
        ids: Vec<i64>,
    },
    /// Why the day's handled cases were handled: their actions' reasons.
    ActionReasons {
        ids: Vec<i64>,
    },
    Status {
        now: DateTime<Utc>,
    },
    /// `:doctor`: the checks of `unavez doctor` (without the webhooks',
    /// which need the server).
    Doctor,
    /// `:calendario`: every feed with disappearances held for review.
    FeedHolds,
    /// `:paciente`: the patients a search finds (at most `limit`).
    Patients {
        text: String,
        limit: u32,
    },
    /// One patient's card: their commitments starting in `[from, to)`.
    PatientCard {
        phone: String,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    },
    Op {
        op: PendingOp,
        operator: String,
        role: Role,
        reason: String,
        /// When the case's situation began as the form saw it: a case that
        /// changed since is refused, not acted on.
        seen: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    },
}

/// The worker's answers; errors are typed (see `failure`), so the console
/// says them in the operator's language.
#[derive(Debug, Clone)]
pub enum Response {
    Doctor(Vec<crate::doctor::Check>),
    FeedHolds(Result<Vec<FeedHold>, Failure>),
    ReprocessPlan(Result<Vec<reprocess::Item>, Failure>),
    Reprocessed(Result<Box<reprocess::Report>, Failure>),
    /// A real reprocess run's progress, sent while it runs.
    ReprocessProgress(reprocess::Progress),
    Attention(Result<Page<AttentionRow>, Failure>),
    Upcoming(Result<Page<UpcomingRow>, Failure>),
    Board(Result<Board, Failure>),
    BoardHours(Result<Vec<HourCount>, Failure>),
    BoardDay(Result<DayFigures, Failure>),
    Counter(Result<Page<AttentionRow>, Failure>),
    Detail(Result<Box<IntentionDetail>, Failure>),
    Status {
        queue: Option<i64>,
        last_error: Option<String>,
        /// The embedded services' own state (`None`: not embedded); its
        /// error is dropped once older than the attempts' window.
        service: Option<ServiceStatus>,
        /// The live dispatchers of other processes, most recent beat first
        /// (`None`: the ledger could not be read).
        others: Option<Vec<Heartbeat>>,
        /// The alerts whose thresholds are crossed, most urgent first, and
        /// the blocked templates behind `template_blocked`.
        alerts: Vec<Reading>,
        blocked: Vec<BlockedTemplate>,
        /// The channels live dispatchers paused (behind `channel_paused`).
        paused: Vec<ChannelPause>,
        /// The calendar feeds' health (behind `feed_held`/`feed_stale`):
        /// the banner names them.
        feeds: Vec<FeedHealth>,
        /// Another process holds the ledger's write lock: actions wait.
        locked: bool,
    },
    Op(Result<OpReport, OpError>),
    Patients {
        text: String,
        found: Result<Vec<PatientMatch>, Failure>,
    },
    PatientCard {
        phone: String,
        card: Result<Option<Box<PatientCard>>, Failure>,
    },
    ResendEvidence {
        intention_id: i64,
        evidence: Result<Box<ResendEvidence>, Failure>,
    },
    /// By intention: how many calls went unanswered, and the last one.
    CallTries(Result<Vec<(i64, crate::domain::call::Tries)>, Failure>),
    ActionReasons(Result<Vec<(i64, String)>, Failure>),
}

/// Why an action did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpError {
    /// The case changed after the form opened: nothing was done.
    Changed,
    Other(Failure),
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
    pub ledger: Ledger,
    pub settings: Arc<Settings>,
    /// `None`: only dry runs (no channel configured or reachable).
    pub channel: Option<Arc<dyn Channel>>,
    /// Where a real run's progress goes (the console's own answers
    /// channel); `None`: nowhere.
    pub progress: Option<Sender<Response>>,
    /// The runtime the channel's HTTP client lives on. Channel calls and
    /// reprocessing run on it (never on a runtime built per call, whose
    /// death would take the client's pooled connections with it and turn a
    /// send that never left into an "uncertain" one).
    pub runtime: tokio::runtime::Handle,
}

fn reprocess_request(
    ctx: &WorkerCtx,
    req: reprocess::Request,
) -> Result<Result<Vec<reprocess::Item>, Box<reprocess::Report>>, Failure> {
    let r = ctx
        .reprocess
        .as_ref()
        .ok_or_else(|| Failure::new(FailureKind::Unavailable, ""))?;
    r.runtime.block_on(async {
        let db = Db::session(&r.ledger).map_err(|e| Failure::from(&e))?;
        if req.dry_run {
            return reprocess::plan(&db, &r.settings, req.day, &req.states)
                .await
                .map(Ok)
                .map_err(|e| Failure::from(&e));
        }
        let channel = r.channel.clone().ok_or_else(|| {
            Failure::new(
                FailureKind::NoChannel,
                "no channel configured: only the dry run is possible",
            )
        })?;
        let progress = |p: reprocess::Progress| {
            if let Some(tx) = &r.progress {
                // The console may have quit meanwhile: nothing to tell.
                let _ = tx.send(Response::ReprocessProgress(p));
            }
        };
        reprocess::run_with_progress(&db, &r.settings, &channel, &req, &progress)
            .await
            .map(|rep| Err(Box::new(rep)))
            .map_err(|e| Failure::from(&e))
    })
}

/// Answers one request.
pub fn handle(store: &mut Store, ctx: &WorkerCtx, req: Request) -> Response {
    let s = |e: crate::store::StoreError| Failure::from(&e);
    match req {
        Request::ReprocessPlan { day, states } => {
            let req = reprocess::Request {
                day,
                states,
                dry_run: true,
                operator: String::new(),
                role: None,
                reason: String::new(),
            };
            Response::ReprocessPlan(
                reprocess_request(ctx, req)
                    .and_then(|r| r.map_err(|_| Failure::new(FailureKind::Other, "unexpected report"))),
            )
        }
        Request::Reprocess {
            day,
            states,
            operator,
            role,
            reason,
        } => {
            if !ops::allowed(role, OpKind::Reprocess) {
                return Response::Reprocessed(Err(Failure::new(
                    FailureKind::NotAllowed,
                    format!("role {} may not reprocess", role.as_str()),
                )));
            }
            let req = reprocess::Request {
                day,
                states,
                dry_run: false,
                operator,
                role: Some(role),
                reason,
            };
            Response::Reprocessed(reprocess_request(ctx, req).and_then(|r| match r {
                Err(report) => Ok(report),
                Ok(_) => Err(Failure::new(FailureKind::Other, "unexpected dry run")),
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
        Request::Board { day } => Response::Board(store.read(|tx| tx.board(day)).map_err(s)),
        Request::BoardHours { day, day_start } => {
            Response::BoardHours(store.read(|tx| tx.board_hours(day, day_start)).map_err(s))
        }
        Request::BoardDay {
            day,
            day_start,
            day_end,
            now,
        } => Response::BoardDay(
            store
                .read(|tx| crate::board::read_day(tx, day, day_start, day_end, now))
                .map_err(s),
        ),
        Request::Counter { query, limit, offset } => {
            Response::Counter(store.read(|tx| tx.counter_rows(&query, limit, offset)).map_err(s))
        }
        Request::Detail { id_or_key } => Response::Detail(
            store
                .read(|tx| tx.intention_detail(&id_or_key))
                .map(Box::new)
                .map_err(s),
        ),
        Request::ActionReasons { ids } => {
            Response::ActionReasons(store.read(|tx| tx.action_reasons(&ids)).map_err(|e| Failure::from(&e)))
        }
        Request::CallTries { ids } => Response::CallTries(
            store
                .read(|tx| {
                    ids.iter()
                        .map(|id| {
                            tx.call_tries(*id)
                                .map(|(count, last_at)| (*id, crate::domain::call::Tries { count, last_at }))
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| Failure::from(&e)),
        ),
        Request::ResendEvidence { intention_id, now } => {
            let (cap, tz) = (ctx.config.policy.max_resends_per_day, ctx.config.tz());
            Response::ResendEvidence {
                intention_id,
                evidence: store
                    .read(|tx| ops::resend_evidence(tx, intention_id, cap, tz, now))
                    .map(Box::new)
                    .map_err(|e| Failure::from(&e)),
            }
        }
        Request::Status { now } => status(store, ctx, now),
        Request::Doctor => Response::Doctor(doctor(store, ctx)),
        Request::FeedHolds => Response::FeedHolds(store.read(feed_holds).map_err(s)),
        Request::Patients { text, limit } => Response::Patients {
            found: store.read(|tx| tx.patients(&text, limit)).map_err(s),
            text,
        },
        Request::PatientCard { phone, from, to } => Response::PatientCard {
            card: store
                .read(|tx| tx.patient_card(&phone, from, to))
                .map(|c| c.map(Box::new))
                .map_err(s),
            phone,
        },
        Request::Op {
            op,
            operator,
            role,
            reason,
            seen,
            now,
        } => operator_action(store, ctx, op, &Actor { name: &operator, role }, &reason, seen, now),
    }
}

/// How far back heartbeat rows are read: far beyond any dispatcher's
/// window of three missed beats.
const HEARTBEAT_LOOKBACK: chrono::Duration = chrono::Duration::minutes(10);

/// The header's status: the queue, the last error, the dispatchers (this
/// console's own and the live ones of other processes), the crossed alerts
/// and the write lock, in one read of the ledger (the lock is a probe that
/// never waits).
fn status(store: &mut Store, ctx: &WorkerCtx, now: DateTime<Utc>) -> Response {
    let since = now - chrono::Duration::minutes(5);
    let service = ctx.control.as_ref().map(|c| {
        let mut st = c.status();
        st.last_error = st.last_error.filter(|(at, _)| *at >= since);
        st
    });
    let grace = ctx.config.alerts.thresholds().due_grace;
    let read = store.read(|tx| {
        Ok::<_, crate::store::StoreError>((
            tx.due_queue(now)?,
            tx.last_attempt_error(since)?,
            tx.heartbeats(now - HEARTBEAT_LOOKBACK)?,
            tx.alert_measures(now, grace)?,
        ))
    });
    let locked = locked_by_another(store);
    match read {
        Ok((queue, last_error, beats, mut measures)) => {
            measures.paused_channels = heartbeat::paused_channels(&beats, now);
            // The backups `serve` takes, judged from their directory when
            // this account can read it.
            measures.backup = ctx
                .config
                .backup
                .periodic()
                .and_then(|p| unavez_app::backup::measure_from_dir(&p, now));
            let own = ctx.control.as_ref().and_then(|c| c.run_id());
            let others = heartbeat::live(&beats, own.as_deref(), now)
                .into_iter()
                .cloned()
                .collect();
            Response::Status {
                queue: Some(queue),
                last_error,
                service,
                others: Some(others),
                alerts: alert::crossed(&measures, &ctx.config.alerts.thresholds(), now),
                blocked: measures.blocked_templates,
                paused: measures.paused_channels,
                feeds: measures.feeds,
                locked,
            }
        }
        Err(_) => Response::Status {
            queue: None,
            last_error: None,
            service,
            others: None,
            alerts: Vec::new(),
            blocked: Vec::new(),
            paused: Vec::new(),
            feeds: Vec::new(),
            locked,
        },
    }
}

/// The write lock is held, and not by this process: a lock taken by this
/// console's own dispatcher or import is no "otro proceso" (issue 25 §5).
/// SQLite's write lock has one holder, so while this process has a write
/// open, the lock is its own.
pub fn locked_by_another(store: &Store) -> bool {
    let own_before = crate::store::own_writers();
    let locked = store.write_locked().unwrap_or(false);
    locked && own_before == 0 && crate::store::own_writers() == 0
}

/// Runs one confirmed operator action through the library's runner (the
/// command line's twins run the same one).
fn operator_action(
    store: &mut Store,
    ctx: &WorkerCtx,
    op: PendingOp,
    actor: &Actor<'_>,
    reason: &str,
    seen: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Response {
    if let PendingOp::PauseDispatch | PendingOp::ResumeDispatch = op {
        return Response::Op(
            switch_dispatch(store, ctx, actor, op == PendingOp::PauseDispatch, reason, now).map_err(OpError::Other),
        );
    }
    let env = ops::OpEnv {
        config: &ctx.config,
        templates: &ctx.templates,
        channel: ctx.reprocess.as_ref().and_then(|r| r.channel.clone()),
        runtime: ctx.reprocess.as_ref().map(|r| r.runtime.clone()),
    };
    Response::Op(
        ops::run(store, &env, &op, actor, reason, seen, now).map_err(|e| match e {
            ops::OpsError::Changed => OpError::Changed,
            e => OpError::Other(Failure::from(&e)),
        }),
    )
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
) -> Result<OpReport, Failure> {
    let control = ctx
        .control
        .as_ref()
        .ok_or_else(|| Failure::new(FailureKind::NoDispatcher, "the dispatcher does not run in this console"))?;
    let report = store
        .write(|tx| ops::switch_dispatch(tx, actor, pause, reason, now))
        .map_err(|e| Failure::from(&e))?;
    if pause {
        control.pause();
    } else {
        control.resume();
    }
    Ok(report)
}

/// Starts the worker thread. It stops when the request channel closes.
pub fn spawn(
    mut store: Store,
    ctx: WorkerCtx,
    rx: Receiver<Request>,
    tx: Sender<Response>,
) -> std::io::Result<JoinHandle<()>> {
    // A phone searched without its country code is the clinic's.
    store.set_phone_country(ctx.config.import.country());
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

/// The doctor's checks on this worker's thread (not a runtime's: its own
/// current-thread runtime for the channel's HTTP).
fn doctor(store: &Store, ctx: &WorkerCtx) -> Vec<crate::doctor::Check> {
    let inputs = crate::doctor::Inputs {
        config: Ok((ctx.config.clone(), ctx.templates.clone())),
        config_path: None,
        db: Some(store.path().to_path_buf()),
    };
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(crate::doctor::run(inputs)),
        Err(e) => vec![crate::doctor::Check::new(
            crate::doctor::CheckId::Config,
            crate::doctor::Status::Fail,
            crate::doctor::Finding::LedgerUnreachable { detail: e.to_string() },
        )],
    }
}

/// One feed's disappearances waiting for a person (issue 27 §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedHold {
    pub feed: String,
    pub held: Vec<HeldAppointment>,
}

/// One held appointment as the overlay shows it: the patient's phone
/// masked here, so the raw number never reaches the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldAppointment {
    pub reference: String,
    pub patient: Option<String>,
    pub starts_at: DateTime<Utc>,
}

/// The feeds with held disappearances, by name; a feed with none is left
/// out (there is nothing to decide on it).
fn feed_holds(tx: &crate::store::Tx<'_>) -> Result<Vec<FeedHold>, crate::store::StoreError> {
    let mut out = Vec::new();
    for f in tx.feeds()? {
        if f.held == 0 {
            continue;
        }
        let seen = tx.feed_held(&f.name)?;
        let refs: Vec<&str> = seen.iter().map(|s| s.reference.as_str()).collect();
        let rows = tx.commitments_by_ref(&refs)?;
        let held: Vec<HeldAppointment> = seen
            .iter()
            .map(|s| HeldAppointment {
                reference: s.reference.clone(),
                patient: rows
                    .get(&s.reference)
                    .and_then(|r| r.commitment.phone.as_deref())
                    .map(crate::domain::mask::mask_phone),
                starts_at: s.starts_at,
            })
            .collect();
        if !held.is_empty() {
            out.push(FeedHold { feed: f.name, held });
        }
    }
    Ok(out)
}
