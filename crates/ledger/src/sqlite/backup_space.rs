//! How much room a backup may take (`backup --min-free`): before it writes a byte, a backup
//! estimates the copy's size and refuses when writing it would leave less than a floor free
//! on the target's filesystem. The floor matters most where the backups share the ledger's
//! disk, as the package's timer has them: a full disk is `E905` for every transfer, so a
//! backup that fills it stops the bank, where a backup refused costs one restore point and
//! an alert.
//!
//! The estimate is the ledger's `page_count × page_size`: `VACUUM INTO` writes the live pages
//! of one snapshot and leaves the free ones out, so the copy is never larger than the ledger
//! it is taken from. Rows committed between the estimate and the snapshot may add a few
//! pages; the floor is far wider than that.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The room a backup leaves free on its target's filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinFree {
    /// A share of the filesystem's size, in per cent (0 to 100): it scales with the disk,
    /// so the one default suits a small disk and a large one.
    Percent(u8),
    /// A number of bytes.
    Bytes(u64),
}

impl MinFree {
    /// The tool's default floor: 64 MiB, room for the ledger's growth (its `-wal` grows
    /// while a backup holds its snapshot; at 676 bytes a row, some 100,000 transfers) until
    /// someone frees space. Not a share of the disk: the contract's `backup --db DB --to
    /// FILE` must succeed on a machine whose large disk is merely busy (a tenth of 252 GiB
    /// refused a 56 KiB copy on CI's machine, under 25 GiB free). The package's timer, which
    /// keeps a day of copies on the ledger's own disk, sets its own: `BACKUP_MIN_FREE=10%`.
    pub const DEFAULT: MinFree = MinFree::Bytes(64 << 20);

    /// The floor in bytes on a filesystem of `size` bytes.
    pub fn bytes(self, size: u64) -> u64 {
        match self {
            MinFree::Percent(p) => (u128::from(size) * u128::from(p) / 100) as u64,
            MinFree::Bytes(b) => b,
        }
    }
}

impl Default for MinFree {
    fn default() -> MinFree {
        MinFree::DEFAULT
    }
}

impl fmt::Display for MinFree {
    /// As it can be written on the command line: `10%`, or bytes in the largest binary
    /// unit that divides them (`64MiB`, `1000`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MinFree::Percent(p) => write!(f, "{p}%"),
            MinFree::Bytes(0) => write!(f, "0"),
            MinFree::Bytes(b) => {
                let (unit, power) = [("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)]
                    .into_iter()
                    .find(|&(_, power)| b % 1024u64.pow(power) == 0)
                    .unwrap_or(("", 0));
                write!(f, "{}{unit}", b / 1024u64.pow(power))
            }
        }
    }
}

/// Binary units only, so that `1G` can mean nothing but 2^30 bytes; case does not matter.
const UNITS: [(&str, u32); 10] = [
    ("", 0),
    ("b", 0),
    ("k", 1),
    ("kib", 1),
    ("m", 2),
    ("mib", 2),
    ("g", 3),
    ("gib", 3),
    ("t", 4),
    ("tib", 4),
];

impl FromStr for MinFree {
    type Err = String;

    /// `10%` (a whole per cent, 0 to 100), or bytes: `1073741824`, `512MiB`, `1GiB`, `2T`
    /// (binary units K, M, G, T, with or without `iB`).
    fn from_str(s: &str) -> Result<MinFree, String> {
        let expected = "expected a whole percentage of the filesystem (10%) or a size in bytes \
                        (1073741824, 512MiB, 1GiB)";
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            return match p.trim().parse::<u8>() {
                Ok(p) if p <= 100 => Ok(MinFree::Percent(p)),
                _ => Err(expected.to_string()),
            };
        }
        let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let (number, unit) = s.split_at(digits);
        let unit = unit.trim().to_ascii_lowercase();
        let power = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|&(_, power)| power);
        match (number.parse::<u64>(), power) {
            (Ok(n), Some(power)) => n
                .checked_mul(1024u64.pow(power))
                .map(MinFree::Bytes)
                .ok_or_else(|| "more bytes than a disk can have".to_string()),
            _ => Err(expected.to_string()),
        }
    }
}

/// The room on a filesystem, as `statvfs(3)` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Bytes this process's user may still write (`f_bavail`: root's reserve left out,
    /// since the relay does not run as root).
    pub free: u64,
    /// The filesystem's size in bytes (`f_blocks`).
    pub size: u64,
}

/// The room on the filesystem that holds `path`.
pub fn room(path: &Path) -> io::Result<Room> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a valid NUL-terminated path and `stat` a properly sized out-parameter
    // that statvfs(3) fills in; it is read only after a successful call.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let unit = stat.f_frsize as u64;
    Ok(Room {
        free: (stat.f_bavail as u64).saturating_mul(unit),
        size: (stat.f_blocks as u64).saturating_mul(unit),
    })
}

/// A backup refused for want of room: writing it would leave less than the floor free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoRoom {
    /// The folder the copy would have been written in.
    pub folder: PathBuf,
    /// The room on its filesystem before anything was written.
    pub room: Room,
    /// The copy's estimated size (the ledger's pages).
    pub estimate: u64,
    /// The floor as given (`--min-free`).
    pub min_free: MinFree,
    /// The ledger is on the same filesystem.
    pub ledgers_own: bool,
}

impl fmt::Display for NoRoom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let floor = match self.min_free {
            MinFree::Percent(p) => format!(
                "{p}%, {} of {}",
                human(self.min_free.bytes(self.room.size)),
                human(self.room.size)
            ),
            MinFree::Bytes(b) => human(b),
        };
        let whose = if self.ledgers_own {
            "on the ledger's own filesystem, where a full disk is E905 for every transfer"
        } else {
            "on the target's filesystem"
        };
        write!(
            f,
            "refused, nothing written: {} has {} free, the copy needs up to {} (the ledger's \
             pages), which would leave {}, under --min-free {floor} ({whose}); free space or \
             keep fewer copies (--keep): docs/operations.md#disk-full",
            self.folder.display(),
            human(self.room.free),
            human(self.estimate),
            human(self.room.free.saturating_sub(self.estimate)),
        )
    }
}

/// Whether a copy of `estimate` bytes fits in `room` with `min_free` left over. A floor of 0
/// still refuses a copy larger than the free space: it would fill the disk before it failed.
pub fn fits(room: Room, estimate: u64, min_free: MinFree) -> bool {
    room.free >= estimate.saturating_add(min_free.bytes(room.size))
}

/// `bytes` as an operator reads it: `512 bytes`, `36.0 KiB`, `1.2 GiB`.
pub fn human(bytes: u64) -> String {
    const NAMES: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < NAMES.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", NAMES[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_is_a_percentage_or_bytes() {
        for (given, want) in [
            ("10%", MinFree::Percent(10)),
            ("0%", MinFree::Percent(0)),
            ("100%", MinFree::Percent(100)),
            ("0", MinFree::Bytes(0)),
            ("1073741824", MinFree::Bytes(1 << 30)),
            ("512MiB", MinFree::Bytes(512 << 20)),
            ("1G", MinFree::Bytes(1 << 30)),
            ("1gib", MinFree::Bytes(1 << 30)),
            ("2 TiB", MinFree::Bytes(2 << 40)),
            ("7K", MinFree::Bytes(7 << 10)),
            ("5b", MinFree::Bytes(5)),
        ] {
            assert_eq!(given.parse::<MinFree>(), Ok(want), "{given}");
        }
        for bad in [
            "",
            "101%",
            "-1%",
            "1.5%",
            "x",
            "1GB",
            "-5",
            "1 PiB",
            "99999999999T",
        ] {
            assert!(bad.parse::<MinFree>().is_err(), "{bad}");
        }
        assert_eq!(MinFree::default().to_string(), "64MiB");
        for floor in [
            MinFree::DEFAULT,
            MinFree::Percent(10),
            MinFree::Bytes(0),
            MinFree::Bytes(1000),
            MinFree::Bytes(3 << 40),
            MinFree::Bytes(1025 << 10),
        ] {
            assert_eq!(floor.to_string().parse::<MinFree>(), Ok(floor), "{floor}");
        }
        assert_eq!(MinFree::Bytes(1025 << 10).to_string(), "1025KiB");
    }

    #[test]
    fn the_default_floor_lets_a_busy_disk_take_a_small_copy() {
        // CI's machine: a disk over 90% full, 20 GiB free, a ledger of a few pages. The
        // contract's `backup --db DB --to FILE` must succeed there; 10% refused it.
        let busy = Room {
            free: 20 << 30,
            size: 252 << 30,
        };
        assert!(fits(busy, 1 << 20, MinFree::DEFAULT));
        assert!(fits(busy, (20 << 30) - (64 << 20), MinFree::DEFAULT));
        assert!(!fits(busy, (20 << 30) - (64 << 20) + 1, MinFree::DEFAULT));
    }

    #[test]
    fn a_copy_fits_only_with_the_floor_left_over() {
        let room = Room {
            free: 300,
            size: 1000,
        };
        assert!(fits(room, 200, MinFree::Percent(10)));
        assert!(!fits(room, 201, MinFree::Percent(10)));
        assert!(fits(room, 300, MinFree::Bytes(0)));
        assert!(
            !fits(room, 301, MinFree::Bytes(0)),
            "never past a full disk"
        );
        assert!(!fits(room, 0, MinFree::Percent(100)));
        assert!(!fits(room, u64::MAX, MinFree::Bytes(u64::MAX)));
        assert_eq!(MinFree::Percent(100).bytes(u64::MAX), u64::MAX);
    }

    #[test]
    fn the_room_of_a_real_folder_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let room = room(dir.path()).unwrap();
        assert!(room.size > 0 && room.free <= room.size, "{room:?}");
        assert!(!fits(room, 1, MinFree::Percent(100)));
        let e = super::room(&dir.path().join("no-such-dir")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn the_refusal_names_the_free_space_the_estimate_and_the_floor() {
        let refusal = NoRoom {
            folder: PathBuf::from("/var/lib/txrelay/backups"),
            room: Room {
                free: 3 << 30,
                size: 20 << 30,
            },
            estimate: 2 << 30,
            min_free: MinFree::Percent(10),
            ledgers_own: true,
        };
        let line = refusal.to_string();
        assert!(!line.contains('\n'), "{line}");
        for part in [
            "/var/lib/txrelay/backups has 3.0 GiB free",
            "needs up to 2.0 GiB",
            "would leave 1.0 GiB",
            "--min-free 10%, 2.0 GiB of 20.0 GiB (on the ledger's own filesystem",
            "E905",
            "nothing written",
        ] {
            assert!(line.contains(part), "{part}: {line}");
        }
        let refusal = NoRoom {
            min_free: MinFree::Bytes(5 << 30),
            ledgers_own: false,
            ..refusal
        };
        let line = refusal.to_string();
        assert!(
            line.contains("under --min-free 5.0 GiB (on the target's filesystem)"),
            "{line}"
        );
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(36 << 10), "36.0 KiB");
    }
}
