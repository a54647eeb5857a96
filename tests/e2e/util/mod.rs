//! What the end-to-end tests share, each thing once, on top of `testkit`: processes
//! (`process`: servers, bounded runs, the batch tools), the core simulator (`coresim`), the
//! ledger's rows (`rows`: hand-made rows, a write held back from outside), channel messages
//! (`messages`), the assertions several modules make (`checks`), the relay's admin port and
//! the Prometheus text format (`metrics`) and the set-up most tests start from (`scene`).
//!
//! This module is compiled into two test binaries: `e2e` (the ledger on SQLite) and `e2e_pg`
//! (on PostgreSQL). Each names its backend in `crate::BACKEND`; the ledgers made here are on
//! it. A test that runs on both starts with `skip_if_unavailable!()`; one that only means
//! something on SQLite is declared in `sqlite_only! { "why", fn name() { … } }` (defined by
//! each binary's `main.rs`: a test in `e2e`, an ignored one in `e2e_pg`, so that cargo
//! counts it as ignored there, not as passed).
//!
//! Test modules `use crate::util::*`.

mod checks;
mod coresim;
mod http;
mod messages;
mod metrics;
mod process;
mod rows;
mod scene;

use std::sync::Barrier;
use std::time::{Duration, Instant};

pub use self::checks::*;
pub use self::coresim::*;
pub use self::http::*;
pub use self::messages::*;
pub use self::metrics::*;
pub use self::process::*;
pub use self::rows::*;
pub use self::scene::*;

pub(crate) use crate::BACKEND;
pub use cli::{EXIT_FATAL, EXIT_LEFT, EXIT_SETTLED, EXIT_USAGE};
pub use ledger::{Row, State};
pub use testkit::temp_ledger::Backend;
pub use testkit::{TempLedger, free_port};

/// Returns from the test at once when this binary's backend is not available here
/// (PostgreSQL not installed, outside CI; said once for the whole run, and how many tests
/// did not run is said when the test process ends: `testkit::pg::did_not_run`).
macro_rules! skip_if_unavailable {
    () => {
        if !$crate::util::BACKEND.available() {
            testkit::pg::did_not_run();
            return;
        }
    };
}
pub(crate) use skip_if_unavailable;

/// A ledger of the test's own on this binary's backend.
pub fn temp_ledger() -> TempLedger {
    TempLedger::on(BACKEND).unwrap_or_else(|| {
        panic!("{BACKEND} is not available: start the test with skip_if_unavailable!()")
    })
}

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
