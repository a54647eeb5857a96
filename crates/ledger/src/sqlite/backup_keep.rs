//! `backup --keep N`: how many copies of a series of backups stay in their folder. A series
//! is the files named like the target but for their digits (the timer's
//! `ledger-YYYYMMDD-HHMM.db`: `ledger-20261203-0300.db`, `ledger-20261203-0400.db`, …), so
//! that the time in a name says which copy is newer: in one series every digit stands in the
//! same place, and the names sort as their times do. The name decides, not the file's mtime,
//! which a copy moved or copied back by hand does not keep.
//!
//! Only backup copies of the series are counted and deleted: regular files sealed by `backup`
//! (`backup_seal`). A file of another name (a copy kept by hand as `ledger-before-upgrade.db`,
//! a compressed `…db.gz`, a `restore`'s `.before-restore-…`, a backup's own temporary file),
//! anything not a plain file (a directory, a symlink) and any file that is not a sealed copy
//! (above all a ledger, whatever its name) stay as they are. The target itself is never
//! deleted here, nor a copy named later than it, nor the ledger being backed up.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

/// The fewest digits a target's name must hold to name a series: a date (`YYYYMMDD`), so
/// that a name like `ledger-v2.db` is not taken for one.
pub const MIN_DIGITS: usize = 8;

/// The copies named like one target, in the target's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    folder: PathBuf,
    /// The target's file name; its digits match any digit.
    pattern: String,
}

impl Series {
    /// The series `to` belongs to; `None` if its file name holds fewer than [`MIN_DIGITS`]
    /// digits (or is not UTF-8): its copies could not be told apart by time.
    pub fn of(to: &Path) -> Option<Series> {
        let pattern = to.file_name()?.to_str()?.to_string();
        if pattern.bytes().filter(u8::is_ascii_digit).count() < MIN_DIGITS {
            return None;
        }
        Some(Series {
            folder: crate::sqlite::access::folder_of(to),
            pattern,
        })
    }

    /// Whether `name` is of the series: as long as the pattern, a digit where it has one,
    /// every other character the same.
    pub fn matches(&self, name: &str) -> bool {
        name.len() == self.pattern.len()
            && name.bytes().zip(self.pattern.bytes()).all(|(n, p)| {
                if p.is_ascii_digit() {
                    n.is_ascii_digit()
                } else {
                    n == p
                }
            })
    }

    /// The backup copies of the series in its folder, oldest first (by name): regular files
    /// sealed by `backup` (`backup_seal`), but the one named `except` and the ledger itself.
    pub fn copies(&self, except: &Path, ledger: &Path) -> io::Result<Vec<PathBuf>> {
        let except = except.file_name();
        let ledger = fs::canonicalize(ledger).ok();
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.folder)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(text) = name.to_str() else { continue };
            // `file_type` does not follow a symlink: a link is never counted nor deleted.
            if Some(name.as_os_str()) == except
                || !self.matches(text)
                || !entry.file_type()?.is_file()
                || fs::canonicalize(entry.path()).ok() == ledger
                || !is_backup_copy(&entry.path())
            {
                continue;
            }
            names.push(text.to_string());
        }
        names.sort();
        Ok(names.into_iter().map(|n| self.folder.join(n)).collect())
    }

    /// Deletes the copies of the series (`except` and `ledger` left out and left alone) but
    /// the `keep` newest, and only those older than `except` by name: a copy named later
    /// (taken before the clock was set back) counts among the newest but is never deleted for
    /// the one named earlier. Those deleted, oldest first. A copy already gone is not an
    /// error. On the first copy that cannot be deleted: that copy and why, the others not
    /// tried.
    pub fn prune(
        &self,
        except: &Path,
        ledger: &Path,
        keep: usize,
    ) -> Result<Vec<PathBuf>, (PathBuf, io::Error)> {
        let copies = self
            .copies(except, ledger)
            .map_err(|e| (self.folder.clone(), e))?;
        let old = copies.len().saturating_sub(keep);
        let mut deleted = Vec::with_capacity(old);
        let older = |copy: &PathBuf| copy.file_name() < except.file_name();
        for copy in copies.into_iter().take(old).filter(older) {
            match fs::remove_file(&copy) {
                Ok(()) => deleted.push(copy),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err((copy, e)),
            }
        }
        Ok(deleted)
    }
}

/// Whether `path` is a copy `backup` made: an SQLite file sealed as a backup. Never a ledger,
/// which is never sealed (a relay refuses a sealed file): whatever its name, a ledger in the
/// backups' folder is not deleted. A file with a `-wal` or `-shm` beside it is a ledger in
/// WAL mode and is not even opened; anything SQLite cannot read is no copy.
fn is_backup_copy(path: &Path) -> bool {
    let beside = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        Path::new(&p).symlink_metadata().is_ok()
    };
    if beside("-wal") || beside("-shm") {
        return false;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Connection::open_with_flags(path, flags)
        .and_then(|conn| crate::sqlite::backup_seal::snapshot_at(&conn))
        .is_ok_and(|sealed| sealed.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(paths: &[PathBuf]) -> Vec<String> {
        paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_series_is_the_names_that_differ_only_in_their_digits() {
        let s = Series::of(Path::new("/b/ledger-20261203-0300.db")).unwrap();
        assert_eq!(s.folder, Path::new("/b"));
        assert!(s.matches("ledger-20261203-0300.db"));
        assert!(s.matches("ledger-19990101-2359.db"));
        for other in [
            "ledger-2026120-0300.db",
            "ledger-20261203-0300.db.gz",
            "ledger-20261203-03x0.db",
            "Ledger-20261203-0300.db",
            ".ledger-20261203-0300.db.tmp-42",
            "ledger-20261203-0300.db-journal",
            "other-20261203-0300.db",
        ] {
            assert!(!s.matches(other), "{other}");
        }
        assert_eq!(Series::of(Path::new("b.db")), None, "no time in the name");
        assert_eq!(Series::of(Path::new("ledger-v2.db")), None);
        assert_eq!(
            Series::of(Path::new("ledger-20261203.db")).unwrap().folder,
            Path::new(".")
        );
    }

    /// A sealed backup copy at `path`, as `backup` leaves one (a `tx` table, sealed).
    fn sealed(path: &Path) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch("CREATE TABLE tx (guid TEXT); CREATE TABLE relay_health (x);")
            .unwrap();
        crate::sqlite::backup_seal::seal(&conn, "2026-01-01T00:00:00Z").unwrap();
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn prune_keeps_the_newest_and_touches_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let at = |n: &str| dir.path().join(n);
        for n in [
            "ledger-20260101-0100.db",
            "ledger-20260101-0000.db",
            "ledger-20260101-0300.db",
            "ledger-20260101-0200.db",
            "ledger-20260103-0000.db",
            "ledger-kept-by-hand.db",
            "ledger-20260101-0000.db.gz",
            "notes-20260101-0000.db",
        ] {
            sealed(&at(n));
        }
        // Of the series by name, but no copy: a file SQLite cannot read, an unsealed
        // database, a ledger in WAL mode (its -wal beside it), the ledger being backed up.
        fs::write(at("ledger-20191231-0000.db"), "notes").unwrap();
        Connection::open(at("ledger-20190101-0000.db"))
            .unwrap()
            .execute_batch("CREATE TABLE tx (guid TEXT)")
            .unwrap();
        sealed(&at("ledger-20180101-0000.db"));
        fs::write(at("ledger-20180101-0000.db-wal"), "").unwrap();
        let ledger = at("ledger-20170101-0000.db");
        sealed(&ledger);
        fs::create_dir(at("ledger-20200101-0000.db")).unwrap();
        std::os::unix::fs::symlink(at("ledger-20260101-0000.db"), at("ledger-20210101-0000.db"))
            .unwrap();
        let to = at("ledger-20260102-0000.db");
        sealed(&to);
        let s = Series::of(&to).unwrap();
        assert_eq!(
            names(&s.copies(&to, &ledger).unwrap()),
            [
                "ledger-20260101-0000.db",
                "ledger-20260101-0100.db",
                "ledger-20260101-0200.db",
                "ledger-20260101-0300.db",
                "ledger-20260103-0000.db",
            ]
        );
        let before = names_in(dir.path());
        let deleted = s.prune(&to, &ledger, 2).unwrap();
        assert_eq!(
            names(&deleted),
            [
                "ledger-20260101-0000.db",
                "ledger-20260101-0100.db",
                "ledger-20260101-0200.db"
            ]
        );
        let left: Vec<String> = before
            .into_iter()
            .filter(|n| !names(&deleted).contains(n))
            .collect();
        assert_eq!(names_in(dir.path()), left);
        assert!(left.contains(&"ledger-20260101-0000.db.gz".to_string()));
        assert_eq!(
            s.prune(&to, &ledger, 2).unwrap(),
            Vec::<PathBuf>::new(),
            "idempotent"
        );
        assert_eq!(
            names(&s.prune(&to, &ledger, 0).unwrap()),
            ["ledger-20260101-0300.db"],
            "never one named later than the target"
        );
        for kept in [
            "ledger-20260103-0000.db",
            "ledger-20260102-0000.db",
            "ledger-20191231-0000.db",
            "ledger-20190101-0000.db",
            "ledger-20180101-0000.db",
            "ledger-20170101-0000.db",
            "ledger-20210101-0000.db",
        ] {
            assert!(at(kept).symlink_metadata().is_ok(), "{kept}");
        }
    }
}
