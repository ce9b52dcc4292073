//! `unavez ledger backup` and `unavez ledger restore`: thin over
//! `unavez_app::backup` (what is copied, checked, kept and refused).
//! Exit codes as elsewhere: 0 done, 3 refused (a PostgreSQL ledger, a
//! dispatcher still running, a copy that fails its checks), 2 a backup
//! file that does not exist, 1 anything that kept the command from running.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::Ctx;
use super::errors::Said;
use crate::backup::{self, BackupError, RestoreError};
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
    let taken = match backup::take(&ctx.location, &a.dir, a.keep.unwrap_or(0), chrono::Utc::now()) {
        Ok(t) => t,
        Err(e @ BackupError::Postgres { .. }) => {
            // The command alone on stdout too, to copy or to schedule.
            if let (false, BackupError::Postgres { command, .. }) = (a.json, &e) {
                println!("{command}");
            }
            return Err(Said::new("postgres_ledger", e.to_string(), 3).into());
        }
        Err(e @ BackupError::Damaged { .. }) => return Err(Said::new("backup_damaged", e.to_string(), 3).into()),
        Err(e) => return Err(e.into()),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&taken)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "backup {} ({} bytes, {} intentions, schema {}): quick_check ok, mode 0600",
        taken.path.display(),
        taken.bytes,
        taken.intentions,
        taken.schema_version
    );
    for p in &taken.pruned {
        println!("  deleted older backup {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn restore(ctx: &Ctx, a: RestoreArgs) -> anyhow::Result<ExitCode> {
    let done = match backup::restore(&ctx.location, &a.src, ctx.gid, chrono::Utc::now()) {
        Ok(d) => d,
        Err(e) => {
            let (code, exit) = match &e {
                RestoreError::Source {
                    source: StoreError::Missing { .. },
                    ..
                } => ("no_such_backup", 2),
                RestoreError::InUse { .. } | RestoreError::Writing { .. } => ("ledger_in_use", 3),
                RestoreError::Postgres { .. } => ("postgres_ledger", 3),
                RestoreError::Source { .. }
                | RestoreError::NotALedger { .. }
                | RestoreError::Damaged { .. }
                | RestoreError::TooNew { .. } => ("backup_refused", 3),
                RestoreError::Ledger { .. } | RestoreError::Io { .. } => return Err(e.into()),
            };
            return Err(Said::new(code, e.to_string(), exit).into());
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&done)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "restored {} from {} ({} intentions, schema {}{})",
        done.ledger.display(),
        a.src.display(),
        done.intentions,
        done.schema_version,
        if done.migrated {
            ", migrated to this version"
        } else {
            ""
        }
    );
    for p in &done.moved_aside {
        println!("  moved aside {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
