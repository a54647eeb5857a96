//! What the end-to-end tests share, each thing once, on top of `testkit`: processes
//! (`process`: servers, bounded runs, the batch tools), the core simulator (`coresim`), the
//! ledger's rows (`rows`: hand-made rows, the write lock), channel messages (`messages`), the
//! assertions several modules make (`checks`), the relay's admin port and the Prometheus
//! text format (`metrics`), the set-up most batch tests start from (`scene`) and the
//! operator wrappers in `scripts/` (`scripts`).
//!
//! Test modules `use crate::util::*`.

mod checks;
mod coresim;
mod messages;
mod metrics;
mod process;
mod rows;
mod scene;
mod scripts;

use std::sync::Barrier;
use std::time::{Duration, Instant};

pub use self::checks::*;
pub use self::coresim::*;
pub use self::messages::*;
pub use self::metrics::*;
pub use self::process::*;
pub use self::rows::*;
pub use self::scene::*;
pub use self::scripts::*;

pub use cli::{EXIT_FATAL, EXIT_LEFT, EXIT_SETTLED, EXIT_USAGE};
pub use ledger::{Row, State};
pub use testkit::{TempLedger, dead_url, free_port};

/// Age given to rows that every selection should admit (`--min-age 60`, `--stale-sent 60`).
pub const OLD: u64 = 120;
pub const MINUTE: u64 = 60;
pub const HOUR: u64 = 60 * MINUTE;
pub const DAY: u64 = 24 * HOUR;
/// How long a test waits for something that should happen soon.
pub const WAIT: Duration = Duration::from_secs(10);

/// Polls `f` until it is true or `limit` passes.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `f` on `n` threads released at the same moment; the results in thread order.
pub fn at_once<T: Send>(n: usize, f: impl Fn() -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(n);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    f()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
