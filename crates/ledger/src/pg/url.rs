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

    /// The same ledger on connections the server keeps read-only: each
    /// starts with `default_transaction_read_only` on (a startup option,
    /// so it holds from the first statement), every transaction is then
    /// READ ONLY and a write is refused by the server (SQLSTATE 25006),
    /// whatever the caller's code does. `LISTEN` still works. For
    /// consoles that must not write (`tui --read-only`).
    pub fn read_only(&self) -> PgUrl {
        self.with_option(READ_ONLY_OPTION)
    }

    /// Whether connections from this URL are read-only ([`PgUrl::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.has_option(READ_ONLY_OPTION)
    }

    /// The same ledger on connections that run every prepared statement
    /// on its generic plan (`plan_cache_mode`), for the console. Its
    /// screens are a few large statements run again and again with new
    /// times and pages: planned afresh each time (PostgreSQL's default for
    /// statements whose parameters move the estimates) the planning cost
    /// as much as running them, 2–8 ms of the Atención page at a million
    /// intentions, while the generic plan uses the same indexes. A startup
    /// option, so a reconnected console keeps it.
    pub fn generic_plans(&self) -> PgUrl {
        self.with_option(GENERIC_PLANS_OPTION)
    }

    /// Whether connections from this URL use generic plans ([`PgUrl::generic_plans`]).
    pub fn has_generic_plans(&self) -> bool {
        self.has_option(GENERIC_PLANS_OPTION)
    }

    fn has_option(&self, option: &str) -> bool {
        self.config.get_options().is_some_and(|o| o.contains(option))
    }

    fn with_option(&self, option: &str) -> PgUrl {
        if self.has_option(option) {
            return self.clone();
        }
        let mut config = self.config.clone();
        let options = match config.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} {option}"),
            _ => option.to_string(),
        };
        config.options(&options);
        PgUrl { config }
    }
}

/// The startup option of [`PgUrl::read_only`].
const READ_ONLY_OPTION: &str = "-c default_transaction_read_only=on";
/// The startup option of [`PgUrl::generic_plans`].
const GENERIC_PLANS_OPTION: &str = "-c plan_cache_mode=force_generic_plan";

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

/// The URL with any password replaced (its query kept: it may name the
/// schema), for messages.
pub fn redact(s: &str) -> String {
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

    #[test]
    fn a_read_only_url_keeps_the_other_options_and_is_shown_alike() {
        let u = PgUrl::parse("postgres://clinic@db/unavez?options=-c%20search_path%3Dsede1%2Cpublic").unwrap();
        assert!(!u.is_read_only());
        let ro = u.read_only();
        assert!(ro.is_read_only());
        assert_eq!(
            ro.config().get_options(),
            Some("-c search_path=sede1,public -c default_transaction_read_only=on")
        );
        assert_eq!(ro.to_string(), u.to_string());
        assert_eq!(ro.read_only().config().get_options(), ro.config().get_options());
        let bare = PgUrl::parse("postgres://clinic@db/unavez").unwrap().read_only();
        assert_eq!(bare.config().get_options(), Some("-c default_transaction_read_only=on"));
        // A console's read-only URL with generic plans keeps both options.
        let console = ro.generic_plans();
        assert!(console.is_read_only() && console.has_generic_plans());
        assert_eq!(
            console.generic_plans().config().get_options(),
            console.config().get_options()
        );
        assert_eq!(console.to_string(), u.to_string());
    }
}
