//! `unavez intents cancel|verify|contact|resolve|reopen|request-resend|decline-resend
//! KEY --operator --reason` and `intents call-outcome KEY --operator --outcome`:
//! the command-line twins of the console's actions, run by the same
//! library runner (`ops::run`) with the same roles, reasons and audit
//! trail. (`intents resend` is `resend.rs`, with its guard.)
//!
//! Exit codes: 0 done (or recorded); 3 refused (a role without the right,
//! a state the action does not apply to), the refusal in the configured
//! language; 2 the key, the operator or the reason is not usable.

use std::process::ExitCode;

use chrono::Utc;
use serde::Serialize;

use super::Ctx;
use crate::config::Operator;
use crate::domain::call::CallOutcome;
use crate::domain::text::inert;
use crate::i18n::{fill, strings};
use crate::ops::{
    self, Actor, Case, IdentityError, OpEnv, OpKind, OpOutcome, OpReport, OpsError, PendingOp, Refusal, VerifyOutcome,
};
use crate::store::{IntentionRow, Store, StoreError};

/// Who acts and why, as every operator command takes them.
#[derive(Debug, clap::Args)]
pub struct Responsible {
    /// Who acts: an `[[operator]]` of the config. With operators mapped to
    /// OS accounts, the account decides and this may be left out, or name
    /// only the same operator (unless `allow_operator_flag`).
    #[arg(long)]
    pub operator: Option<String>,
    /// Why (mandatory; recorded with the action).
    #[arg(long)]
    pub reason: String,
}

/// What every twin takes.
#[derive(Debug, clap::Args)]
pub struct CaseArgs {
    /// Idempotency key (or numeric id) of the message.
    pub key: String,
    #[command(flatten)]
    pub who: Responsible,
    /// One JSON document (result, rule, message, action, state).
    #[arg(long)]
    pub json: bool,
}

/// `intents verify`: the customer's answer to a call.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub case: CaseArgs,
    /// What the customer said: received (recibido) or not_received
    /// (no_recibido), in any case.
    #[arg(long, value_enum, ignore_case = true)]
    pub outcome: Outcome,
}

/// `intents call-outcome`: what came of a call; the outcome is the reason.
#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// Idempotency key (or numeric id) of the message.
    pub key: String,
    /// Who called (see `--operator` of the other twins).
    #[arg(long)]
    pub operator: Option<String>,
    /// confirmo | no_contesta | reprogramar | numero_equivocado (or
    /// confirmed | no_answer | reschedule_requested | wrong_number).
    #[arg(long, value_parser = parse_call_outcome)]
    pub outcome: CallOutcome,
    /// One JSON document (result, rule, message, action, state).
    #[arg(long)]
    pub json: bool,
}

fn parse_call_outcome(s: &str) -> Result<CallOutcome, String> {
    CallOutcome::parse(s).ok_or_else(|| "expected confirmo, no_contesta, reprogramar or numero_equivocado".to_string())
}

impl CallArgs {
    /// The twin and the case arguments every twin takes: the outcome's
    /// word is the recorded reason.
    pub fn into_case(self) -> (Twin, CaseArgs) {
        let case = CaseArgs {
            key: self.key,
            who: Responsible {
                operator: self.operator,
                reason: self.outcome.as_str().to_string(),
            },
            json: self.json,
        };
        (Twin::Call(self.outcome), case)
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Outcome {
    /// Also `recibido`.
    #[value(alias = "recibido")]
    Received,
    /// Also `no_recibido`.
    #[value(alias = "no_recibido", alias = "no-recibido", alias = "not-received")]
    NotReceived,
}

/// Which twin.
#[derive(Debug, Clone, Copy)]
pub enum Twin {
    /// Cancel the send (not the appointment).
    Cancel,
    Verify(VerifyOutcome),
    /// Manual contact: staff reached the customer.
    Contact,
    /// Mark the case handled.
    Resolve,
    /// The front desk asks a supervisor for a resend.
    RequestResend,
    /// A supervisor declines that request.
    DeclineResend,
    /// What came of a call.
    Call(CallOutcome),
    /// Take the case's "handled" mark back.
    Reopen,
}

impl From<Outcome> for VerifyOutcome {
    fn from(o: Outcome) -> VerifyOutcome {
        match o {
            Outcome::Received => VerifyOutcome::Received,
            Outcome::NotReceived => VerifyOutcome::NotReceived,
        }
    }
}

pub(super) const EXIT_REFUSED: u8 = 3;
pub(super) const EXIT_BAD_INPUT: u8 = 2;

/// How every operator command's `--json` document begins.
#[derive(Debug, Serialize)]
pub(super) struct Verdict<'a> {
    /// `done`, `recorded` or `refused`.
    pub result: &'static str,
    /// The rule that refused (`role`, `closed`, `daily_cap`, …).
    pub rule: Option<&'static str>,
    pub refusal: Option<&'a Refusal>,
    /// What a person reads, in the configured language.
    pub message: String,
    /// A refusal as every command's error reads with `--json`:
    /// `{"code": rule, "message": …}` (absent when done or recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// The `error` object of a `--json` document.
#[derive(Debug, Serialize)]
pub(super) struct ErrorBody {
    pub code: &'static str,
    pub message: String,
}

impl ErrorBody {
    /// The error of a refused verdict (`result` is `refused`).
    pub fn of(result: &str, rule: Option<&'static str>, message: &str) -> Option<ErrorBody> {
        (result == "refused").then(|| ErrorBody {
            code: rule.unwrap_or("refused"),
            message: message.to_string(),
        })
    }
}

#[derive(Debug, Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    verdict: Verdict<'a>,
    action: &'static str,
    action_id: Option<i64>,
    intention: Option<IntentionRef<'a>>,
    commitment: Option<&'a str>,
    /// The intention's state after the action, when it moved.
    state: Option<String>,
}

/// An intention as the `--json` documents name it.
#[derive(Debug, Serialize)]
pub(super) struct IntentionRef<'a> {
    pub id: i64,
    pub key: &'a str,
}

fn bad_input(code: &str, message: String) -> ExitCode {
    super::errors::fail(code, &message, EXIT_BAD_INPUT)
}

/// What every operator command checks before it opens the ledger: who
/// acts (the same identity rule as the console) and that there is a
/// reason `to` do it. `Err` is the exit code, the error already printed:
/// 2 for a name or reason that is not usable, 3 for an identity refused.
pub(super) fn operator_for(ctx: &Ctx, who: &Responsible, kind: OpKind, to: &str) -> Result<Operator, ExitCode> {
    let t = strings(ctx.config.language);
    let op = match ctx.identity(who.operator.as_deref(), kind.as_str()) {
        Ok(id) => id.operator,
        Err(e) => {
            let (code, message) = t.cli.identity(&e);
            let exit = match e {
                IdentityError::UnknownOperator { .. } | IdentityError::FlagRequired { .. } => EXIT_BAD_INPUT,
                _ => EXIT_REFUSED,
            };
            return Err(super::errors::fail(code, &message, exit));
        }
    };
    if who.reason.trim().is_empty() {
        return Err(bad_input(
            "reason_required",
            fill(t.cli.reason_required, &[("action", to)]),
        ));
    }
    Ok(op)
}

/// The intention a command names by key or numeric id; `Ok(Err(2))`, the
/// error printed, when there is none.
pub(super) fn find_intention(
    ctx: &Ctx,
    store: &mut Store,
    key: &str,
) -> anyhow::Result<Result<IntentionRow, ExitCode>> {
    match store.read(|tx| tx.find_intention(key)) {
        Ok(row) => Ok(Ok(row)),
        Err(StoreError::NoIntention(_)) => Ok(Err(bad_input("no_intention", no_intention(ctx, key)))),
        Err(e) => Err(e.into()),
    }
}

/// "no existe un aviso con clave o id «99999»", in the configured language.
pub(super) fn no_intention(ctx: &Ctx, key: &str) -> String {
    fill(strings(ctx.config.language).cli.no_intention, &[("key", &inert(key))])
}

/// Runs one twin.
pub fn run(ctx: &Ctx, twin: Twin, a: CaseArgs) -> anyhow::Result<ExitCode> {
    let t = strings(ctx.config.language);
    let kind = match twin {
        Twin::Cancel => OpKind::Cancel,
        Twin::Verify(_) => OpKind::Verify,
        Twin::Contact => OpKind::ManualContact,
        Twin::Resolve => OpKind::Resolve,
        Twin::RequestResend => OpKind::RequestResend,
        Twin::DeclineResend => OpKind::DeclineResend,
        Twin::Call(_) => OpKind::CallOutcome,
        Twin::Reopen => OpKind::Reopen,
    };
    let op = match operator_for(ctx, &a.who, kind, t.op_label(kind)) {
        Ok(op) => op,
        Err(code) => return Ok(code),
    };
    if !ops::allowed(op.role, kind) {
        let message = fill(
            t.flash_role_refused,
            &[("role", t.role(op.role)), ("action", t.op_label(kind))],
        );
        return print(&a, kind, None, message, Some("role"), EXIT_REFUSED);
    }
    let mut store = ctx.open_existing()?;
    let row = match find_intention(ctx, &mut store, &a.key)? {
        Ok(row) => row,
        Err(code) => return Ok(code),
    };
    let pending = match twin {
        Twin::Cancel => PendingOp::Cancel { intention_id: row.id },
        Twin::Verify(outcome) => PendingOp::Verify {
            intention_id: row.id,
            outcome,
        },
        Twin::Contact => PendingOp::ManualContact {
            commitment_id: row.commitment_id,
            intention_id: Some(row.id),
        },
        Twin::Resolve => PendingOp::Resolve {
            case: Case::intention(row.id),
        },
        Twin::RequestResend => PendingOp::RequestResend { intention_id: row.id },
        Twin::DeclineResend => PendingOp::DeclineResend { intention_id: row.id },
        Twin::Call(outcome) => PendingOp::CallOutcome {
            intention_id: row.id,
            outcome,
        },
        Twin::Reopen => PendingOp::Reopen {
            case: Case::intention(row.id),
        },
    };
    // No channel here: the ledger decides alone (a cancel of a message the
    // channel already took is refused; the console, which holds the
    // channel, can ask it to withdraw a queued command).
    let env = OpEnv {
        config: &ctx.config,
        templates: &ctx.templates,
        channel: None,
        runtime: None,
    };
    let actor = Actor {
        name: &op.name,
        role: op.role,
    };
    let report = match ops::run(&mut store, &env, &pending, &actor, &a.who.reason, None, Utc::now()) {
        Ok(r) => r,
        Err(OpsError::NotAllowed { .. }) => {
            let message = fill(
                t.flash_role_refused,
                &[("role", t.role(op.role)), ("action", t.op_label(kind))],
            );
            return print(&a, kind, None, message, Some("role"), EXIT_REFUSED);
        }
        Err(e) => return Err(e.into()),
    };
    let message = t.report(&report, Utc::now());
    let code = match report.outcome {
        OpOutcome::Refused(_) => EXIT_REFUSED,
        _ => 0,
    };
    let rule = match &report.outcome {
        OpOutcome::Refused(r) => Some(r.rule()),
        _ => None,
    };
    print(&a, kind, Some(&report), message, rule, code)
}

fn print(
    a: &CaseArgs,
    kind: OpKind,
    report: Option<&OpReport>,
    message: String,
    rule: Option<&'static str>,
    code: u8,
) -> anyhow::Result<ExitCode> {
    if a.json {
        let refusal = report.and_then(|r| match &r.outcome {
            OpOutcome::Refused(r) => Some(r),
            _ => None,
        });
        let result = match report.map(|r| &r.outcome) {
            Some(OpOutcome::Done { .. }) => "done",
            Some(OpOutcome::Recorded { .. }) => "recorded",
            _ => "refused",
        };
        let verdict = Verdict {
            result,
            rule,
            refusal,
            error: ErrorBody::of(result, rule, &message),
            message,
        };
        let out = Output {
            verdict,
            action: kind.as_str(),
            action_id: report.map(|r| r.action_id),
            intention: report.and_then(|r| {
                Some(IntentionRef {
                    id: r.intention_id?,
                    key: r.intention_key.as_deref()?,
                })
            }),
            commitment: report.map(|r| r.commitment_ref.as_str()),
            state: report.and_then(|r| match &r.outcome {
                OpOutcome::Done { state: Some(s), .. } | OpOutcome::Recorded { state: s } => Some(s.to_string()),
                _ => None,
            }),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if code == 0 {
        println!("{message}");
    } else {
        eprintln!("{message}");
    }
    Ok(ExitCode::from(code))
}
