//! Checkpoints off the writer's path. In WAL mode SQLite copies the log back into the
//! database file (a checkpoint, which ends with an fsync of the file) in whichever connection
//! commits past the auto-checkpoint threshold: for the relay that is the writer thread, and
//! every connection thread waiting on its batch waits for the checkpoint too. Here a thread
//! of its own, on its own connection, runs a PASSIVE checkpoint (it never blocks a writer or
//! a reader, and copies what no reader still needs) every `EVERY`; the writer's own
//! auto-checkpoint stays, at `WRITER_AUTOCHECKPOINT` pages, as the backstop should this thread
//! fall behind or fail. Durability is the WAL's, as before: a commit is durable once its
//! frames are synced, whenever they are checkpointed.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

use crate::error::{LedgerError, Result};
use crate::sqlite::Ledger;

/// How often the checkpointer copies the log back.
const EVERY: Duration = Duration::from_millis(100);

/// The writer connection's own `wal_autocheckpoint` (pages; SQLite's default is 1,000): the
/// log may grow to about 40 MiB before the writer checkpoints itself.
pub(super) const WRITER_AUTOCHECKPOINT: u32 = 10_000;

/// The checkpointer thread; it stops when this is dropped.
pub struct Checkpointer {
    _stop: Sender<()>,
}

impl Checkpointer {
    pub fn start(path: &Path) -> Result<Checkpointer> {
        let ledger = Ledger::open(path)?;
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("ledger-checkpoint".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(EVERY) {
                    // A failed checkpoint (an I/O error) is tried again at the next tick; the
                    // writer's backstop checkpoints if none succeeds.
                    let _ =
                        ledger
                            .connection()
                            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            })
            .map_err(|e| LedgerError::Writer(format!("cannot start the checkpoint thread: {e}")))?;
        Ok(Checkpointer { _stop: stop })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::group_commit::GroupCommit;
    use crate::store::prelude::*;

    /// The writer's commits reach the database file without the writer checkpointing: a few
    /// claims (far below the writer's own threshold, and below SQLite's default 1,000
    /// pages) are copied from the log into the file by the checkpointer while the store is
    /// open.
    #[test]
    fn the_checkpointer_copies_the_log_into_the_file_while_the_relay_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.db");
        let store = GroupCommit::open(&path, "test").unwrap();
        let size = || std::fs::metadata(&path).unwrap().len();
        let before = size();
        for i in 0..200 {
            let g = format!("G-CKPT-{i:04}-{}", "x".repeat(200));
            assert!(store.claim_new(&g, "TRNF", g.as_bytes(), None).unwrap());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while size() <= before && Instant::now() < deadline {
            std::thread::sleep(EVERY);
        }
        assert!(
            size() > before,
            "the file is still {before} bytes: nothing checkpointed"
        );
        drop(store);
    }
}
