//! `unavez ledger …`: `backup` and `restore` (in `backup.rs`), and `copy`, moving a clinic's SQLite ledger to the shared
//! PostgreSQL ledger (see `unavez_ledger::copy` for what is copied, what is
//! rebuilt and what is verified before the target commits).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::progress::Progress;
use unavez_ledger::copy::{CopyReport, copy_sqlite_to_pg};
use unavez_ledger::pg::PgUrl;

/// `unavez ledger …`
#[derive(Debug, Subcommand)]
pub enum LedgerCmd {
    /// Copy a SQLite ledger into an empty PostgreSQL ledger (initialised
    /// or not), in batches, then verify row counts, keys and fingerprints.
    /// A non-empty target is refused; a failed copy leaves it empty.
    Copy(CopyArgs),
    /// An online, consistent copy of a SQLite ledger into DIR (also while
    /// `serve` runs), named with its UTC time, checked with quick_check,
    /// mode 0600. A PostgreSQL ledger: prints the pg_dump command to use
    /// and exits 3.
    Backup(super::backup::BackupArgs),
    /// Replace the SQLite ledger with a backup. Refused (exit 3) while a
    /// dispatcher runs on it, or for a copy that fails quick_check or is
    /// newer than this unavez; an older copy is migrated. The replaced
    /// ledger and its -wal/-shm are kept beside it, renamed
    /// `<name>.replaced-<UTC time>`.
    Restore(super::backup::RestoreArgs),
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The SQLite ledger file to copy (it is only read).
    #[arg(long)]
    pub from: PathBuf,
    /// The PostgreSQL ledger: postgres://user@host/database (the password
    /// from this URL or PGPASSWORD).
    #[arg(long)]
    pub to: String,
    /// The report as JSON (no progress bar).
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &super::Ctx, cmd: LedgerCmd) -> anyhow::Result<ExitCode> {
    let a = match cmd {
        LedgerCmd::Copy(a) => a,
        LedgerCmd::Backup(a) => return super::backup::backup(ctx, a),
        LedgerCmd::Restore(a) => return super::backup::restore(ctx, a),
    };
    let to = PgUrl::parse(&a.to)?;
    let progress = Progress::start(a.json, "copying");
    let report = copy_sqlite_to_pg(&a.from, &to, &mut |_table, done, total| {
        progress.set(done as usize, total as usize);
    })?;
    drop(progress);
    print_report(&a, &to, &report)?;
    Ok(ExitCode::SUCCESS)
}

fn print_report(a: &CopyArgs, to: &PgUrl, report: &CopyReport) -> anyhow::Result<()> {
    if a.json {
        let tables: serde_json::Map<String, serde_json::Value> =
            report.tables.iter().map(|(t, n)| (t.clone(), (*n).into())).collect();
        let out = serde_json::json!({
            "from": a.from.display().to_string(),
            "to": to.to_string(),
            "tables": tables,
            "intentions_verified": report.intentions_verified,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("copied {} into {}", a.from.display(), to);
    for (table, n) in &report.tables {
        println!("  {table:<26} {n:>10}");
    }
    println!(
        "verified: row counts, per-day counts, {} intention keys with their fingerprints",
        report.intentions_verified
    );
    Ok(())
}
