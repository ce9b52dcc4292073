//! `unavez import`, `unavez commitments …`, `unavez intents …`.
//!
//! Listings print an aligned table for people and, with `--json`, one JSON
//! document whose shape is documented in docs/reference/json.md.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use chrono::Utc;
use chrono_tz::Tz;
use clap::{Args, Subcommand};
use serde::Serialize;

use super::Ctx;
use super::progress::Progress;
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;
use crate::domain::text::inert;
use crate::import::{ImportError, ImportOptions, import_file_progress};
use crate::store::{CommitmentRow, IntentFilter, IntentionRow, RefusedEventRow, StoreError, Tx};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A .jsonl, .csv or .ics file.
    pub file: PathBuf,
    /// Store the valid rows and write the rejected ones to a file.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Where --skip-invalid writes rejected rows (default FILE.rejected).
    #[arg(long)]
    pub rejects: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// Which page of a listing.
#[derive(Debug, Clone, Copy, Args)]
pub struct Page {
    /// At most this many rows.
    #[arg(long, default_value_t = 200)]
    pub limit: u32,
    /// Skip this many rows first.
    #[arg(long, default_value_t = 0)]
    pub offset: u32,
}

#[derive(Debug, Subcommand)]
pub enum CommitmentsCmd {
    /// Commitments ordered by start time.
    List {
        #[command(flatten)]
        page: Page,
        #[arg(long)]
        json: bool,
    },
    /// One commitment: its state, event log and intentions.
    Show {
        reference: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum IntentsCmd {
    /// Intentions ordered by due time, filtered by state and operating day.
    List {
        /// Repeatable: --state uncertain --state review
        #[arg(long = "state")]
        states: Vec<IntentionState>,
        /// Operating day (YYYY-MM-DD, configured time zone).
        #[arg(long)]
        day: Option<OperatingDay>,
        /// Only this commitment.
        #[arg(long = "ref")]
        reference: Option<String>,
        #[command(flatten)]
        page: Page,
        #[arg(long)]
        json: bool,
    },
    /// One intention: content, full history in order, attempts, related.
    Show {
        /// Numeric id or idempotency key.
        id_or_key: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn import(ctx: &Ctx, a: ImportArgs) -> anyhow::Result<ExitCode> {
    let mut store = ctx.open_store()?;
    let opts = ImportOptions {
        skip_invalid: a.skip_invalid,
        rejects_path: a.rejects.clone(),
        source: a
            .file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    // On a terminal, a person sees a large file move (stderr only).
    let bar = Progress::start(a.json, &format!("importing {}", inert(&opts.source)));
    let result = import_file_progress(
        &mut store,
        &ctx.planner(),
        &a.file,
        &opts,
        &ctx.config.import,
        Utc::now(),
        &mut |done, total| bar.set(done, total),
    );
    drop(bar);
    let report = match result {
        Ok(r) => r,
        Err(ImportError::Rejected { rows, encoding }) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::json!({"file": a.file, "encoding": encoding, "stored": 0, "rejected": rows})
                );
            } else {
                // Its Display makes each row inert and keeps one per line.
                eprintln!("{}", ImportError::Rejected { rows, encoding });
            }
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e.into()),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}: {} event(s)", inert(&report.file), report.events);
        println!("  encoding          {}", report.encoding);
        println!("  stored            {}", report.stored);
        println!("  already present   {} (duplicate event ids)", report.duplicates);
        println!("  unchanged         {}", report.unchanged);
        println!("  stale (older version) {}", report.stale);
        println!(
            "  intentions planned {}, already present {}, closed {}",
            report.intentions_planned, report.intentions_already_present, report.intentions_closed
        );
        if let Some(c) = &report.calendar {
            println!(
                "  calendar          {} VEVENT(s), {} occurrence(s) of recurring events, {} refused",
                c.vevents, c.occurrences, c.refused
            );
            println!(
                "  skipped           {} all-day, {} past series, {} series beyond the horizon",
                c.skipped_all_day, c.skipped_past, c.skipped_beyond_horizon
            );
        }
        if report.intentions_held > 0 {
            println!(
                "  held for review   {} (text over WhatsApp's limit: not sent)",
                report.intentions_held
            );
        }
        for n in &report.notes {
            println!("  note: {}", inert(n));
        }
        for e in &report.rejected {
            eprintln!("rejected: {}", inert(&e.to_string()));
        }
        if let Some(f) = &report.rejects_file {
            eprintln!("rejected rows written to {}", inert(f));
        }
    }
    Ok(if report.rejected.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `println!` for listings, which are often piped into `head`: a closed
/// pipe ends the listing quietly (exit 0) instead of panicking.
macro_rules! out {
    ($($t:tt)*) => {
        if let Err(e) = writeln!(std::io::stdout(), $($t)*) {
            return closed_pipe(e);
        }
    };
}

pub(super) fn closed_pipe(e: std::io::Error) -> anyhow::Result<ExitCode> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(e.into())
    }
}

/// `--json` prints `doc` as one JSON document; otherwise `table` prints
/// for people.
fn json_or<T: Serialize>(
    json: bool,
    doc: &T,
    table: impl FnOnce() -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    if json {
        out!("{}", serde_json::to_string_pretty(doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    table()
}

pub fn commitments(ctx: &Ctx, c: CommitmentsCmd) -> anyhow::Result<ExitCode> {
    let mut store = ctx.open_existing()?;
    let tz = ctx.config.tz();
    match c {
        CommitmentsCmd::List { page, json } => {
            let rows = store.read(|tx| tx.list_commitments(page.limit, page.offset))?;
            json_or(json, &rows, || commitment_table(&rows, tz))
        }
        CommitmentsCmd::Show { reference, json } => {
            let d = match store.read(|tx| CommitmentDetail::read(tx, &reference)) {
                Ok(d) => d,
                Err(StoreError::NoCommitment(_)) => {
                    let t = crate::i18n::strings(ctx.config.language);
                    let message = crate::i18n::fill(t.cli.no_commitment, &[("reference", &inert(&reference))]);
                    return Err(super::errors::Said::new("no_commitment", message, 2).into());
                }
                Err(e) => return Err(e.into()),
            };
            json_or(json, &d.document(), || show_commitment(&d, tz))
        }
    }
}

fn commitment_table(rows: &[CommitmentRow], tz: Tz) -> anyhow::Result<ExitCode> {
    out!(
        "{:<16} {:<12} {:<11} {:>3} {:<17} {:<16}",
        "REF",
        "KIND",
        "STATUS",
        "V",
        "STARTS",
        "PHONE"
    );
    for r in rows {
        let c = &r.commitment;
        out!(
            "{:<16} {:<12} {:<11} {:>3} {:<17} {:<16}{}",
            inert(&c.reference),
            c.kind.as_str(),
            c.status.as_str(),
            c.version,
            c.starts_at
                .map(|t| t.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string())
                .unwrap_or_default(),
            c.phone.as_deref().map(mask_phone).unwrap_or_default(),
            if c.confirmed_at.is_some() { "  confirmed" } else { "" },
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One entry of a commitment's event log, as `Tx::commitment_events` reads
/// it: `(event_id, type, effect, version_before, version_after,
/// received_at)`.
type EventLogRow = (String, String, String, Option<i64>, Option<i64>, chrono::DateTime<Utc>);

/// `commitments show REF`: the commitment, its event log, the events
/// refused as conflicts, and its intentions.
struct CommitmentDetail {
    row: CommitmentRow,
    events: Vec<EventLogRow>,
    refused: Vec<RefusedEventRow>,
    intents: Vec<IntentionRow>,
}

impl CommitmentDetail {
    fn read(tx: &Tx<'_>, reference: &str) -> Result<CommitmentDetail, StoreError> {
        let row = tx
            .commitment(reference)?
            .ok_or_else(|| StoreError::NoCommitment(reference.to_string()))?;
        Ok(CommitmentDetail {
            row,
            events: tx.commitment_events(reference)?,
            refused: tx.refused_events(reference)?,
            intents: tx.list_intentions(&IntentFilter {
                commitment_ref: Some(reference.to_string()),
                limit: 1000,
                ..Default::default()
            })?,
        })
    }

    /// The `--json` document (docs/reference/json.md).
    fn document(&self) -> serde_json::Value {
        let events: Vec<_> = self
            .events
            .iter()
            .map(|(id, t, e, b, a, at)| serde_json::json!({"event_id": id, "type": t, "effect": e, "version_before": b, "version_after": a, "received_at": at}))
            .collect();
        serde_json::json!({
            "commitment": self.row, "events": events, "refused_events": self.refused, "intentions": self.intents
        })
    }
}

fn show_commitment(d: &CommitmentDetail, tz: Tz) -> anyhow::Result<ExitCode> {
    let c = &d.row.commitment;
    out!(
        "{} ({}) status {} version {}",
        inert(&c.reference),
        c.kind.as_str(),
        c.status.as_str(),
        c.version
    );
    if let Some(s) = c.starts_at {
        out!("  starts   {}", s.with_timezone(&tz).format("%Y-%m-%d %H:%M %Z"));
    }
    out!(
        "  contact  {} {}",
        inert(c.name.as_deref().unwrap_or("")),
        c.phone.as_deref().map(mask_phone).unwrap_or_default()
    );
    out!(
        "  service  {}  place {}",
        inert(c.service.as_deref().unwrap_or("-")),
        inert(c.location.as_deref().unwrap_or("-"))
    );
    if let Some(t) = c.confirmed_at {
        out!("  confirmed at {}", t.with_timezone(&tz).format("%Y-%m-%d %H:%M"));
    }
    if let Some(t) = c.manual_contact_at {
        out!("  manual contact at {}", t.with_timezone(&tz).format("%Y-%m-%d %H:%M"));
    }
    out!("events:");
    for (id, t, e, b, a, at) in &d.events {
        out!(
            "  {} {:<28} {:<9} v{}→v{}  {}",
            at.with_timezone(&tz).format("%m-%d %H:%M:%S"),
            inert(t),
            inert(e),
            b.map(|v| v.to_string()).unwrap_or("-".into()),
            a.map(|v| v.to_string()).unwrap_or("-".into()),
            inert(id)
        );
    }
    if !d.refused.is_empty() {
        out!("refused events (conflicts, not applied):");
        for r in &d.refused {
            out!(
                "  {} {:<28} {:<6} ×{} {}  {}",
                r.last_seen_at.with_timezone(&tz).format("%m-%d %H:%M:%S"),
                inert(&r.event_type),
                if r.open { "open" } else { "closed" },
                r.times,
                inert(&r.event_id),
                inert(&r.reason)
            );
        }
    }
    out!("intentions:");
    for i in &d.intents {
        out!(
            "  #{:<6} {:<40} {:<11} {}",
            i.id,
            inert(i.key.as_str()),
            i.state.as_str(),
            inert(i.state_reason.as_deref().unwrap_or_default())
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn intents(ctx: &Ctx, c: IntentsCmd) -> anyhow::Result<ExitCode> {
    let mut store = ctx.open_existing()?;
    let tz = ctx.config.tz();
    match c {
        IntentsCmd::List {
            states,
            day,
            reference,
            page,
            json,
        } => {
            let f = IntentFilter {
                states,
                day,
                commitment_ref: reference,
                limit: page.limit,
                offset: page.offset,
            };
            let rows = store.read(|tx| tx.list_intentions(&f))?;
            json_or(json, &rows, || intention_table(&rows, tz))
        }
        IntentsCmd::Show { id_or_key, json } => {
            let d = match store.read(|tx| tx.intention_detail(&id_or_key)) {
                Ok(d) => d,
                Err(StoreError::NoIntention(_)) => {
                    let message = super::intents_ops::no_intention(ctx, &id_or_key);
                    return Err(super::errors::Said::new("no_intention", message, 2).into());
                }
                Err(e) => return Err(e.into()),
            };
            let t = crate::i18n::strings(ctx.config.language);
            json_or(json, &d, || super::show::show_intention(t, &d, tz))
        }
    }
}

fn intention_table(rows: &[IntentionRow], tz: Tz) -> anyhow::Result<ExitCode> {
    out!(
        "{:>6} {:<42} {:<11} {:<16} {:<16} REASON",
        "ID",
        "KEY",
        "STATE",
        "DUE",
        "TO"
    );
    for r in rows {
        out!(
            "{:>6} {:<42} {:<11} {:<16} {:<16} {}",
            r.id,
            inert(r.key.as_str()),
            r.state.as_str(),
            r.due_at.with_timezone(&tz).format("%Y-%m-%d %H:%M"),
            mask_phone(&r.recipient),
            inert(r.state_reason.as_deref().unwrap_or_default())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `+51987654321` → `+51 9•• ••• 321`: enough to match a call, not to leak.
pub fn mask_phone(phone: &str) -> String {
    crate::domain::mask::mask_phone(phone)
}
