//! The independent records a chaos run is judged by: the simulator's
//! ground-truth log of messages that went out (`sent.jsonl`), its state
//! journal (`engine-state.jsonl`, which stamps each command with the moment
//! the engine first received its key), and the harness's own timeline of
//! the imports it ran (`imports.jsonl`), which dates each booking change's
//! commit.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use chrono::DateTime;
use serde::{Deserialize, Serialize};

use super::ChaosError;
use super::check::{ChangeCommit, SentMessage};
use crate::chaos::ledger_view::VersionChange;

/// One `unavez import` the harness ran, on its own clock (ms since the
/// epoch). The import commits its one transaction and then exits, so
/// `finished_ms` is a commit time a few milliseconds late at most — late is
/// the lenient side for the checker, by that little.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportWindow {
    pub wave: usize,
    pub started_ms: i64,
    pub finished_ms: i64,
}

/// Appends one import window to `imports.jsonl` (kept for inspection).
pub fn log_import(path: &Path, w: &ImportWindow) -> Result<(), ChaosError> {
    let line = serde_json::to_string(w).map_err(|e| ChaosError::Io(e.to_string()))?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| writeln!(f, "{line}"))
        .map_err(|e| ChaosError::Io(format!("writing {}: {e}", path.display())))
}

/// When each booking change was committed: the end of the import that
/// applied it — the one whose window holds the ledger's `received_at`
/// (stamped by that import process before its transaction began). A change
/// outside every window (not imported by this harness) keeps its
/// `received_at`, which is earlier than its commit: only stricter.
pub fn change_commits(changes: &[VersionChange], imports: &[ImportWindow]) -> Vec<ChangeCommit> {
    changes
        .iter()
        .map(|c| {
            let committed_ms = imports
                .iter()
                .find(|w| w.started_ms <= c.received_at_ms && c.received_at_ms <= w.finished_ms)
                .map(|w| w.finished_ms)
                .unwrap_or(c.received_at_ms);
            ChangeCommit {
                commitment_id: c.commitment_id,
                version: c.version,
                committed_ms,
            }
        })
        .collect()
}

fn read_text(path: &Path) -> Result<String, ChaosError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(ChaosError::Io(format!("reading {}: {e}", path.display()))),
    }
}

fn rfc3339_ms(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.timestamp_millis())
}

/// Reads the simulator's ground-truth log.
pub fn read_sent(path: &Path) -> Result<Vec<SentMessage>, ChaosError> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| ChaosError::Log {
            path: path.to_path_buf(),
            line: n + 1,
            reason: e.to_string(),
        })?;
        let field = |name: &str| v.get(name).and_then(|x| x.as_str()).map(str::to_string);
        let (Some(key), Some(message_id)) = (
            field("key"),
            field("provider_message_id").or_else(|| field("command_id")),
        ) else {
            return Err(ChaosError::Log {
                path: path.to_path_buf(),
                line: n + 1,
                reason: "no key or message id".into(),
            });
        };
        out.push(SentMessage {
            key,
            message_id,
            correlation_id: field("correlation_id"),
            time_ms: field("time").as_deref().and_then(rfc3339_ms),
        });
    }
    Ok(out)
}

/// Key → when the engine first received it (ms), from the simulator's
/// state journal: every command record carries its `created_at`, set when
/// the engine stored the key. A torn last line (the simulator was killed
/// mid-write) is skipped, as the simulator's own replay does.
pub fn read_receipts(path: &Path) -> Result<HashMap<String, i64>, ChaosError> {
    let text = read_text(path)?;
    let mut out: HashMap<String, i64> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(cmd) = v.get("command") else { continue };
        let key = cmd.get("idempotency_key").and_then(|x| x.as_str());
        let created = cmd.get("created_at").and_then(|x| x.as_str()).and_then(rfc3339_ms);
        if let (Some(key), Some(at)) = (key, created) {
            out.entry(key.to_string())
                .and_modify(|t| *t = (*t).min(at))
                .or_insert(at);
        }
    }
    Ok(out)
}

/// Reads the harness's import timeline back.
pub fn read_imports(path: &Path) -> Result<Vec<ImportWindow>, ChaosError> {
    let text = read_text(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l).map_err(|e| ChaosError::Log {
                path: path.to_path_buf(),
                line: n + 1,
                reason: e.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_keep_the_first_creation_per_key_and_skip_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("engine-state.jsonl");
        std::fs::write(
            &p,
            concat!(
                r#"{"command":{"idempotency_key":"k1","created_at":"2026-01-01T00:00:01.000Z","estado":"en_cola"}}"#,
                "\n",
                r#"{"generation":{"instance_id":"i","generation":2}}"#,
                "\n",
                r#"{"command":{"idempotency_key":"k1","created_at":"2026-01-01T00:00:01.000Z","estado":"enviado"}}"#,
                "\n",
                r#"{"command":{"idempotency_key":"k2","created_at":"2026-01-01T00:00:02.500Z"}}"#,
                "\n",
                r#"{"command":{"idempotency_key":"k3","crea"#
            ),
        )
        .unwrap();
        let r = read_receipts(&p).unwrap();
        let base = rfc3339_ms("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(r.get("k1"), Some(&(base + 1_000)));
        assert_eq!(r.get("k2"), Some(&(base + 2_500)));
        assert_eq!(r.len(), 2);
        assert!(read_receipts(&dir.path().join("missing")).unwrap().is_empty());
    }

    #[test]
    fn a_change_is_committed_when_the_import_that_carried_it_finished() {
        let imports = [
            ImportWindow {
                wave: 0,
                started_ms: 1_000,
                finished_ms: 1_400,
            },
            ImportWindow {
                wave: 1,
                started_ms: 5_000,
                finished_ms: 7_200,
            },
        ];
        let change = |received_at_ms| VersionChange {
            commitment_id: 1,
            version: 2,
            event_id: "e".into(),
            received_at_ms,
        };
        let c = change_commits(&[change(1_100), change(5_001), change(9_000)], &imports);
        let at: Vec<i64> = c.iter().map(|c| c.committed_ms).collect();
        assert_eq!(at, [1_400, 7_200, 9_000]);
    }

    #[test]
    fn import_windows_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("imports.jsonl");
        let w = ImportWindow {
            wave: 3,
            started_ms: 10,
            finished_ms: 20,
        };
        log_import(&p, &w).unwrap();
        log_import(&p, &w).unwrap();
        assert_eq!(read_imports(&p).unwrap(), vec![w, w]);
    }
}
