//! Where the ledger is: one setting (`database` in the config, `--db`,
//! `UNAVEZ_DB`) picks the backend. A `postgres://` (or `postgresql://`)
//! URL is the shared PostgreSQL ledger; anything else is a SQLite file.

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
        if PgUrl::is_url(&s) {
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
        PgUrl::is_url(&s) && PgUrl::has_password(&s)
    }
}

/// The path, or the URL without its password.
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
}
