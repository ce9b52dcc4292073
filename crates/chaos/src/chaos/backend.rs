//! Where a chaos run keeps its ledger, and the faults only that backend
//! has.
//!
//! - **SQLite** (the default): a file in the run's directory, or `--db PATH`;
//!   several dispatchers are several processes on that one file. The
//!   write-lock fault is another connection's `BEGIN IMMEDIATE`.
//! - **PostgreSQL** (`--db postgres://…`): a fresh schema of its own in
//!   that database (`unavez_chaos_<seed>_<pid>`, reached through the URL's
//!   `options=-c search_path=…`), dropped at the end of a passing run unless
//!   kept. Every process connects with an `application_name` of its own,
//!   so a dispatcher's connections can be found in `pg_stat_activity` and
//!   terminated (`pg_terminate_backend`), and a frozen one can be seen to
//!   hold no transaction. The write-lock fault is `LOCK TABLE intentions IN
//!   EXCLUSIVE MODE` (readers go on, every writer waits).
//!
//! The harness reads the ledger through the product's own `Store` on
//! either backend ([`Backend::store`]); only these administrative
//! statements use a plain PostgreSQL client.

use std::path::{Path, PathBuf};
use std::time::Duration;

use unavez_ledger::location::Location;
use unavez_ledger::pg::url::redact;

use super::ChaosError;
use crate::store::{OpenOptions, Store, StoreError};

/// The run's ledger.
#[derive(Debug, Clone)]
pub enum Backend {
    Sqlite(PathBuf),
    Postgres(PgTarget),
}

/// A PostgreSQL run's schema and URLs.
#[derive(Debug, Clone)]
pub struct PgTarget {
    /// The URL given (`--db`), without a search path.
    base: String,
    pub schema: String,
    /// `base` with `search_path` set to the run's schema (and `public`,
    /// where the `pg_trgm` and `unaccent` extensions live).
    pub url: String,
}

fn pg_error(what: &str, e: postgres::Error) -> ChaosError {
    let detail = e
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string());
    ChaosError::Io(format!("PostgreSQL: {what}: {detail}"))
}

impl Backend {
    /// The ledger `--db` names (a path or a `postgres://` URL), or a file in
    /// `dir`. A PostgreSQL run's schema is created here.
    pub fn prepare(db: Option<&str>, dir: &Path, seed: u64) -> Result<Backend, ChaosError> {
        match db {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Ok(Backend::Postgres(PgTarget::create(url, seed)?))
            }
            Some(path) => {
                let path = PathBuf::from(path);
                if path.exists() {
                    return Err(ChaosError::Io(format!(
                        "{} already exists; a chaos run starts from a new ledger",
                        path.display()
                    )));
                }
                Ok(Backend::Sqlite(path))
            }
            None => Ok(Backend::Sqlite(dir.join("ledger.db"))),
        }
    }

    pub fn is_pg(&self) -> bool {
        matches!(self, Backend::Postgres(_))
    }

    pub fn name(&self) -> &'static str {
        if self.is_pg() { "postgres" } else { "sqlite" }
    }

    /// The ledger as the run's configuration files name it.
    pub fn setting(&self) -> String {
        match self {
            Backend::Sqlite(p) => p.display().to_string(),
            Backend::Postgres(t) => t.url.clone(),
        }
    }

    /// The `--db` a child process gets; `role` names its connections on
    /// PostgreSQL (`dispatcher-0`, `import`…).
    pub fn child_db(&self, role: &str) -> String {
        match self {
            Backend::Sqlite(p) => p.display().to_string(),
            Backend::Postgres(t) => format!("{}&application_name={}", t.url, t.app(role)),
        }
    }

    /// Where the ledger is, for this process's own connections.
    pub fn location(&self, role: &str) -> Result<Location, ChaosError> {
        Location::parse(Path::new(&self.child_db(role))).map_err(|e| ChaosError::Io(e.to_string()))
    }

    /// A connection of the harness's own (the ledger created and migrated
    /// on first use).
    pub fn store(&self, role: &str) -> Result<Store, ChaosError> {
        Ok(Store::open_location(&self.location(role)?, &OpenOptions::CREATE)?)
    }

    /// The ledger as the report shows it: the file, or the URL (with the
    /// run's search path, without a password) to inspect it with `psql` or
    /// `unavez --db`.
    pub fn shown(&self) -> String {
        match self {
            Backend::Sqlite(p) => p.display().to_string(),
            Backend::Postgres(t) => redact(&t.url),
        }
    }

    /// Another connection holds the ledger's write lock for `d` (see the
    /// module). Errors are the fault's, not the run's: ignored.
    pub fn hold_write_lock(&self, d: Duration) {
        match self {
            Backend::Sqlite(p) => {
                if let Ok(mut s) = Store::open(p) {
                    let _ = s.write(|_tx| {
                        std::thread::sleep(d);
                        Ok::<_, StoreError>(())
                    });
                }
            }
            Backend::Postgres(t) => {
                if let Ok(mut c) = t.admin_on(&t.url) {
                    let _ = c.batch_execute("BEGIN; LOCK TABLE intentions IN EXCLUSIVE MODE");
                    std::thread::sleep(d);
                    let _ = c.batch_execute("COMMIT");
                }
            }
        }
    }

    /// Whether the dispatcher `role` is outside every transaction right now
    /// (so, frozen, it holds no lock another process would wait for): on
    /// PostgreSQL every backend of it is `idle`; on SQLite nobody holds the
    /// write lock (a frozen reader blocks no writer under WAL).
    pub fn outside_transactions(&self, store: &Store, role: &str) -> Result<bool, ChaosError> {
        match self {
            Backend::Sqlite(_) => Ok(!store.write_locked()?),
            Backend::Postgres(t) => {
                let mut c = t.admin()?;
                let row = c
                    .query_one(
                        "SELECT count(*) FILTER (WHERE state IS DISTINCT FROM 'idle'), count(*)
                         FROM pg_stat_activity WHERE application_name = $1",
                        &[&t.app(role)],
                    )
                    .map_err(|e| pg_error("reading pg_stat_activity", e))?;
                let (busy, all): (i64, i64) = (row.get(0), row.get(1));
                Ok(busy == 0 && all > 0)
            }
        }
    }

    /// Drops a PostgreSQL run's schema (nothing for a file, which stays in
    /// the run's directory).
    pub fn drop_schema(&self) -> Result<(), ChaosError> {
        match self {
            Backend::Sqlite(_) => Ok(()),
            Backend::Postgres(t) => t
                .admin()?
                .batch_execute(&format!("DROP SCHEMA {} CASCADE", t.schema))
                .map_err(|e| pg_error(&format!("dropping schema {}", t.schema), e)),
        }
    }
}

impl PgTarget {
    fn create(base: &str, seed: u64) -> Result<PgTarget, ChaosError> {
        if base.contains("options=") {
            return Err(ChaosError::Io(
                "--db: the harness sets the URL's `options` (its own schema); give a URL without them".into(),
            ));
        }
        if parse_url(base)?.get_password().is_some() {
            return Err(ChaosError::Io(
                "--db: put the password in PGPASSWORD, not in the URL (the children's command lines and the \
                 report would carry it)"
                    .into(),
            ));
        }
        let schema = format!("unavez_chaos_{seed}_{}", std::process::id());
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}%2Cpublic");
        let t = PgTarget {
            base: base.to_string(),
            schema,
            url,
        };
        t.admin()?
            .batch_execute(&format!("CREATE SCHEMA {}", t.schema))
            .map_err(|e| pg_error(&format!("creating schema {}", t.schema), e))?;
        Ok(t)
    }

    /// The `application_name` of one role of this run (unique per run, so
    /// two runs on one server never cut each other's connections).
    pub fn app(&self, role: &str) -> String {
        format!("{}_{}", self.schema, role.replace('-', "_"))
    }

    /// An administrative connection (outside the ledger's schema).
    pub fn admin(&self) -> Result<postgres::Client, ChaosError> {
        self.admin_on(&self.base)
    }

    fn admin_on(&self, url: &str) -> Result<postgres::Client, ChaosError> {
        let mut config = parse_url(url)?;
        config.application_name(&self.app("harness_admin"));
        if config.get_password().is_none()
            && let Ok(p) = std::env::var("PGPASSWORD")
        {
            config.password(p);
        }
        config
            .connect(postgres::NoTls)
            .map_err(|e| pg_error(&format!("connecting to {}", redact(url)), e))
    }

    /// Terminates every connection of `role`; how many there were, and the
    /// server's clock (seconds since the epoch) just before.
    pub fn terminate(&self, role: &str) -> Result<(i64, f64), ChaosError> {
        let mut c = self.admin()?;
        let row = c
            .query_one(
                "SELECT extract(epoch FROM clock_timestamp())::float8,
                        (SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1)",
                &[&self.app(role)],
            )
            .map_err(|e| pg_error("pg_terminate_backend", e))?;
        Ok((row.get(1), row.get(0)))
    }

    /// Connections of `role` opened after `since` (the server's clock, as
    /// [`PgTarget::terminate`] returns it): it connected again.
    pub fn connected_since(&self, role: &str, since: f64) -> Result<i64, ChaosError> {
        let mut c = self.admin()?;
        c.query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = $1 AND extract(epoch FROM backend_start) > $2::float8",
            &[&self.app(role), &since],
        )
        .map(|r| r.get(0))
        .map_err(|e| pg_error("reading pg_stat_activity", e))
    }
}

fn parse_url(s: &str) -> Result<postgres::Config, ChaosError> {
    s.parse::<postgres::Config>()
        .map_err(|e| ChaosError::Io(format!("--db: invalid PostgreSQL URL {}: {e}", redact(s))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_shows_and_the_schema_does() {
        assert_eq!(
            redact("postgres://u:secret@h/db?options=-c%20search_path%3Ds"),
            "postgres://u:***@h/db?options=-c%20search_path%3Ds"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn a_sqlite_ledger_is_a_file_in_the_run_or_the_path_given() {
        let dir = tempfile::tempdir().unwrap();
        let b = Backend::prepare(None, dir.path(), 7).unwrap();
        assert_eq!(
            b.child_db("dispatcher-0"),
            dir.path().join("ledger.db").display().to_string()
        );
        assert_eq!(b.name(), "sqlite");
        let taken = dir.path().join("taken.db");
        std::fs::write(&taken, b"").unwrap();
        assert!(Backend::prepare(Some(taken.to_str().unwrap()), dir.path(), 7).is_err());
    }

    #[test]
    fn urls_the_harness_cannot_use_are_refused_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        for bad in [
            "postgres://u:pw@127.0.0.1/db",
            "postgres://u@127.0.0.1/db?options=-c%20search_path%3Dx",
        ] {
            let e = Backend::prepare(Some(bad), dir.path(), 7).unwrap_err().to_string();
            assert!(!e.contains("pw@"), "{e}");
        }
    }
}
