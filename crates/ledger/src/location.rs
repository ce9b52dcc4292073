//! Where the ledger is: one setting (`database` in the config, `--db`,
//! `UNAVEZ_DB`) picks the backend. A `postgres://` (or `postgresql://`)
//! URL, or a libpq `key=value` connection string (`host=… dbname=…`), is
//! the shared PostgreSQL ledger; anything else is a SQLite file. A
//! connection string is never taken for a file name: that would create a
//! second, empty ledger named after it, password included.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::pg::{PgError, PgUrl};

#[derive(Debug, Clone)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(Box<PgUrl>),
}

impl Location {
    /// Reads the setting; a malformed URL is an error naming what is wrong.
    pub fn parse(setting: &Path) -> Result<Location, PgError> {
        let s = setting.to_string_lossy();
        if PgUrl::names_postgres(&s) {
            Ok(Location::Postgres(Box::new(PgUrl::parse(&s)?)))
        } else {
            Ok(Location::Sqlite(setting.to_path_buf()))
        }
    }

    /// The location a console reads through: on PostgreSQL, connections
    /// that keep generic plans for its repeated screen statements
    /// ([`PgUrl::generic_plans`]); a SQLite file as it is (its prepared
    /// statements are never planned again per run).
    pub fn for_console(&self) -> Location {
        match self {
            Location::Sqlite(_) => self.clone(),
            Location::Postgres(url) => Location::Postgres(Box::new(url.generic_plans())),
        }
    }

    /// Whether a configuration file's value carries a password (refused:
    /// secrets come from the environment, never from a file).
    pub fn setting_has_password(setting: &Path) -> bool {
        let s = setting.to_string_lossy();
        PgUrl::names_postgres(&s) && PgUrl::has_password(&s)
    }
}

/// The path, or the URL without its password (a `key=value` setting is
/// shown as the equivalent URL).
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            Location::Postgres(u) => write!(f, "{u}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_setting_picks_the_backend() {
        assert!(matches!(
            Location::parse(Path::new("unavez.db")).unwrap(),
            Location::Sqlite(_)
        ));
        assert!(matches!(
            Location::parse(Path::new("postgresql://clinic@db/unavez")).unwrap(),
            Location::Postgres(_)
        ));
        let shown = Location::parse(Path::new("postgres://clinic:pw@db/unavez"))
            .unwrap()
            .to_string();
        assert_eq!(shown, "postgres://clinic@db:5432/unavez");
        assert!(Location::setting_has_password(Path::new(
            "postgres://clinic:pw@db/unavez"
        )));
        assert!(!Location::setting_has_password(Path::new(
            "postgres://clinic@db/unavez"
        )));
        assert!(!Location::setting_has_password(Path::new("clinic:pw@db.sqlite")));
        assert!(Location::parse(Path::new("postgres://clinic@db/")).is_err());
    }

    #[test]
    fn a_connection_string_is_postgres_and_never_a_file() {
        let kv = "host=127.0.0.1 user=postgres password=s3cr3t dbname=x";
        let l = Location::parse(Path::new(kv)).unwrap();
        assert!(matches!(l, Location::Postgres(_)), "{l:?}");
        assert_eq!(l.to_string(), "postgres://postgres@127.0.0.1:5432/x");
        assert!(!format!("{l:?}").contains("s3cr3t"));
        assert!(Location::setting_has_password(Path::new(kv)));
        assert!(!Location::setting_has_password(Path::new("host=db dbname=x")));
        // One postgres refuses (an unknown keyword) is still no file, and
        // its error hides the password.
        let e = Location::parse(Path::new("host=db usr=clinic password=s3cr3t dbname=x"))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
        let e = Location::parse(Path::new("usr=clinic password='a b s3cr3t'"))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
        // File names stay files, spaces and '=' included.
        for f in [
            "mi clinica.db",
            "unavez.db",
            "/srv/a=b/unavez.db",
            "data=1.db",
            "hostal.db",
        ] {
            assert!(
                matches!(Location::parse(Path::new(f)).unwrap(), Location::Sqlite(_)),
                "{f}"
            );
        }
    }
}
