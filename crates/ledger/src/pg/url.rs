//! A PostgreSQL ledger's address. The password never comes from the
//! configuration file: it is in the URL only when the URL itself came from
//! the environment or the command line (`UNAVEZ_DB`, `--db`), otherwise
//! from `PGPASSWORD`. The URL is shown without it.

use std::fmt;
use std::str::FromStr;

use postgres::config::Host;

use super::PgError;

/// A parsed `postgres://` (or `postgresql://`) URL.
#[derive(Clone)]
pub struct PgUrl {
    config: postgres::Config,
}

impl PgUrl {
    /// Whether `s` names a PostgreSQL ledger (anything else is a SQLite path).
    pub fn is_url(s: &str) -> bool {
        s.starts_with("postgres://") || s.starts_with("postgresql://")
    }

    /// Parses `s`; without a password in it, `PGPASSWORD` is used if set.
    pub fn parse(s: &str) -> Result<PgUrl, PgError> {
        if !Self::is_url(s) {
            return Err(PgError::Url(format!(
                "not a PostgreSQL URL (expected postgres://user@host/database): {s}"
            )));
        }
        let mut config = postgres::Config::from_str(s)
            .map_err(|e| PgError::Url(format!("invalid PostgreSQL URL {}: {e}", redact(s))))?;
        if config.get_dbname().is_none_or(str::is_empty) {
            return Err(PgError::Url(format!(
                "PostgreSQL URL {} names no database (postgres://user@host/database)",
                redact(s)
            )));
        }
        if config.get_password().is_none()
            && let Ok(p) = std::env::var("PGPASSWORD")
        {
            config.password(p);
        }
        Ok(PgUrl { config })
    }

    /// Whether the URL text carries a password (refused in a config file).
    pub fn has_password(s: &str) -> bool {
        postgres::Config::from_str(s).is_ok_and(|c| c.get_password().is_some())
    }

    pub fn config(&self) -> &postgres::Config {
        &self.config
    }
}

/// `postgres://user@host:port/db`, never the password.
impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        let user = c.get_user().unwrap_or("");
        let host = match c.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        let port = c.get_ports().first().copied().unwrap_or(5432);
        write!(f, "postgres://{user}@{host}:{port}/{}", c.get_dbname().unwrap_or(""))
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({self})")
    }
}

/// The URL with any password replaced, for error messages.
fn redact(s: &str) -> String {
    match (s.find("://"), s.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &s[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!("{}{}:***{}", &s[..scheme + 3], &userinfo[..colon], &s[at..]),
                None => s.to_string(),
            }
        }
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths_are_told_apart() {
        assert!(PgUrl::is_url("postgres://u@h/db"));
        assert!(PgUrl::is_url("postgresql://u@h/db"));
        assert!(!PgUrl::is_url("unavez.db"));
        assert!(!PgUrl::is_url("/var/lib/unavez/postgres.db"));
    }

    #[test]
    fn a_password_is_never_shown() {
        let u = PgUrl::parse("postgres://clinic:s3cret@db.example:6543/unavez").unwrap();
        assert_eq!(u.to_string(), "postgres://clinic@db.example:6543/unavez");
        assert!(!format!("{u:?}").contains("s3cret"));
        assert!(PgUrl::has_password("postgres://clinic:s3cret@db/unavez"));
        assert!(!PgUrl::has_password("postgres://clinic@db/unavez"));
        let e = PgUrl::parse("postgres://clinic:s3cret@db.example/")
            .err()
            .unwrap()
            .to_string();
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.contains("names no database"), "{e}");
    }
}
