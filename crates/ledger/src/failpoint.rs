//! Failpoints for the chaos harness: named places in the dispatcher and the
//! store where a test can make the process die, or an operation fail, at
//! the Nth time the place is reached.
//!
//! They are configured only by the `UNAVEZ_FAILPOINT` environment variable,
//! read once, as a comma-separated list of `name:N[:action[:times]]`:
//!
//! - `after_claim:3` — abort the process (like a SIGKILL: no destructors, no
//!   flushing) the 3rd time the dispatcher passes `after_claim`;
//! - `store_commit:40:error` — the 40th commit fails with an injected I/O
//!   error instead of committing (the transaction is rolled back);
//! - `store_begin:10:busy:5` — the 10th to 14th transactions fail to begin
//!   with `SQLITE_BUSY`, as if another process held the write lock past the
//!   busy timeout;
//! - `before_send:1:sleep=3000` — the 1st claimed message waits 3 s between
//!   its claim and the pre-send check, as a busy runtime or a slow store can
//!   make it wait (only the dispatcher's async points honour `sleep`).
//!
//! Without the variable every check is one relaxed atomic load, so the
//! points stay in production code at no measurable cost, which keeps the
//! crash tests honest: they exercise the binary that ships.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms failpoints.
pub const ENV: &str = "UNAVEZ_FAILPOINT";

/// What an armed failpoint does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `std::process::abort()`: the process dies on the spot.
    Abort,
    /// The operation reports an injected failure (the caller decides which).
    Error,
    /// The operation reports `SQLITE_BUSY` (store points only).
    Busy,
    /// The caller waits this many milliseconds, then goes on.
    Sleep(u64),
}

#[derive(Debug)]
struct Point {
    name: String,
    at: u64,
    times: u64,
    action: Action,
    hits: AtomicU64,
}

/// Parses a `UNAVEZ_FAILPOINT` value; malformed entries are reported so a
/// typo never silently disarms a crash test.
pub fn parse(spec: &str) -> Result<Vec<(String, u64, Action, u64)>, String> {
    let mut out = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split(':').collect();
        let bad = || format!("{ENV}: bad entry {entry:?} (expected name:N[:abort|error|busy|sleep=MS[:times]])");
        if parts.len() < 2 || parts.len() > 4 || parts[0].is_empty() {
            return Err(bad());
        }
        let at: u64 = parts[1].parse().map_err(|_| bad())?;
        if at == 0 {
            return Err(bad());
        }
        let action = match parts.get(2).copied().unwrap_or("abort") {
            "abort" => Action::Abort,
            "error" => Action::Error,
            "busy" => Action::Busy,
            other => match other.strip_prefix("sleep=").map(str::parse::<u64>) {
                Some(Ok(ms)) => Action::Sleep(ms),
                _ => return Err(bad()),
            },
        };
        let times: u64 = match parts.get(3) {
            Some(t) => t.parse().map_err(|_| bad())?,
            None => 1,
        };
        out.push((parts[0].to_string(), at, action, times.max(1)));
    }
    Ok(out)
}

fn points() -> &'static [Point] {
    static POINTS: OnceLock<Vec<Point>> = OnceLock::new();
    POINTS.get_or_init(|| {
        let Ok(spec) = std::env::var(ENV) else {
            return Vec::new();
        };
        match parse(&spec) {
            Ok(v) => v
                .into_iter()
                .map(|(name, at, action, times)| Point {
                    name,
                    at,
                    times,
                    action,
                    hits: AtomicU64::new(0),
                })
                .collect(),
            Err(e) => {
                // A crash test with a typo must not pass by testing nothing.
                eprintln!("{e}");
                std::process::abort();
            }
        }
    })
}

/// Passes the failpoint `name`. Returns the action to take if it fires on
/// this hit (aborting right here for [`Action::Abort`]), `None` otherwise.
pub fn hit(name: &str) -> Option<Action> {
    let points = points();
    if points.is_empty() {
        return None;
    }
    for p in points.iter().filter(|p| p.name == name) {
        let n = p.hits.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= p.at && n < p.at + p.times {
            if p.action == Action::Abort {
                eprintln!("failpoint {name} fired at hit {n}: aborting");
                std::process::abort();
            }
            return Some(p.action);
        }
    }
    None
}

/// The SQLite error an armed store failpoint injects: `SQLITE_BUSY` for
/// [`Action::Busy`] (so `StoreError::is_busy` sees it as contention),
/// `SQLITE_IOERR` otherwise (a write that failed).
pub fn sqlite_error(action: Action) -> rusqlite::Error {
    let code = match action {
        Action::Busy => rusqlite::ffi::SQLITE_BUSY,
        _ => rusqlite::ffi::SQLITE_IOERR,
    };
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some(format!("injected by {ENV}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let v = parse("after_claim:3, store_commit:40:error,store_begin:10:busy:5,before_send:1:sleep=250").unwrap();
        assert_eq!(v[0], ("after_claim".into(), 3, Action::Abort, 1));
        assert_eq!(v[1], ("store_commit".into(), 40, Action::Error, 1));
        assert_eq!(v[2], ("store_begin".into(), 10, Action::Busy, 5));
        assert_eq!(v[3], ("before_send".into(), 1, Action::Sleep(250), 1));
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn rejects_malformed_entries() {
        for bad in [
            "after_claim",
            "after_claim:x",
            "after_claim:0",
            ":3",
            "a:1:explode",
            "a:1:error:x",
            "a:1:b:2:3",
            "a:1:sleep",
            "a:1:sleep=x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
