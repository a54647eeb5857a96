//! The record window on the engine's clock: a result the ledger refuses is retried, pausing
//! on the clock the events sink gives (`Events::clock`), until the core's deadline plus
//! `RECORD_WINDOW` have passed since the call. On a clock of the test's own the ten seconds
//! pass in no time, and the pauses are there to count.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use engine::clock::Clock;
use engine::core::Outcome;
use engine::events::Events;
use engine::transfer::{RECORD_WINDOW, handle};
use ledger::error::{LedgerError, Result};
use ledger::sqlite::{Hold, Ledger};
use ledger::state::State;
use ledger::store::Durability;

use crate::scripted::{C1, Call, Scripted, booking, reply, request, state};

/// A clock that moves only when the engine pauses on it, and keeps the pauses.
struct TestClock {
    start: Instant,
    pauses: Mutex<Vec<Duration>>,
}

impl Clock for TestClock {
    fn now(&self) -> Instant {
        self.start + self.slept()
    }
    fn sleep(&self, d: Duration) {
        self.pauses.lock().unwrap().push(d);
    }
}

impl TestClock {
    fn slept(&self) -> Duration {
        self.pauses.lock().unwrap().iter().sum()
    }
}

/// An events sink that reports nothing and gives the test's clock.
struct OnClock(TestClock);

impl Events for OnClock {
    fn clock(&self) -> &dyn Clock {
        &self.0
    }
}

fn on_a_clock_of_its_own() -> OnClock {
    OnClock(TestClock {
        start: Instant::now(),
        pauses: Mutex::new(Vec::new()),
    })
}

/// The real SQLite ledger, whose writes after the first (the claim) fail `failing` times.
struct Flaky {
    ledger: Mutex<Ledger>,
    writes: AtomicUsize,
    failing: usize,
}

impl Flaky {
    fn new(dir: &tempfile::TempDir, failing: usize) -> Flaky {
        Flaky {
            ledger: Mutex::new(Ledger::open(&dir.path().join("l.db")).unwrap()),
            writes: AtomicUsize::new(0),
            failing,
        }
    }
}

impl Hold for Flaky {
    fn write_with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Ledger) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        // About 25 tries fill the window (pauses from 20 ms, doubling to 500 ms).
        assert!(
            n < 40,
            "retried past the window: does the engine pause on its clock?"
        );
        if (1..=self.failing).contains(&n) {
            return Err(LedgerError::Unavailable("the test's ledger refuses".into()));
        }
        f(&self.ledger.lock().unwrap())
    }
    fn read_with<R>(&self, f: impl FnOnce(&Ledger) -> Result<R>) -> Result<R> {
        f(&self.ledger.lock().unwrap())
    }
    fn durabilities(&self) -> Result<Vec<Durability>> {
        Ok(vec![self.ledger.lock().unwrap().durability()?])
    }
}

#[test]
fn a_result_the_ledger_refuses_is_retried_pausing_on_the_events_clock() {
    let dir = tempfile::tempdir().unwrap();
    let store = Flaky::new(&dir, 3);
    let core = Scripted::new([Call::answers(Outcome::Booked(booking("C1")))]);
    let events = on_a_clock_of_its_own();
    let h = handle(&store, &core, &events, None, &request("G-RETRIED"));
    assert_eq!(h.reply, reply("G-RETRIED", "0000", C1));
    assert_eq!(state(&store, "G-RETRIED"), (State::Done, Some(1)));
    let ms = |v: u64| Duration::from_millis(v);
    assert_eq!(*events.0.pauses.lock().unwrap(), [ms(20), ms(40), ms(80)]);
}

#[test]
fn a_result_never_written_is_e901_once_the_window_has_passed_on_that_clock() {
    let dir = tempfile::tempdir().unwrap();
    let store = Flaky::new(&dir, usize::MAX);
    let core = Scripted::new([Call::answers(Outcome::Booked(booking("C1")))]);
    let events = on_a_clock_of_its_own();
    let h = handle(&store, &core, &events, None, &request("G-UNWRITTEN"));
    assert_eq!(h.reply, reply("G-UNWRITTEN", "E901", ""));
    assert_eq!(state(&store, "G-UNWRITTEN"), (State::Sent, Some(1)));
    // Retried for the core's deadline (200 ms) and the window, on the test's clock: the last
    // pause (at most 500 ms) would have passed the window.
    let window = core_deadline() + RECORD_WINDOW;
    let slept = events.0.slept();
    assert!(
        slept <= window && slept + Duration::from_millis(500) >= window,
        "paused {slept:?} in a window of {window:?}"
    );
}

fn core_deadline() -> Duration {
    use engine::core::Core;
    Scripted::new([]).deadline()
}
