//! Failpoints of the chaos harness, compiled in only with the `failpoints`
//! feature (the `unavez-chaos` crate enables it; the product never does).
//! They are armed only by the harness calling `fail::cfg`: nothing reads an
//! environment variable, so no setting can make a dispatcher abort.
//!
//! A point fires with `return(ACTION)`; the action word says what the
//! place does: `abort` (the process dies on the spot, like a SIGKILL),
//! `error` (the operation reports an injected failure), `busy` (a store
//! operation reports `SQLITE_BUSY`), `sleep=MS` (the caller waits).

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

impl Action {
    /// The action word of `return(WORD)`; `None` for an unknown word.
    pub fn parse(word: &str) -> Option<Action> {
        Some(match word {
            "abort" => Action::Abort,
            "error" => Action::Error,
            "busy" => Action::Busy,
            other => Action::Sleep(other.strip_prefix("sleep=")?.parse().ok()?),
        })
    }
}

/// Passes the failpoint `name`. Returns the action to take if it fires on
/// this hit (aborting right here for [`Action::Abort`]), `None` otherwise.
pub fn hit(name: &str) -> Option<Action> {
    let word = fail::eval(name, |arg| arg.unwrap_or_else(|| "abort".into()))?;
    let Some(action) = Action::parse(&word) else {
        // A crash test with a typo must not pass by testing nothing.
        eprintln!("failpoint {name}: unknown action {word:?}");
        std::process::abort();
    };
    if action == Action::Abort {
        eprintln!("failpoint {name} fired: aborting");
        std::process::abort();
    }
    Some(action)
}

/// The SQLite error an armed store failpoint injects: `SQLITE_BUSY` for
/// [`Action::Busy`] (so `StoreError::is_busy` sees it as contention),
/// `SQLITE_IOERR` otherwise (a write that failed).
pub fn sqlite_error(action: Action) -> rusqlite::Error {
    let code = match action {
        Action::Busy => rusqlite::ffi::SQLITE_BUSY,
        _ => rusqlite::ffi::SQLITE_IOERR,
    };
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some("injected by a failpoint".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_words_parse() {
        assert_eq!(Action::parse("abort"), Some(Action::Abort));
        assert_eq!(Action::parse("error"), Some(Action::Error));
        assert_eq!(Action::parse("busy"), Some(Action::Busy));
        assert_eq!(Action::parse("sleep=250"), Some(Action::Sleep(250)));
        for bad in ["", "explode", "sleep", "sleep=x"] {
            assert_eq!(Action::parse(bad), None, "{bad}");
        }
    }
}
