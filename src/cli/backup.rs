//! `unavez ledger backup` and `unavez ledger restore`: thin over
//! `unavez_app::backup` (what is copied, checked, kept and refused), in
//! the configured language (`i18n::backup`).
//! Exit codes as elsewhere: 0 done, 3 refused (a PostgreSQL ledger, a
//! dispatcher still running, a copy that fails its checks), 2 a backup
//! file that does not exist, 1 anything that kept the command from running.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use super::Ctx;
use super::errors::Said;
use crate::backup::{self, BackupError, RestoreError};
use crate::i18n::backup::{BackupWords, words};
use crate::i18n::fill;
use crate::store::StoreError;

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Directory for the copy (created, private, if missing); the copy is
    /// named with its UTC time: unavez-backup-YYYYMMDDTHHMMSS.mmmZ.db.
    pub dir: PathBuf,
    /// Keep only the newest N backups in DIR (older ones this command
    /// made are deleted; other files are never touched). Default: keep all.
    #[arg(long, value_name = "N")]
    pub keep: Option<u32>,
    /// The result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file to restore (a SQLite copy `ledger backup` made).
    pub src: PathBuf,
    /// The result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn backup(ctx: &Ctx, a: BackupArgs) -> anyhow::Result<ExitCode> {
    let w = words(ctx.config.language);
    let taken = match backup::take(&ctx.location, &a.dir, a.keep.unwrap_or(0), chrono::Utc::now()) {
        Ok(t) => t,
        Err(BackupError::Postgres { ledger, command }) => {
            // The command alone on stdout too, to copy or to schedule.
            if !a.json {
                println!("{command}");
            }
            let message = fill(w.postgres, &[("ledger", &ledger), ("command", &command)]);
            return Err(Said::new("postgres_ledger", message, 3).into());
        }
        Err(BackupError::Damaged { ledger, detail }) => {
            let message = fill(w.damaged, &[("ledger", &shown(&ledger)), ("detail", &detail)]);
            return Err(Said::new("backup_damaged", message, 3).into());
        }
        Err(e) => return Err(e.into()),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&taken)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}",
        fill(
            w.taken,
            &[
                ("path", &shown(&taken.path)),
                ("bytes", &taken.bytes.to_string()),
                ("n", &taken.intentions.to_string()),
                ("version", &taken.schema_version.to_string()),
            ],
        )
    );
    for p in &taken.pruned {
        println!("{}", fill(w.pruned, &[("path", &shown(p))]));
    }
    Ok(ExitCode::SUCCESS)
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

pub fn restore(ctx: &Ctx, a: RestoreArgs) -> anyhow::Result<ExitCode> {
    let w = words(ctx.config.language);
    let done = match backup::restore(&ctx.location, &a.src, ctx.gid, chrono::Utc::now()) {
        Ok(d) => d,
        Err(e) => {
            let (code, exit, message) = refusal(w, e)?;
            return Err(Said::new(code, message, exit).into());
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&done)?);
        return Ok(ExitCode::SUCCESS);
    }
    let migrated = if done.migrated { w.migrated } else { "" };
    println!(
        "{}",
        fill(
            w.restored,
            &[
                ("ledger", &shown(&done.ledger)),
                ("src", &shown(&a.src)),
                ("n", &done.intentions.to_string()),
                ("version", &done.schema_version.to_string()),
                ("migrated", migrated),
            ],
        )
    );
    for p in &done.moved_aside {
        println!("{}", fill(w.moved_aside, &[("path", &shown(p))]));
    }
    Ok(ExitCode::SUCCESS)
}

/// A refused restore as `(code, exit, message)`; a failure that is no
/// refusal (the disk, the ledger) is returned as the error it is.
fn refusal(w: &BackupWords, e: RestoreError) -> anyhow::Result<(&'static str, u8, String)> {
    Ok(match e {
        RestoreError::Source {
            src,
            source: StoreError::Missing { .. },
        } => ("no_such_backup", 2, fill(w.missing, &[("src", &shown(&src))])),
        RestoreError::Source { src, source } => (
            "backup_refused",
            3,
            fill(w.unreadable, &[("src", &shown(&src)), ("why", &source.to_string())]),
        ),
        RestoreError::InUse {
            ledger,
            host,
            pid,
            beat_at,
        } => (
            "ledger_in_use",
            3,
            fill(
                w.in_use,
                &[
                    ("ledger", &shown(&ledger)),
                    ("host", &host),
                    ("pid", &pid.to_string()),
                    ("at", &beat_at.format("%Y-%m-%d %H:%M:%S UTC").to_string()),
                ],
            ),
        ),
        RestoreError::Writing { ledger } => ("ledger_in_use", 3, fill(w.writing, &[("ledger", &shown(&ledger))])),
        RestoreError::Postgres { ledger } => ("postgres_ledger", 3, fill(w.restore_postgres, &[("ledger", &ledger)])),
        RestoreError::NotALedger { src } => ("backup_refused", 3, fill(w.not_a_ledger, &[("src", &shown(&src))])),
        RestoreError::Damaged { src, detail } => (
            "backup_refused",
            3,
            fill(w.src_damaged, &[("src", &shown(&src)), ("detail", &detail)]),
        ),
        RestoreError::TooNew { src, found, known } => (
            "backup_refused",
            3,
            fill(
                w.too_new,
                &[
                    ("src", &shown(&src)),
                    ("found", &found.to_string()),
                    ("known", &known.to_string()),
                ],
            ),
        ),
        e @ (RestoreError::Ledger { .. } | RestoreError::Io { .. }) => return Err(e.into()),
    })
}
