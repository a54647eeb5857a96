//! The relay's ledger: one writer thread that commits the guarded statements of many
//! connection threads together (group commit, `writer`), and a bounded pool of read
//! connections (`pool`). It is an SQLite store like any (`sqlite::Hold`): writes are
//! submitted to the writer, reads run on the pool.

mod checkpoint;
mod pool;
#[cfg(test)]
mod tests;
mod writer;

use std::path::Path;

pub use checkpoint::Checkpointer;
pub use pool::{POOL_MAX, Pool, Pooled};
pub use writer::Writer;

use crate::error::Result;
use crate::sqlite::{Hold, Ledger};
use crate::store::Durability;

/// The relay's store: reads never queue behind writes, writes share commits.
pub struct GroupCommit {
    writer: Writer,
    reads: Pool,
    _checkpoints: Checkpointer,
}

impl GroupCommit {
    /// Opens (creating if needed) the ledger at `path`: the relay's.
    /// `who` names the writer's changes in the history.
    pub fn open(path: &Path, who: &str) -> Result<GroupCommit> {
        Ok(GroupCommit {
            reads: Pool::open(path)?,
            writer: Writer::start(path, who)?,
            _checkpoints: Checkpointer::start(path)?,
        })
    }

    /// Opens a ledger that must already exist: for the batch tools that work on several
    /// rows at once.
    pub fn open_existing(path: &Path, who: &str) -> Result<GroupCommit> {
        drop(Ledger::open_existing(path)?);
        GroupCommit::open(path, who)
    }
}

impl Hold for GroupCommit {
    /// Submitted to the writer thread: committed with whatever else is queued.
    fn write_with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Ledger) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.writer.submit(f)
    }
    /// On a pooled read connection: reads never queue behind writes.
    fn read_with<R>(&self, f: impl FnOnce(&Ledger) -> Result<R>) -> Result<R> {
        f(&*self.reads.get()?)
    }
    /// The writer's, then each pooled reader's (all of them, opened at once if need be).
    fn durabilities(&self) -> Result<Vec<Durability>> {
        let mut all = vec![self.writer.durability.clone()];
        all.extend(self.reads.durability_of_all()?);
        Ok(all)
    }
}
