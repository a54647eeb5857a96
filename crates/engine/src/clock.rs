//! The decisions' clock: the port through which they read the time (a result's record
//! window, a call's duration) and pause (between retries of a result the ledger refused).
//! The relay and the batch tools run on [`SystemClock`]; the simulator and the tests give a
//! clock of their own, on which a ten-second window passes in no time and a seed replays
//! exactly. The engine never reads `Instant::now()` or sleeps but through it.

use std::time::{Duration, Instant};

/// What time it is, and a pause.
pub trait Clock: Sync {
    /// Now, on this clock.
    fn now(&self) -> Instant;
    /// Lets `d` pass on this clock.
    fn sleep(&self, d: Duration);
}

/// The system's monotonic clock, and a pause of the calling thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

// The one place the engine reads the system's time and sleeps (crates/engine/clippy.toml).
#[allow(clippy::disallowed_methods)]
impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}
