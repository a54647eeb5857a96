//! A ledger the relay cannot write: a claim is refused before the core is called, a result
//! is retried and, past its deadline, left to resolve.

use std::thread;
use std::time::{Duration, Instant};

use wire::{E_LEDGER, E_UNKNOWN};

use crate::util::*;

#[test]
fn a_locked_ledger_is_e905_and_nothing_is_booked() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).relay(&[]).build();
    let m = msg("G-LOCKED", 5, "");
    let lock = WriteLock::take(&s.db, "G-LOCKED");
    let reply = s.call(&m);
    assert_eq!(reply, short(&m, &E_LEDGER));
    lock.release_after_waiters_gave_up();
    assert_eq!(s.db.state("G-LOCKED"), None);
    assert_eq!(s.core().total_bookings(), 0);
    // Once the ledger is free the same request goes through.
    assert_eq!(code(&s.call(&m)), "0000");
}

#[test]
fn a_result_that_cannot_be_recorded_is_e901_and_the_row_stays_sent() {
    skip_if_unavailable!();
    let s = Scene::new().core(&["--slow-ms", "1000"]).relay(&[]).build();
    let m = msg("G-NORECORD", 5, "SLOW");
    let pending = send_in_background(s.addr(), &m);
    assert!(eventually(WAIT, || s.db.state("G-NORECORD") == Some(State::Sent)));
    let lock = WriteLock::take(&s.db, "G-NORECORD");
    let reply = pending.join().unwrap();
    lock.release_after_waiters_gave_up();
    assert_eq!(reply, short(&m, &E_UNKNOWN));
    assert_eq!(s.db.state("G-NORECORD"), Some(State::Sent));
    assert_eq!(s.core().bookings("G-NORECORD"), 1);
    assert_eq!(
        code(&s.call(&m)),
        "E903",
        "in flight for ever: resolve's job"
    );
}

#[test]
fn a_result_write_blocked_past_the_busy_timeout_is_retried_and_recorded() {
    skip_if_unavailable!();
    let s = Scene::new().core(&["--slow-ms", "1000"]).relay(&[]).build();
    let g = "G-RETRY-RESULT";
    let m = msg(g, 9000, "SLOW");
    let pending = send_in_background(s.addr(), &m);
    assert!(eventually(WAIT, || s.db.state(g) == Some(State::Sent)));
    let lock = WriteLock::take(&s.db, g);
    let locked = Instant::now();
    assert!(eventually(WAIT, || s.core().bookings(g) == 1));
    // A deliberate hold, longer than the relay's 5 s busy timeout.
    thread::sleep(Duration::from_secs(7).saturating_sub(locked.elapsed()));
    assert!(
        !pending.is_finished(),
        "the relay is still trying to record the result, not answering E901"
    );
    lock.release();

    let reply = pending.join().unwrap();
    assert_code(&reply, "0000");
    assert_done_with(&s.db, s.core(), &m, &reply);
    assert_eq!(s.call(&m), reply);
    assert_eq!(s.core().bookings(g), 1);
}
