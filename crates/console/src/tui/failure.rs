//! Why the database worker could not answer, kept typed so that the flash
//! line says it in the operator's language ("la base de datos está ocupada
//! por otro proceso…") and never shows a library's English text; the
//! technical text travels along, shortened on the flash line and whole in
//! the error's detail (`enter` while it shows, or `:error`).

// SQLite's error codes only, to tell a busy ledger from a full disk; the
// console runs no SQL.
use rusqlite as rusqlite_error;

use crate::dispatch::DispatchError;
use crate::ops::OpsError;
use crate::store::StoreError;

/// What went wrong, as the front desk needs to know it: what to do next
/// differs for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Another process held the ledger's lock past the busy timeout: try
    /// again in a moment.
    Busy,
    /// The disk holding the ledger is full.
    DiskFull,
    /// This process may not write the ledger file.
    ReadOnly,
    /// The ledger cannot be used: missing, damaged, unreadable.
    Ledger,
    /// The ledger was upgraded under this console: restart it.
    Upgraded,
    /// The intention or commitment is not in the ledger.
    NotFound,
    /// It changed in the meantime (a decision on a stale read, content
    /// that no longer matches): nothing was applied.
    Changed,
    /// The operator's role may not do this.
    NotAllowed,
    /// The WhatsApp channel could not be reached or answered nothing usable.
    Channel,
    /// No channel is configured: reprocessing can only be simulated.
    NoChannel,
    /// The dispatcher does not run inside this console.
    NoDispatcher,
    /// Reprocessing is not available in this console.
    Unavailable,
    /// Anything else (the detail says what).
    Other,
}

impl FailureKind {
    pub const ALL: [FailureKind; 13] = [
        FailureKind::Busy,
        FailureKind::DiskFull,
        FailureKind::ReadOnly,
        FailureKind::Ledger,
        FailureKind::Upgraded,
        FailureKind::NotFound,
        FailureKind::Changed,
        FailureKind::NotAllowed,
        FailureKind::Channel,
        FailureKind::NoChannel,
        FailureKind::NoDispatcher,
        FailureKind::Unavailable,
        FailureKind::Other,
    ];
}

/// A failure and its technical text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    /// The library's own text (English), for a technician.
    pub detail: String,
}

impl Failure {
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Failure {
        Failure {
            kind,
            detail: detail.into(),
        }
    }
}

fn sqlite_kind(e: &rusqlite_error::Error) -> FailureKind {
    use rusqlite_error::ErrorCode as C;
    match e {
        rusqlite_error::Error::SqliteFailure(f, _) => match f.code {
            C::DatabaseBusy | C::DatabaseLocked => FailureKind::Busy,
            C::DiskFull => FailureKind::DiskFull,
            C::ReadOnly | C::PermissionDenied => FailureKind::ReadOnly,
            C::DatabaseCorrupt | C::NotADatabase | C::CannotOpen | C::SystemIoFailure => FailureKind::Ledger,
            C::SchemaChanged => FailureKind::Upgraded,
            _ => FailureKind::Other,
        },
        _ => FailureKind::Other,
    }
}

/// The same kinds for the shared PostgreSQL ledger, by SQLSTATE: a write
/// refused by a read-only session (a `--read-only` console's), a lock or a
/// serialization conflict that gave up, a full disk, a role without the
/// right; a connection the server closed is the ledger's trouble, as an
/// unreachable server is.
fn pg_kind(e: &unavez_app::pg::PgError) -> FailureKind {
    use unavez_app::pg::PgError;
    match e {
        PgError::Connect { .. } | PgError::Migration { .. } | PgError::TooNew { .. } => FailureKind::Ledger,
        PgError::Sql(e) => match e.as_db_error().map(|db| db.code().code()) {
            Some("25006" | "42501") => FailureKind::ReadOnly,
            Some("55P03" | "40001" | "40P01") => FailureKind::Busy,
            Some("53100") => FailureKind::DiskFull,
            Some(_) => FailureKind::Other,
            None if e.is_closed() => FailureKind::Ledger,
            None => FailureKind::Other,
        },
        PgError::Url(_) => FailureKind::Other,
    }
}

impl From<&StoreError> for Failure {
    fn from(e: &StoreError) -> Failure {
        let kind = match e {
            StoreError::Sql(s) => sqlite_kind(s),
            StoreError::Open { source, .. } | StoreError::Migration { source, .. } => match sqlite_kind(source) {
                FailureKind::Other => FailureKind::Ledger,
                k => k,
            },
            StoreError::Missing { .. }
            | StoreError::Create { .. }
            | StoreError::Damaged { .. }
            | StoreError::Corrupt { .. } => FailureKind::Ledger,
            StoreError::ReadOnly { .. } => FailureKind::ReadOnly,
            StoreError::SchemaChanged { .. } | StoreError::TooNew { .. } => FailureKind::Upgraded,
            StoreError::NoIntention(_) | StoreError::NoAttempt(_) | StoreError::NoCommitment(_) => {
                FailureKind::NotFound
            }
            StoreError::Moved { .. } | StoreError::Conflict { .. } => FailureKind::Changed,
            // The shared ledger: an unreachable server is the ledger's
            // trouble, as a missing file is on SQLite.
            StoreError::Pg(p) => pg_kind(p),
            StoreError::NotOnPostgres(_) | StoreError::Task(_) => FailureKind::Other,
        };
        Failure::new(kind, e.to_string())
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure::from(&e)
    }
}

impl From<&OpsError> for Failure {
    fn from(e: &OpsError) -> Failure {
        match e {
            OpsError::Store(s) => Failure::from(s),
            OpsError::NotAllowed { .. } => Failure::new(FailureKind::NotAllowed, e.to_string()),
            OpsError::Changed => Failure::new(FailureKind::Changed, e.to_string()),
            OpsError::Channel(_) => Failure::new(FailureKind::Channel, e.to_string()),
            OpsError::ReasonRequired(_)
            | OpsError::Ingest(_)
            | OpsError::Key(_)
            | OpsError::UnknownFeed(_)
            | OpsError::NothingHeld(_) => Failure::new(FailureKind::Other, e.to_string()),
        }
    }
}

impl From<&DispatchError> for Failure {
    fn from(e: &DispatchError) -> Failure {
        match e {
            DispatchError::Store(s) => Failure::from(s),
            DispatchError::Worker(_) | DispatchError::Invalid(_) => Failure::new(FailureKind::Other, e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(code: rusqlite_error::ErrorCode) -> StoreError {
        StoreError::Sql(rusqlite_error::Error::SqliteFailure(
            rusqlite_error::ffi::Error { code, extended_code: 0 },
            Some("database is locked".into()),
        ))
    }

    #[test]
    fn store_errors_get_the_kind_the_desk_acts_on() {
        use rusqlite_error::ErrorCode as C;
        let cases = [
            (sql(C::DatabaseBusy), FailureKind::Busy),
            (sql(C::DatabaseLocked), FailureKind::Busy),
            (sql(C::DiskFull), FailureKind::DiskFull),
            (sql(C::ReadOnly), FailureKind::ReadOnly),
            (sql(C::DatabaseCorrupt), FailureKind::Ledger),
            (sql(C::ConstraintViolation), FailureKind::Other),
            (StoreError::NoIntention("42".into()), FailureKind::NotFound),
            (StoreError::Missing { path: "x.db".into() }, FailureKind::Ledger),
            (
                StoreError::SchemaChanged {
                    path: "x.db".into(),
                    found: 7,
                    known: 6,
                },
                FailureKind::Upgraded,
            ),
        ];
        for (e, kind) in cases {
            let f = Failure::from(&e);
            assert_eq!(f.kind, kind, "{e}");
            assert_eq!(f.detail, e.to_string());
        }
    }

    #[test]
    fn operator_and_dispatch_errors_keep_the_store_s_kind() {
        let f = Failure::from(&OpsError::Store(sql(rusqlite_error::ErrorCode::DatabaseBusy)));
        assert_eq!(f.kind, FailureKind::Busy);
        let f = Failure::from(&OpsError::NotAllowed {
            role: "front_desk",
            op: "pause_dispatch",
        });
        assert_eq!(f.kind, FailureKind::NotAllowed);
        let f = Failure::from(&DispatchError::Store(StoreError::NoCommitment("c".into())));
        assert_eq!(f.kind, FailureKind::NotFound);
        let f = Failure::from(&DispatchError::Invalid("--day".into()));
        assert_eq!((f.kind, f.detail.as_str()), (FailureKind::Other, "--day"));
    }
}
