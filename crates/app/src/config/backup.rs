//! `[backup]`: periodic backups of a SQLite ledger inside `unavez serve`
//! (the same copy `unavez ledger backup` makes; see `crate::backup`).

use std::path::PathBuf;

use chrono::Duration;
use serde::{Deserialize, Serialize};

use crate::domain::backup::parse_every;

/// `[backup]`: off unless `every` and `dir` are both set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackupConfig {
    /// How often: a number and a unit, `"30m"`, `"1h"`, `"1d"` (at least a
    /// minute).
    pub every: Option<String>,
    /// Where the copies go (created private if missing). Best on another
    /// disk than the ledger's.
    pub dir: Option<PathBuf>,
    /// The newest copies kept in `dir`; older ones this service made are
    /// deleted. 0 keeps every copy.
    pub keep: u32,
}

impl Default for BackupConfig {
    fn default() -> Self {
        BackupConfig {
            every: None,
            dir: None,
            // Two days of hourly copies.
            keep: 48,
        }
    }
}

/// Periodic backups as configured: the period, the directory, how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Periodic {
    pub every: Duration,
    pub dir: PathBuf,
    pub keep: u32,
}

impl BackupConfig {
    /// The periodic backups, when configured (call after [`Self::validate`]).
    pub fn periodic(&self) -> Option<Periodic> {
        Some(Periodic {
            every: parse_every(self.every.as_deref()?).ok()?,
            dir: self.dir.clone()?,
            keep: self.keep,
        })
    }

    /// `(field, message)` of the first bad setting.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        match (&self.every, &self.dir) {
            (None, None) => Ok(()),
            (Some(_), None) => Err(("dir", "is required with every: where the copies go".into())),
            (None, Some(_)) => Err((
                "every",
                "is required with dir: how often to back up, like \"1h\"".into(),
            )),
            (Some(every), Some(dir)) => {
                parse_every(every).map_err(|m| ("every", m))?;
                if dir.as_os_str().is_empty() {
                    return Err(("dir", "is empty: name the directory for the copies".into()));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    #[test]
    fn the_section_is_off_by_default_and_checked_when_on() {
        assert_eq!(Config::default().backup.periodic(), None);
        let cfg = Config::parse(
            "[backup]\nevery = \"1h\"\ndir = \"/srv/copias\"\nkeep = 3\n",
            Path::new("c.toml"),
        )
        .unwrap();
        let p = cfg.backup.periodic().unwrap();
        assert_eq!(
            (p.every, p.dir.as_path(), p.keep),
            (chrono::Duration::hours(1), Path::new("/srv/copias"), 3)
        );
        for (bad, want) in [
            ("every = \"1h\"", "c.toml: backup.dir: is required with every"),
            ("dir = \"/srv\"", "c.toml: backup.every: is required with dir"),
            (
                "every = \"5s\"\ndir = \"/srv\"",
                "backup.every: \"5s\" is shorter than a minute",
            ),
            ("every = \"1 semana\"\ndir = \"/srv\"", "unknown unit"),
            ("every = \"1h\"\ndir = \"\"", "backup.dir: is empty"),
            ("keep = -1", "c.toml:2:"),
            ("cada = \"1h\"", "cada"),
        ] {
            let e = Config::parse(&format!("[backup]\n{bad}\n"), Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
