//! The gate every operation passes: it counts the mutating ones, freezes on `freeze`, on a
//! drop or at the `--crash-after` one, and from then on turns every operation away (the
//! file system then answers EIO, as a machine that lost its power would stop answering).

use std::fmt;

/// The operations that change something, counted by the gate and by `--crash-after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    Write,
    Truncate,
    Fsync,
    Fsyncdir,
    Create,
    Mkdir,
    Link,
    Unlink,
    Rmdir,
    Rename,
}

/// The file system is frozen: the operation must fail (with EIO).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frozen;

/// Counters and the frozen flag.
#[derive(Debug, Default)]
pub struct Gate {
    frozen: bool,
    crash_after: Option<u64>,
    /// Mutating operations that arrived, the one that froze included.
    arrived: u64,
    /// Mutating operations let through.
    ops: u64,
    writes: u64,
    syncs: u64,
}

impl Gate {
    /// A gate that freezes when the `n`-th mutating operation arrives, if `crash_after`.
    pub fn new(crash_after: Option<u64>) -> Self {
        Self {
            crash_after,
            ..Self::default()
        }
    }

    /// Lets a non-mutating operation through unless frozen.
    pub fn check(&self) -> Result<(), Frozen> {
        if self.frozen { Err(Frozen) } else { Ok(()) }
    }

    /// Lets a mutating operation through unless frozen, or unless it is the
    /// `--crash-after` one, which freezes.
    pub fn admit(&mut self, mutation: Mutation) -> Result<(), Frozen> {
        self.check()?;
        self.arrived += 1;
        if self.crash_after == Some(self.arrived) {
            self.frozen = true;
            return Err(Frozen);
        }
        self.ops += 1;
        match mutation {
            Mutation::Write => self.writes += 1,
            Mutation::Fsync | Mutation::Fsyncdir => self.syncs += 1,
            _ => {}
        }
        Ok(())
    }

    /// From now on every operation fails.
    pub fn freeze(&mut self) {
        self.frozen = true;
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// The `stats` reply, given what the model holds.
    pub fn stats(&self, dirty_blocks: u64, dirty_entries: u64) -> Stats {
        Stats {
            ops: self.ops,
            writes: self.writes,
            syncs: self.syncs,
            dirty_blocks,
            dirty_entries,
            frozen: self.frozen,
        }
    }
}

/// What `stats` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub ops: u64,
    pub writes: u64,
    pub syncs: u64,
    pub dirty_blocks: u64,
    pub dirty_entries: u64,
    pub frozen: bool,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ops {} writes {} syncs {} dirty_blocks {} dirty_entries {} frozen {}",
            self.ops,
            self.writes,
            self.syncs,
            self.dirty_blocks,
            self.dirty_entries,
            u8::from(self.frozen)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_after_fails_the_nth_mutation_and_everything_after() {
        let mut gate = Gate::new(Some(3));
        assert_eq!(gate.admit(Mutation::Create), Ok(()));
        assert_eq!(gate.check(), Ok(()));
        assert_eq!(gate.admit(Mutation::Write), Ok(()));
        assert_eq!(gate.admit(Mutation::Fsync), Err(Frozen));
        assert_eq!(gate.check(), Err(Frozen));
        assert_eq!(gate.admit(Mutation::Write), Err(Frozen));
        let stats = gate.stats(0, 0).to_string();
        assert_eq!(
            stats,
            "ops 2 writes 1 syncs 0 dirty_blocks 0 dirty_entries 0 frozen 1"
        );
    }

    #[test]
    fn freeze_stops_everything() {
        let mut gate = Gate::new(None);
        assert_eq!(gate.admit(Mutation::Fsyncdir), Ok(()));
        gate.freeze();
        assert_eq!(gate.check(), Err(Frozen));
        assert_eq!(gate.admit(Mutation::Write), Err(Frozen));
        assert_eq!(
            gate.stats(4, 2).to_string(),
            "ops 1 writes 0 syncs 1 dirty_blocks 4 dirty_entries 2 frozen 1"
        );
    }
}
