//! `unavez feeds [--json]`: the calendar feeds `serve` polls, from their
//! status rows; `unavez feeds confirm|discard NAME --operator --reason`:
//! a person's answer to a mass disappearance (`ops::review_feed`),
//! audited like every operator action.
//!
//! Exit codes: 0 done; 2 an unknown feed, operator or a blank reason;
//! 3 refused (a role without the right, nothing held).

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Ctx;
use super::intents_ops::{EXIT_BAD_INPUT, EXIT_REFUSED, Responsible, operator_for};
use crate::domain::feed::is_stale;
use crate::domain::text::inert;
use crate::ops::{self, Actor, OpKind, OpsError};
use crate::store::FeedRow;

#[derive(Debug, clap::Args)]
pub struct FeedsArgs {
    #[command(subcommand)]
    pub cmd: Option<FeedsCmd>,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum FeedsCmd {
    /// Cancel the appointments a feed lost at once (held for review).
    Confirm(ReviewArgs),
    /// Keep them: release the hold; the feed's current body is the baseline.
    Discard(ReviewArgs),
}

#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// The feed's `name` in `[[import.feed]]`.
    pub name: String,
    #[command(flatten)]
    pub who: Responsible,
    #[arg(long)]
    pub json: bool,
}

/// One feed as listed: its status row (never its URL), whether it is
/// configured here, and whether it is stale.
#[derive(Debug, Serialize)]
struct Listed {
    #[serde(flatten)]
    row: FeedRow,
    configured: bool,
    /// Failing for longer than `[alerts] feed_stale_minutes`.
    stale: bool,
}

pub fn run(ctx: &Ctx, a: FeedsArgs) -> anyhow::Result<ExitCode> {
    match a.cmd {
        None => list(ctx, a.json),
        Some(FeedsCmd::Confirm(r)) => review(ctx, r, true),
        Some(FeedsCmd::Discard(r)) => review(ctx, r, false),
    }
}

fn list(ctx: &Ctx, json: bool) -> anyhow::Result<ExitCode> {
    let mut store = ctx.open_existing()?;
    let rows = store.read(|tx| tx.feeds())?;
    let now = Utc::now();
    let minutes = ctx.config.alerts.feed_stale_minutes;
    let configured: Vec<&str> = ctx.config.import.feed.iter().map(|f| f.name.as_str()).collect();
    let mut listed: Vec<Listed> = rows
        .into_iter()
        .map(|row| Listed {
            configured: configured.contains(&row.name.as_str()),
            stale: is_stale(row.failing_since, now, minutes),
            row,
        })
        .collect();
    // A configured feed no `serve` polled yet is listed too.
    for f in &ctx.config.import.feed {
        if !listed.iter().any(|l| l.row.name == f.name) {
            listed.push(Listed {
                row: FeedRow {
                    name: f.name.clone(),
                    origin: "(not polled yet)".into(),
                    lease_owner: None,
                    lease_until: None,
                    etag: None,
                    last_modified: None,
                    last_poll_at: None,
                    last_success_at: None,
                    last_failure_at: None,
                    last_failure: None,
                    failing_since: None,
                    events_seen: 0,
                    events_applied: 0,
                    held: 0,
                },
                configured: true,
                stale: false,
            });
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "feeds": listed }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if listed.is_empty() {
        println!("no calendar feeds ([[import.feed]] in the configuration)");
    }
    let when =
        |t: Option<DateTime<Utc>>| t.map_or("never".to_string(), |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string());
    for l in &listed {
        let r = &l.row;
        let flag = match (l.stale, r.held > 0) {
            (true, _) => "  STALE",
            (_, true) => "  HELD",
            _ => "",
        };
        println!("{} ({}){flag}", inert(&r.name), inert(&r.origin));
        println!("  last success   {}", when(r.last_success_at));
        match (&r.last_failure, r.last_failure_at) {
            (Some(why), at) => println!("  last failure   {} — {}", when(at), inert(why)),
            _ => println!("  last failure   never"),
        }
        if let Some(since) = r.failing_since {
            println!("  failing since  {}", when(Some(since)));
        }
        println!(
            "  events         {} seen, {} applied (last body)",
            r.events_seen, r.events_applied
        );
        if r.held > 0 {
            println!(
                "  held           {} disappearance(s): `unavez feeds confirm {name}` cancels them, `unavez feeds discard {name}` keeps them",
                r.held,
                name = inert(&r.name)
            );
        }
        if let Some(owner) = &r.lease_owner {
            println!("  polled by      {} (until {})", inert(owner), when(r.lease_until));
        }
        if !l.configured {
            println!("  (not in this configuration)");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn review(ctx: &Ctx, a: ReviewArgs, confirm: bool) -> anyhow::Result<ExitCode> {
    super::errors::set_json(a.json);
    let kind = if confirm {
        OpKind::FeedConfirm
    } else {
        OpKind::FeedDiscard
    };
    let op = match operator_for(ctx, &a.who, kind, kind.as_str()) {
        Ok(op) => op,
        Err(code) => return Ok(code),
    };
    let mut store = ctx.open_existing()?;
    let planner = ctx.planner();
    let actor = Actor {
        name: &op.name,
        role: op.role,
    };
    let now = Utc::now();
    let result = store.write(|tx| ops::review_feed(tx, &planner, &actor, &a.name, confirm, &a.who.reason, now));
    match result {
        Ok(r) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else if confirm {
                println!(
                    "feed {}: {} held disappearance(s) confirmed, {} appointment(s) cancelled (action #{})",
                    inert(&r.feed),
                    r.held.len(),
                    r.cancelled.len(),
                    r.action_id
                );
            } else {
                println!(
                    "feed {}: {} held disappearance(s) discarded; the appointments stay (action #{})",
                    inert(&r.feed),
                    r.held.len(),
                    r.action_id
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ OpsError::UnknownFeed(_)) => Ok(super::errors::fail("unknown_feed", &e.to_string(), EXIT_BAD_INPUT)),
        Err(e @ OpsError::NothingHeld(_)) => Ok(super::errors::fail("nothing_held", &e.to_string(), EXIT_REFUSED)),
        Err(e @ OpsError::NotAllowed { .. }) => Ok(super::errors::fail("not_allowed", &e.to_string(), EXIT_REFUSED)),
        Err(e @ OpsError::ReasonRequired(_)) => {
            Ok(super::errors::fail("reason_required", &e.to_string(), EXIT_BAD_INPUT))
        }
        Err(e) => Err(e.into()),
    }
}
