//! The run's clock, the one the ledger's SQL reads. SQLite asks its VFS for the time
//! (`datetime('now')` in every claim, result and selection by age); the simulator registers,
//! as the process's default, a copy of the system's VFS whose clock is the run's: a number of
//! milliseconds that the scheduler moves on at each yield point (`Sched::pause`) and the end
//! of a run moves on by hours. So resolve's `--min-age` is the real SQL comparing the row's
//! real `updated_at` with a time that passes as the run goes, and a seed replays it exactly.
//!
//! The clock is found per thread (every actor's thread and the run's own are given it): the
//! tests run several simulations at once in one process. A thread without one (none in a
//! run) reads the system's time.

use std::cell::RefCell;
use std::ffi::{c_double, c_int};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Once, OnceLock};

use rusqlite::ffi;

/// Where every run's clock starts: 2026-12-06T10:00:00Z, in milliseconds since 1970.
pub const START_MS: i64 = 1_796_551_200_000;

/// SQLite's time: milliseconds since the Julian epoch; 1970-01-01 is this many.
const UNIX_EPOCH_JULIAN_MS: i64 = 210_866_760_000_000;

/// A run's clock: shared by its scheduler (which moves it) and the threads that read it.
#[derive(Clone, Debug)]
pub struct Clock(Arc<AtomicI64>);

impl Default for Clock {
    fn default() -> Self {
        Clock(Arc::new(AtomicI64::new(START_MS)))
    }
}

impl Clock {
    /// Milliseconds since 1970 on the run's clock.
    pub fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }

    /// Moves the clock on by `ms`.
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Makes this the clock the calling thread's SQL reads (and installs the VFS once).
    pub fn enter(&self) {
        install();
        MINE.with(|m| *m.borrow_mut() = Some(self.clone()));
    }

    /// The calling thread reads the system's time again.
    pub fn leave() {
        MINE.with(|m| *m.borrow_mut() = None);
    }
}

thread_local! {
    static MINE: RefCell<Option<Clock>> = const { RefCell::new(None) };
}

/// The system's VFS, whose every method but the clock the simulator's copy keeps.
static SYSTEM: OnceLock<usize> = OnceLock::new();

fn system() -> *mut ffi::sqlite3_vfs {
    *SYSTEM.get().expect("the VFS is installed") as *mut ffi::sqlite3_vfs
}

/// Registers the simulator's VFS as the default, once per process.
fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `sqlite3_vfs_find(NULL)` returns the default VFS, which lives as long as
        // the process; the copy is leaked, so it does too, as `sqlite3_vfs_register`
        // requires. The copy keeps the original's methods and `pAppData` (the unix VFS's
        // own), its name and clock replaced.
        unsafe {
            let base = ffi::sqlite3_vfs_find(std::ptr::null());
            assert!(!base.is_null(), "SQLite has no default VFS");
            SYSTEM.set(base as usize).expect("installed once");
            let mut copy: ffi::sqlite3_vfs = *base;
            copy.zName = c"sim-clock".as_ptr();
            copy.xCurrentTime = Some(current_time);
            copy.xCurrentTimeInt64 = Some(current_time_i64);
            copy.pNext = std::ptr::null_mut();
            let leaked: &'static mut ffi::sqlite3_vfs = Box::leak(Box::new(copy));
            let rc = ffi::sqlite3_vfs_register(leaked, 1);
            assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_vfs_register");
        }
    });
}

/// The calling thread's time, in SQLite's milliseconds since the Julian epoch.
fn julian_ms() -> i64 {
    match MINE.with(|m| m.borrow().as_ref().map(Clock::now_ms)) {
        Some(ms) => ms + UNIX_EPOCH_JULIAN_MS,
        None => {
            let base = system();
            let mut now = 0;
            // SAFETY: the system's VFS, installed; its clock writes `now`.
            unsafe {
                if let Some(f) = (*base).xCurrentTimeInt64 {
                    f(base, &mut now);
                }
            }
            now
        }
    }
}

unsafe extern "C" fn current_time_i64(_: *mut ffi::sqlite3_vfs, now: *mut i64) -> c_int {
    // SAFETY: SQLite passes a valid pointer to write the time to.
    unsafe { *now = julian_ms() };
    ffi::SQLITE_OK
}

unsafe extern "C" fn current_time(_: *mut ffi::sqlite3_vfs, now: *mut c_double) -> c_int {
    // SAFETY: as above; in days.
    unsafe { *now = julian_ms() as f64 / 86_400_000.0 };
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledgers_sql_reads_the_runs_clock() {
        let clock = Clock::default();
        clock.enter();
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let now = |c: &rusqlite::Connection| -> String {
            c.query_row("SELECT datetime('now')", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(now(&conn), "2026-12-06 10:00:00");
        clock.advance(90_500);
        assert_eq!(now(&conn), "2026-12-06 10:01:30");
        Clock::leave();
        assert_ne!(now(&conn), "2026-12-06 10:01:30");
    }
}
