//! `unavez import FILE`: booking events from `.jsonl`, `.csv` (an agenda
//! export) or `.ics` (iCalendar), applied to the ledger.
//!
//! A file is refused whole by default when any row is bad: a clinic that
//! imports half an agenda and does not notice is worse off than one told
//! exactly which lines to fix. `--skip-invalid` stores the good rows and
//! writes the bad ones aside. Importing the same file twice changes nothing:
//! every row carries (or is given) a stable event id.
//!
//! Files are read as bytes and decoded here, before any reader sees them
//! ([`decode`]): UTF-8 with or without a byte-order mark, UTF-16 with one,
//! or Windows-1252; the report names the encoding used.

mod csv_agenda;
pub mod decode;
mod feed;
mod ics;

use std::fmt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

pub use decode::TextEncoding;
pub use feed::{FeedBody, parse_feed, ref_of_uid};
pub use ics::CalendarCounts;

use crate::config::ImportConfig;
use crate::domain::event::{BookingEvent, FieldError};
use crate::domain::text::inert;
use crate::ingest::{Outcome, ingest_each};
use crate::planner::Planner;
use crate::store::{EventEffect, Store, StoreError};

/// One event read from a file, with the line it came from.
#[derive(Debug, Clone)]
pub struct Row {
    pub line: usize,
    pub event: BookingEvent,
    /// The row's original text, written to the rejects file if refused.
    pub raw: String,
}

/// A bad row: `file:line: field: reason`.
#[derive(Debug, Clone, Serialize)]
pub struct RowError {
    pub file: String,
    pub line: usize,
    pub field: String,
    pub reason: String,
    #[serde(skip)]
    pub raw: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}: {}", self.file, self.line, self.field, self.reason)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: unsupported file type (expected .jsonl, .csv or .ics)")]
    UnsupportedType { path: PathBuf },
    /// Bad rows (or a file that cannot be decoded); `encoding` is how the
    /// file was read, when it could be.
    #[error("{}", format_rejected(.rows, *.encoding))]
    Rejected {
        rows: Vec<RowError>,
        encoding: Option<TextEncoding>,
    },
    #[error("cannot write rejected rows to {path}: {source}")]
    WriteRejects { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One row per line; each row made inert, since a reason may quote the
/// file's own text and this message is for a terminal.
fn format_rejected(errors: &[RowError], encoding: Option<TextEncoding>) -> String {
    // A file that was not plain UTF-8 says how it was read: a name that
    // looks wrong in the report is then explained.
    let read_as = match encoding {
        Some(e) if !e.is_plain_utf8() => format!(" (file read as {e})"),
        _ => String::new(),
    };
    let mut s = format!("{} row(s) rejected{read_as}; nothing was stored:", errors.len());
    for e in errors {
        s.push_str(&format!("\n  {}", inert(&e.to_string())));
    }
    s
}

pub(crate) fn row_errors(file: &str, line: usize, raw: &str, errs: Vec<FieldError>) -> Vec<RowError> {
    errs.into_iter()
        .map(|e| RowError {
            file: file.to_string(),
            line,
            field: e.field,
            reason: e.reason,
            raw: raw.to_string(),
        })
        .collect()
}

fn distinct_lines(errors: &[RowError]) -> usize {
    // A calendar event's errors name their own lines: count the event once.
    let mut lines: Vec<(usize, &str)> = errors
        .iter()
        .map(|e| match e.raw.starts_with("BEGIN:") {
            true => (0, e.raw.as_str()),
            false => (e.line, ""),
        })
        .collect();
    lines.sort_unstable();
    lines.dedup();
    lines.len()
}

/// Which reader a file goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Jsonl,
    Csv,
    Ics,
}

impl FileKind {
    /// By extension: `.jsonl`/`.ndjson`, `.csv`, `.ics`.
    pub fn of(path: &Path) -> Option<FileKind> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("jsonl") | Some("ndjson") => Some(FileKind::Jsonl),
            Some("csv") => Some(FileKind::Csv),
            Some("ics") => Some(FileKind::Ics),
            _ => None,
        }
    }
}

/// A file read into events and per-row errors.
#[derive(Debug)]
pub struct Parsed {
    pub rows: Vec<Row>,
    pub errors: Vec<RowError>,
    pub encoding: TextEncoding,
    /// A CSV's header line, as decoded, for the rejects file.
    pub header: Option<String>,
    /// Calendars: what was found, imported and skipped.
    pub calendar: Option<CalendarCounts>,
    /// Calendars: why events were skipped (all-day, past series…).
    pub notes: Vec<String>,
}

/// Reads a file into events and per-row errors, by extension. `tz` is the
/// operating zone, used for iCalendar floating times.
pub fn parse_file(path: &Path, tz: chrono_tz::Tz) -> Result<Parsed, ImportError> {
    parse_file_with(path, tz, &ImportConfig::default(), Utc::now())
}

/// [`parse_file`] with the `[import]` settings and the time recurring
/// events are expanded from.
pub fn parse_file_with(
    path: &Path,
    tz: chrono_tz::Tz,
    calendar: &ImportConfig,
    now: DateTime<Utc>,
) -> Result<Parsed, ImportError> {
    let Some(kind) = FileKind::of(path) else {
        return Err(ImportError::UnsupportedType {
            path: path.to_path_buf(),
        });
    };
    let bytes = std::fs::read(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let opts = ics::Options {
        tz,
        now,
        config: calendar,
    };
    parse_bytes_with(&bytes, &path.display().to_string(), kind, &opts).map_err(|e| ImportError::Rejected {
        rows: vec![e],
        encoding: None,
    })
}

/// Decodes a file's bytes and hands the text to its reader; `file` names
/// it in errors. A file that cannot be decoded is one error, at the line
/// where decoding failed, under the field `encoding`.
pub fn parse_bytes(bytes: &[u8], file: &str, kind: FileKind, tz: chrono_tz::Tz) -> Result<Parsed, RowError> {
    let config = ImportConfig::default();
    let opts = ics::Options {
        tz,
        now: Utc::now(),
        config: &config,
    };
    parse_bytes_with(bytes, file, kind, &opts)
}

/// Decodes `bytes` ([`decode`]), naming `file` in the error.
fn decode_named(bytes: &[u8], file: &str) -> Result<(String, TextEncoding), RowError> {
    decode::decode(bytes).map_err(|e| RowError {
        file: file.to_string(),
        line: e.line,
        field: "encoding".into(),
        reason: e.reason,
        raw: String::new(),
    })
}

fn parse_bytes_with(bytes: &[u8], file: &str, kind: FileKind, opts: &ics::Options<'_>) -> Result<Parsed, RowError> {
    let (text, encoding) = decode_named(bytes, file)?;
    let mut parsed = Parsed {
        rows: Vec::new(),
        errors: Vec::new(),
        encoding,
        header: (kind == FileKind::Csv).then(|| text.lines().next().unwrap_or_default().to_string()),
        calendar: None,
        notes: Vec::new(),
    };
    match kind {
        FileKind::Jsonl => (parsed.rows, parsed.errors) = parse_jsonl(&text, file),
        FileKind::Csv => (parsed.rows, parsed.errors) = csv_agenda::parse(&text, file),
        FileKind::Ics => {
            let p = ics::parse(&text, file, opts);
            (parsed.rows, parsed.errors) = (p.rows, p.errors);
            parsed.calendar = Some(p.counts);
            parsed.notes = p.notes;
        }
    }
    Ok(parsed)
}

/// One JSON object per line; blank lines and `#` comments are skipped.
pub fn parse_jsonl(text: &str, file: &str) -> (Vec<Row>, Vec<RowError>) {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    // A byte-order mark (Windows editors write one) is not part of the
    // first object.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        match BookingEvent::from_json(trimmed) {
            Ok(event) => rows.push(Row {
                line: i + 1,
                event,
                raw: line.to_string(),
            }),
            Err(errs) => errors.extend(row_errors(file, i + 1, line, errs)),
        }
    }
    (rows, errors)
}

/// The rejects file, re-importable as it is once fixed: every error of a
/// row as a `#` comment (skipped by the JSONL and CSV readers), then the
/// row once; a CSV keeps its header row (and its delimiter), an iCalendar
/// file its VCALENDAR wrapper (iCalendar has no comments: the reasons are
/// in the report). It is UTF-8; one read from another encoding starts with
/// a byte-order mark, so that Excel, which wrote the original, shows its
/// accents.
fn rejects_text(path: &Path, parsed_header: Option<&str>, encoding: TextEncoding, rejected: &[RowError]) -> String {
    let kind = FileKind::of(path);
    let ics = kind == Some(FileKind::Ics);
    let mut text = String::new();
    if !encoding.is_plain_utf8() && !ics {
        text.push('\u{feff}');
    }
    if kind == Some(FileKind::Csv) {
        let header = parsed_header
            .map(str::to_string)
            .unwrap_or_else(|| csv_agenda::COLUMNS.join(","));
        text.push_str(&format!("{}\n", header.trim_end_matches('\r')));
    }
    if ics {
        text.push_str("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//unavez//rejected rows//ES\r\n");
    }
    for (i, e) in rejected.iter().enumerate() {
        if !ics {
            text.push_str(&format!("# {}\n", e.to_string().replace('\n', " ")));
        }
        // A calendar event's errors name their own lines: its text once.
        let same_row = |n: &RowError| n.line == e.line || (n.raw == e.raw && e.raw.starts_with("BEGIN:"));
        let last_of_row = rejected.get(i + 1).is_none_or(|next| !same_row(next));
        if last_of_row && !e.raw.is_empty() {
            text.push_str(e.raw.trim_end_matches(['\r', '\n']));
            text.push_str(if ics { "\r\n" } else { "\n" });
        }
    }
    if ics {
        text.push_str("END:VCALENDAR\r\n");
    }
    text
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct ImportReport {
    pub file: String,
    /// How the file was decoded.
    pub encoding: TextEncoding,
    pub events: usize,
    pub stored: usize,
    pub duplicates: usize,
    pub stale: usize,
    pub unchanged: usize,
    pub intentions_planned: usize,
    pub intentions_already_present: usize,
    pub intentions_closed: usize,
    /// Reserved but held for a person (`review`): text over WhatsApp's limit.
    pub intentions_held: usize,
    pub rejected: Vec<RowError>,
    pub rejects_file: Option<String>,
    pub notes: Vec<String>,
    /// iCalendar files: VEVENTs found, occurrences, skipped and refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calendar: Option<CalendarCounts>,
}

impl ImportReport {
    pub(crate) fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Duplicate { .. } => self.duplicates += 1,
            Outcome::Stored {
                effect,
                planned,
                already_present,
                closed,
                held,
                notes,
                reference,
                ..
            } => {
                match effect {
                    EventEffect::Applied => self.stored += 1,
                    EventEffect::Stale => self.stale += 1,
                    EventEffect::NoChange => self.unchanged += 1,
                }
                self.intentions_planned += planned.len();
                self.intentions_already_present += already_present;
                self.intentions_closed += closed;
                self.intentions_held += held.len();
                for n in notes {
                    if self.notes.len() < 20 {
                        self.notes.push(format!("{reference}: {n}"));
                    }
                }
            }
        }
    }
}

pub struct ImportOptions {
    pub skip_invalid: bool,
    /// Where `--skip-invalid` writes rejected rows (default
    /// `NAME.rejected.EXT`, importable as it is).
    pub rejects_path: Option<PathBuf>,
    pub source: String,
}

/// `agenda.csv` → `agenda.rejected.csv`: the rejects file keeps an
/// extension `unavez import` reads.
pub fn default_rejects_path(file: &Path) -> PathBuf {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match file.extension() {
        Some(ext) => format!("{stem}.rejected.{}", ext.to_string_lossy()),
        None => format!("{stem}.rejected"),
    };
    file.with_file_name(name)
}

/// Events applied together (one savepoint, set-based reservations) while
/// none of them fails; also how often the progress bar moves.
pub const IMPORT_BATCH: usize = 256;

/// The rows whose appointment starts within `max_days` of `now`, and an
/// error (`file:line: starts_at: …`) for each of the others.
fn within_horizon(rows: Vec<Row>, file: &str, max_days: u32, now: DateTime<Utc>) -> (Vec<Row>, Vec<RowError>) {
    let mut far = Vec::new();
    let rows = rows
        .into_iter()
        .filter_map(|row| match row.event.check_horizon(now, max_days) {
            Ok(()) => Some(row),
            Err(e) => {
                far.extend(row_errors(file, row.line, &row.raw, vec![e]));
                None
            }
        })
        .collect();
    (rows, far)
}

/// Parses and applies a file in one transaction, with the `[import]`
/// defaults but the widest horizon (`max_days_ahead`): for library
/// callers with a clock of their own; `unavez import` applies the
/// configured one ([`import_file_progress`]).
pub fn import_file(
    store: &mut Store,
    planner: &Planner<'_>,
    path: &Path,
    opts: &ImportOptions,
    now: DateTime<Utc>,
) -> Result<ImportReport, ImportError> {
    let calendar = ImportConfig {
        max_days_ahead: crate::config::MAX_DAYS_AHEAD_LIMIT,
        ..ImportConfig::default()
    };
    import_file_progress(store, planner, path, opts, &calendar, now, &mut |_, _| {})
}

/// [`import_file`] with the `[import]` settings, telling `progress` how
/// many of the file's events were applied so far and how many there are
/// (after parsing, then after each event), for a progress bar.
pub fn import_file_progress(
    store: &mut Store,
    planner: &Planner<'_>,
    path: &Path,
    opts: &ImportOptions,
    calendar: &ImportConfig,
    now: DateTime<Utc>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ImportReport, ImportError> {
    let Parsed {
        rows,
        errors: mut rejected,
        encoding,
        header,
        calendar: counts,
        notes,
    } = parse_file_with(path, planner.tz, calendar, now)?;
    let file = path.display().to_string();
    let (rows, far) = within_horizon(rows, &file, calendar.max_days_ahead, now);
    rejected.extend(far);
    if !rejected.is_empty() && !opts.skip_invalid {
        return Err(ImportError::Rejected {
            rows: rejected,
            encoding: Some(encoding),
        });
    }
    let mut report = ImportReport {
        file: file.clone(),
        encoding,
        // One row may carry several errors: count rows, not errors.
        events: rows.len() + distinct_lines(&rejected),
        calendar: counts,
        notes: notes.into_iter().take(20).collect(),
        ..Default::default()
    };
    progress(0, rows.len());
    // PostgreSQL may roll the transaction back for a deadlock and run this
    // again (`Store::write`): the counts start over with it.
    let before = report.clone();
    let outcome: Result<Vec<RowError>, ImportError> = store.write(|tx| {
        report = before.clone();
        let batch = Batch {
            rows: &rows,
            file: &file,
            source: &opts.source,
            skip_invalid: opts.skip_invalid,
            encoding,
        };
        ingest_rows(tx, planner, &batch, now, &mut report, progress).map(|(late, _)| late)
    });
    rejected.extend(outcome?);
    if !rejected.is_empty() {
        let target = opts.rejects_path.clone().unwrap_or_else(|| default_rejects_path(path));
        let text = rejects_text(path, header.as_deref(), encoding, &rejected);
        // The rows hold names and phones: as private as the ledger.
        crate::store::files::write_private(&target, text.as_bytes(), None).map_err(|source| {
            ImportError::WriteRejects {
                path: target.clone(),
                source,
            }
        })?;
        report.rejects_file = Some(target.display().to_string());
    }
    report.rejected = rejected;
    Ok(report)
}

/// Rows to apply and what names them in errors.
pub(crate) struct Batch<'a> {
    pub rows: &'a [Row],
    pub file: &'a str,
    pub source: &'a str,
    /// Keep going past a row the ledger refuses (else the first one
    /// refuses the whole batch).
    pub skip_invalid: bool,
    pub encoding: TextEncoding,
}

/// Applies parsed rows inside `tx`, in batches of [`IMPORT_BATCH`]: the
/// one ingest path of `unavez import` and of calendar feeds. Returns the
/// rows the ledger refused and, per row, whether it applied.
pub(crate) fn ingest_rows(
    tx: &crate::store::Tx<'_>,
    planner: &Planner<'_>,
    batch: &Batch<'_>,
    now: DateTime<Utc>,
    report: &mut ImportReport,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vec<RowError>, Vec<bool>), ImportError> {
    let rows = batch.rows;
    let mut late = Vec::new();
    let mut applied = Vec::with_capacity(rows.len());
    let mut done = 0;
    for chunk in rows.chunks(IMPORT_BATCH) {
        // Each event whole or not at all, so a row refused by the
        // ledger's state (e.g. a reschedule of an unknown ref, a
        // conflicting version, a store error on that row) leaves no
        // trace when skipped; a conflict is kept as a refused event.
        let events: Vec<_> = chunk.iter().map(|row| &row.event).collect();
        for (row, result) in chunk.iter().zip(ingest_each(tx, planner, &events, batch.source, now)) {
            match result {
                Ok(o) => {
                    report.add(&o);
                    applied.push(true);
                }
                Err(e) => {
                    applied.push(false);
                    late.push(RowError {
                        file: batch.file.to_string(),
                        line: row.line,
                        field: e.field().into(),
                        reason: e.reason(),
                        raw: row.raw.clone(),
                    });
                    if !batch.skip_invalid {
                        return Err(ImportError::Rejected {
                            rows: late,
                            encoding: Some(batch.encoding),
                        });
                    }
                }
            }
        }
        done += chunk.len();
        progress(done, rows.len());
    }
    Ok((late, applied))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jsonl_bom_is_accepted_and_an_overlong_ref_is_named_ref() {
        let ok = r#"{"event_id":"e1","type":"appointment.cancelled","ref":"cita-1"}"#;
        let (rows, errors) = parse_jsonl(&format!("\u{feff}{ok}\n"), "a.jsonl");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(rows[0].line, 1);
        let long = ok.replace("cita-1", &format!("cita-{}", "x".repeat(300)));
        let (_, errors) = parse_jsonl(&long, "a.jsonl");
        assert_eq!(errors[0].field, "ref", "{errors:?}");
    }

    #[test]
    fn the_default_rejects_name_keeps_an_importable_extension() {
        assert_eq!(
            default_rejects_path(Path::new("/x/agenda.csv")),
            PathBuf::from("/x/agenda.rejected.csv")
        );
        assert_eq!(
            default_rejects_path(Path::new("citas.ics")),
            PathBuf::from("citas.rejected.ics")
        );
    }
}
