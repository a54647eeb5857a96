//! The relay's read connections: a bounded pool each request borrows from.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{LedgerError, Result};
use crate::sqlite::{BUSY_TIMEOUT, Ledger};
use crate::store::Durability;

/// Read connections shared by the relay's connection threads: each request borrows one and
/// gives it back, so a thousand idle channel connections do not hold a thousand files. At
/// most `POOL_MAX` exist (each holds three descriptors: the file, its WAL and its shared
/// memory); a request that finds them all lent waits up to the busy timeout, then fails as
/// any ledger error does (E905, before any claim).
pub struct Pool {
    path: PathBuf,
    slots: Mutex<Slots>,
    returned: Condvar,
}

/// Most read connections the relay opens.
pub const POOL_MAX: usize = 16;

struct Slots {
    idle: Vec<Ledger>,
    /// Connections that exist, idle or lent.
    open: usize,
    /// Threads waiting for a return (a return wakes one only if there is one: a condition
    /// variable's notify is a system call even when nobody waits).
    waiting: usize,
}

impl Pool {
    /// Opens one connection at once, so that a bad path or pragma fails at start-up.
    pub fn open(path: &Path) -> Result<Pool> {
        let first = Ledger::open(path)?;
        Ok(Pool {
            path: path.to_path_buf(),
            slots: Mutex::new(Slots {
                idle: vec![first],
                open: 1,
                waiting: 0,
            }),
            returned: Condvar::new(),
        })
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self) -> Result<Pooled<'_>> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        let mut slots = self.slots();
        loop {
            if let Some(l) = slots.idle.pop() {
                return Ok(self.lend(l));
            }
            if slots.open < POOL_MAX {
                slots.open += 1;
                drop(slots);
                return match Ledger::open(&self.path) {
                    Ok(l) => Ok(self.lend(l)),
                    Err(e) => {
                        self.slots().open -= 1;
                        self.returned.notify_one();
                        Err(e)
                    }
                };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LedgerError::PoolExhausted);
            }
            slots.waiting += 1;
            slots = self
                .returned
                .wait_timeout(slots, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            slots.waiting -= 1;
        }
    }

    fn lend(&self, ledger: Ledger) -> Pooled<'_> {
        Pooled {
            pool: self,
            ledger: Some(ledger),
        }
    }

    /// Borrows every connection the pool may hold at once and reads each one's durability.
    pub fn durability_of_all(&self) -> Result<Vec<Durability>> {
        let lent: Vec<Pooled<'_>> = (0..POOL_MAX).map(|_| self.get()).collect::<Result<_>>()?;
        lent.iter().map(|l| l.durability()).collect()
    }
}

/// A borrowed connection; returns to the pool when dropped.
pub struct Pooled<'a> {
    pool: &'a Pool,
    ledger: Option<Ledger>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Ledger;
    fn deref(&self) -> &Ledger {
        self.ledger.as_ref().expect("present until drop")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.ledger.take() {
            let mut slots = self.pool.slots();
            slots.idle.push(l);
            let someone_waits = slots.waiting > 0;
            drop(slots);
            if someone_waits {
                self.pool.returned.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_pool_is_bounded_and_waits_for_a_return() {
        let dir = tempfile::tempdir().unwrap();
        let pool = Pool::open(&dir.path().join("l.db")).unwrap();
        let lent: Vec<_> = (0..POOL_MAX).map(|_| pool.get().unwrap()).collect();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| pool.get().map(|_| ()));
            std::thread::sleep(Duration::from_millis(50));
            drop(lent);
            assert!(waiter.join().unwrap().is_ok());
        });
        assert_eq!(pool.slots().open, POOL_MAX);
    }
}
