//! The ledger's files on disk: it holds patients' names and phones, so it
//! is created private (0600), or shared with one group (0660) when the
//! configuration names one. SQLite gives the `-wal` and `-shm` files the
//! database file's mode, so creating the database right covers them too.

use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of a new ledger or rejects file.
pub fn private_mode(group: Option<u32>) -> u32 {
    if group.is_some() { 0o660 } else { 0o600 }
}

/// Creates an empty file (a valid empty SQLite database) with
/// [`private_mode`], owned by `group` when given. Fails if it exists.
pub fn create_private(path: &Path, group: Option<u32>) -> io::Result<()> {
    let mode = private_mode(group);
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    share(&file, path, group, mode)
}

/// Writes `contents` to a new or truncated file created with
/// [`private_mode`] (the rejects file of an import: rows with names and
/// phones). An existing file keeps its owner but gets the mode.
pub fn write_private(path: &Path, contents: &[u8], group: Option<u32>) -> io::Result<()> {
    use std::io::Write as _;
    let mode = private_mode(group);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    share(&file, path, group, mode)?;
    file.write_all(contents)?;
    file.sync_all()
}

fn share(file: &fs::File, path: &Path, group: Option<u32>, mode: u32) -> io::Result<()> {
    if let Some(gid) = group {
        std::os::unix::fs::chown(path, None, Some(gid))?;
    }
    // The umask may have taken bits `mode` asks for (0660 under 022).
    file.set_permissions(fs::Permissions::from_mode(mode))
}

/// Gives the ledger's `-wal` and `-shm` files (when this process owns
/// them) to `gid` with mode 0660; best effort, a warning on failure.
pub fn share_companions(db: &Path, gid: u32) {
    for p in companions(db) {
        if !p.exists() {
            continue;
        }
        let r = std::os::unix::fs::chown(&p, None, Some(gid))
            .and_then(|_| fs::set_permissions(&p, fs::Permissions::from_mode(0o660)));
        if let Err(e) = r {
            tracing::warn!(file = %p.display(), error = %e, "cannot give the ledger file to its group");
        }
    }
}

/// The database and its companions.
pub fn companions(db: &Path) -> [PathBuf; 2] {
    let with = |suffix: &str| {
        let mut s = db.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    [with("-wal"), with("-shm")]
}

/// Renames the database `db` to `aside`, with its `-wal` and `-shm`
/// (those present) to `aside`'s own `-wal` and `-shm`, so the set stays a
/// database SQLite opens whole. The companions go first: a `-wal` left
/// beside a new file of the old name would be replayed into it. Returns
/// the paths moved to; on an error, what had moved is moved back.
pub fn move_aside(db: &Path, aside: &Path) -> io::Result<Vec<PathBuf>> {
    let mut pairs: Vec<(PathBuf, PathBuf)> = companions(db)
        .into_iter()
        .zip(companions(aside))
        .filter(|(from, _)| from.exists())
        .collect();
    pairs.push((db.to_path_buf(), aside.to_path_buf()));
    let mut moved: Vec<&(PathBuf, PathBuf)> = Vec::new();
    for pair in &pairs {
        if aside_taken(&pair.1) {
            let e = io::Error::new(io::ErrorKind::AlreadyExists, format!("{} exists", pair.1.display()));
            return Err(undo(&moved, e));
        }
        if let Err(e) = fs::rename(&pair.0, &pair.1) {
            return Err(undo(&moved, e));
        }
        moved.push(pair);
    }
    Ok(pairs.into_iter().map(|(_, to)| to).collect())
}

fn aside_taken(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}

fn undo(moved: &[&(PathBuf, PathBuf)], e: io::Error) -> io::Error {
    for (from, to) in moved.iter().rev() {
        let _ = fs::rename(to, from);
    }
    e
}

/// The permission bits of the ledger when others (neither owner nor
/// group) may read it: a start-up warning.
pub fn readable_by_others(db: &Path) -> Option<u32> {
    let mode = fs::metadata(db).ok()?.permissions().mode() & 0o777;
    (mode & 0o004 != 0).then_some(mode)
}

/// Why this process cannot write the file, if it cannot (permissions, a
/// read-only mount). Asks `access(2)` and never opens the file: closing
/// any descriptor of the database drops every POSIX lock this process's
/// SQLite connections hold on it (SQLite's documented pitfall), and
/// another process could then delete the WAL under them.
pub fn unwritable_reason(path: &Path) -> Option<String> {
    match nix::unistd::access(path, nix::unistd::AccessFlags::W_OK) {
        Ok(()) => None,
        Err(e) => Some(format!("cannot write it: {}", std::io::Error::from(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.db");
        create_private(&p, None).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(create_private(&p, None).is_err(), "never over an existing file");
        let r = dir.path().join("r.csv");
        write_private(&r, b"a\n", None).unwrap();
        assert_eq!(fs::metadata(&r).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(readable_by_others(&r), None);
        fs::set_permissions(&r, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(readable_by_others(&r), Some(0o644));
    }

    #[test]
    fn a_database_moves_aside_with_its_companions() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("l.db");
        let [wal, shm] = companions(&db);
        for p in [&db, &wal] {
            fs::write(p, b"x").unwrap();
        }
        let aside = dir.path().join("l.db.old");
        let moved = move_aside(&db, &aside).unwrap();
        let [aside_wal, aside_shm] = companions(&aside);
        assert_eq!(moved, vec![aside_wal.clone(), aside.clone()]);
        assert!(!db.exists() && !wal.exists() && !shm.exists());
        assert!(aside.exists() && aside_wal.exists() && !aside_shm.exists());
        // A taken name moves nothing.
        fs::write(&db, b"y").unwrap();
        fs::write(&wal, b"y").unwrap();
        assert!(move_aside(&db, &aside).is_err());
        assert!(db.exists() && wal.exists());
    }
}
