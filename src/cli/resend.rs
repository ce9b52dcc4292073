//! `unavez intents resend`: the command-line twin of the console's
//! "authorize resend", with the same guard (see `ops::resend`).
//!
//! Exit codes: 0 the resend was created; 3 it was refused (by the guard or
//! because the operator is not a supervisor), the refusal in the configured
//! language; 2 the intention, the operator or the reason is not usable.

use std::process::ExitCode;

use chrono::Utc;
use serde::Serialize;

use super::Ctx;
use super::intents_ops::{EXIT_REFUSED, ErrorBody, IntentionRef, Responsible, Verdict, find_intention, operator_for};
use crate::domain::text::inert;
use crate::i18n::{Strings, fill, strings};
use crate::ops::{self, Actor, OpKind, OpOutcome, OpReport, OpsError, Refusal, ResendEvidence, ResendGuard};

#[derive(Debug, clap::Args)]
pub struct ResendArgs {
    /// Idempotency key (or numeric id) of the message to send again: the
    /// original or any of its earlier resends.
    pub key: String,
    /// Who authorizes (the supervisor role) and why.
    #[command(flatten)]
    pub who: Responsible,
    /// The customer already has an earlier message of this intention
    /// (delivered or read) and it is to be sent again anyway; recorded with
    /// the action as `acknowledged_delivery`.
    #[arg(long)]
    pub acknowledge_delivered: bool,
    /// One JSON document (result, rule, message, new intention, evidence).
    #[arg(long)]
    pub json: bool,
}

/// `--json`: one document, whatever the outcome. Its verdict's `result`
/// is `done` or `refused`; the `rule` that refused is one of the guard's
/// (`daily_cap`, `resend_pending`, `acknowledge_delivery`, …) or `role`.
#[derive(Debug, Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    verdict: Verdict<'a>,
    action_id: Option<i64>,
    original: Option<IntentionRef<'a>>,
    new_intention: Option<IntentionRef<'a>>,
    acknowledged_delivery: bool,
    /// What already existed before this authorization.
    evidence: Option<&'a ResendEvidence>,
}

pub fn run(ctx: &Ctx, a: ResendArgs) -> anyhow::Result<ExitCode> {
    let t = strings(ctx.config.language);
    let kind = OpKind::AuthorizeResend;
    let op = match operator_for(ctx, &a.who, kind, t.act_resend) {
        Ok(op) => op,
        Err(code) => return Ok(code),
    };
    let actor = Actor {
        name: &op.name,
        role: op.role,
    };
    if !ops::allowed(op.role, kind) {
        let message = fill(
            t.flash_role_refused,
            &[("role", t.role(op.role)), ("action", t.act_resend)],
        );
        return refused_by_role(a.json, message);
    }
    let mut store = ctx.open_existing()?;
    let id = match find_intention(ctx, &mut store, &a.key)? {
        Ok(row) => row.id,
        Err(code) => return Ok(code),
    };
    let (tz, now) = (ctx.config.tz(), Utc::now());
    let guard = ResendGuard::from_policy(&ctx.config.policy, a.acknowledge_delivered);
    // The evidence is read in the same transaction that decides, once the
    // case is locked, so what is printed is exactly what the guard saw: a
    // supervisor racing another one sees the resend the other committed.
    let (evidence, report) = store.write(|tx| -> Result<_, OpsError> {
        ops::lock_intention(tx, id)?;
        let evidence = ops::resend_evidence(tx, id, guard.max_per_day, tz, now)?;
        let report = ops::authorize_resend(tx, &actor, id, &a.who.reason, guard, tz, now)?;
        Ok((evidence, report))
    })?;
    print_outcome(t, ctx, &a, &op.name, &evidence, &report)
}

fn refused_by_role(json: bool, message: String) -> anyhow::Result<ExitCode> {
    if json {
        let verdict = Verdict {
            result: "refused",
            rule: Some("role"),
            refusal: None,
            error: ErrorBody::of("refused", Some("role"), &message),
            message,
        };
        let out = Output {
            verdict,
            action_id: None,
            original: None,
            new_intention: None,
            acknowledged_delivery: false,
            evidence: None,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        eprintln!("{message}");
    }
    Ok(ExitCode::from(EXIT_REFUSED))
}

fn print_outcome(
    t: &Strings,
    ctx: &Ctx,
    a: &ResendArgs,
    op_name: &str,
    evidence: &ResendEvidence,
    report: &OpReport,
) -> anyhow::Result<ExitCode> {
    let (refusal, new) = match &report.outcome {
        OpOutcome::Refused(r) => (Some(r), None),
        OpOutcome::Done {
            new_intention: Some((id, key)),
            ..
        } => (None, Some(IntentionRef { id: *id, key })),
        // The resend action only creates or refuses.
        other => anyhow::bail!("unexpected outcome of a resend: {other:?}"),
    };
    let acknowledged = new.is_some() && evidence.needs_acknowledgement();
    let message = match (refusal, &new) {
        (Some(r), _) => fill(
            t.cli_refused,
            &[("rule", r.rule()), ("why", &t.refusal(r, chrono::Utc::now()))],
        ),
        (None, Some(n)) => fill(
            t.cli_resend_created,
            &[
                ("id", &n.id.to_string()),
                ("key", &inert(n.key)),
                ("original", &evidence.original_id.to_string()),
                ("original_key", &inert(&evidence.original_key)),
            ],
        ),
        (None, None) => unreachable!("matched above"),
    };
    let code = if refusal.is_some() {
        ExitCode::from(EXIT_REFUSED)
    } else {
        ExitCode::SUCCESS
    };
    if a.json {
        let verdict = Verdict {
            result: if refusal.is_some() { "refused" } else { "done" },
            rule: refusal.map(Refusal::rule),
            refusal,
            error: refusal.map(|r| ErrorBody {
                code: r.rule(),
                message: message.clone(),
            }),
            message,
        };
        let out = Output {
            verdict,
            action_id: Some(report.action_id),
            original: Some(IntentionRef {
                id: evidence.original_id,
                key: &evidence.original_key,
            }),
            new_intention: new,
            acknowledged_delivery: acknowledged,
            evidence: Some(evidence),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(code);
    }
    let tz = ctx.config.tz();
    println!("{}", t.resend_evidence_title);
    for m in &evidence.messages {
        let [head, detail] = t.resend_member(m, m.id == evidence.original_id, tz, chrono::Utc::now());
        println!("  {head}\n      {detail}");
    }
    println!(
        "{}",
        fill(
            t.resend_cap_line,
            &[
                ("n", &evidence.authorized_today.to_string()),
                ("limit", &evidence.max_per_day.to_string()),
            ],
        )
    );
    if refusal.is_some() {
        eprintln!("{message}");
        return Ok(code);
    }
    println!("{message}");
    if acknowledged {
        println!(
            "{}",
            fill(
                t.cli_resend_acknowledged,
                &[("operator", &inert(op_name)), ("action", &report.action_id.to_string())],
            )
        );
    }
    Ok(code)
}
