//! What a `drop` forgets (its mode) and what it says it forgot (its report).

use std::fmt;
use std::str::FromStr;

/// How much of what was not durable is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything: every unsynced block, length and directory operation.
    All,
    /// Each unsynced block kept or lost by a coin (writes reach the disk in any order); a
    /// seeded prefix of the directory operations kept (metadata journals are ordered).
    Subset,
    /// Like `all`, but the last unsynced write keeps a prefix of itself, a multiple of 512
    /// bytes chosen by the seed.
    Torn,
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "all" => Ok(Mode::All),
            "subset" => Ok(Mode::Subset),
            "torn" => Ok(Mode::Torn),
            other => Err(format!("unknown mode {other:?} (all, subset, torn)")),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::All => "all",
            Mode::Subset => "subset",
            Mode::Torn => "torn",
        })
    }
}

/// What a drop reverted, out of what was not durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DropReport {
    pub blocks_dropped: u64,
    pub blocks_dirty: u64,
    pub entries_dropped: u64,
    pub entries_dirty: u64,
    /// How many bytes of the torn write were kept (torn mode only).
    pub torn_bytes: u64,
}

impl fmt::Display for DropReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dropped blocks {} of {} entries {} of {} torn_bytes {}",
            self.blocks_dropped,
            self.blocks_dirty,
            self.entries_dropped,
            self.entries_dirty,
            self.torn_bytes
        )
    }
}
