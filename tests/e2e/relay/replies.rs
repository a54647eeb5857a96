//! What the relay answers and records for each kind of core answer, for resends, and for
//! rows it finds in the ledger.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use wire::{self, E_GUID_REUSED, E_NOT_SENT, E_UNKNOWN};

use crate::util::*;

#[test]
fn booked_then_replayed_byte_for_byte() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).relay(&[]).build();
    let m = msg("G-OK-1", 1500, "rent");

    let first = s.call(&m);
    assert_eq!(first.len(), 90);
    assert_eq!(
        &first[..45],
        format!("RTRNF{:<36}0000", "G-OK-1").as_bytes()
    );
    let r = wire::parse_reply(&first).unwrap();
    let b = r.booking.unwrap();
    assert_eq!(b.amount, 1500);
    assert!(b.core_ref.starts_with('C'), "{b:?}");
    assert_eq!(b.booked_at.len(), 14);

    let again = s.call(&m);
    assert_eq!(
        again, first,
        "a resend gets the stored reply, byte for byte"
    );
    assert_eq!(s.core().bookings("G-OK-1"), 1);

    let row = s.db.row("G-OK-1").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(row.rsp_code.as_deref(), Some("0000"));
    assert_eq!(row.request.as_deref(), Some(&m[..]));
    assert_eq!(row.response.as_deref(), Some(&first[..]));
    assert_eq!(row.attempts, Some(1));
    assert_eq!(row.tx_code.as_deref(), Some("TRNF"));
}

#[test]
fn fifty_simultaneous_sends_of_one_guid_book_once() {
    skip_if_unavailable!();
    const N: usize = 50;
    let slow = Duration::from_millis(2000);
    let s = Scene::new()
        .core(&["--slow-ms", "2000"])
        .relay(&["--read-timeout-ms", "10000"])
        .build();
    let m = Arc::new(msg("G-RACE", 700, "SLOW race"));
    let barrier = Arc::new(Barrier::new(N));
    let handles: Vec<_> = (0..N)
        .map(|_| {
            let (m, barrier, addr) = (m.clone(), barrier.clone(), s.addr().to_string());
            thread::spawn(move || {
                let mut c = Channel::connect(&addr);
                barrier.wait();
                let t = Instant::now();
                let reply = c.call(&m);
                (code(&reply), t.elapsed())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ok = results.iter().filter(|(c, _)| c == "0000").count();
    let busy: Vec<_> = results.iter().filter(|(c, _)| c == "E903").collect();
    assert_eq!(ok, 1, "{results:?}");
    assert_eq!(busy.len(), N - 1, "{results:?}");
    for (_, t) in busy {
        assert!(*t < slow / 2, "E903 must come at once, took {t:?}");
    }
    assert_eq!(s.core().bookings("G-RACE"), 1);
    assert_eq!(s.db.state("G-RACE"), Some(State::Done));
}

#[test]
fn read_timeout_is_unknown_and_a_resend_never_reaches_the_core() {
    skip_if_unavailable!();
    let s = Scene::new()
        .core(&["--slow-ms", "1000"])
        .relay(&["--read-timeout-ms", "300"])
        .build();
    let m = msg("G-TIMEOUT", 42, "SLOW");
    let first = s.call(&m);
    assert_eq!(first, short(&m, &E_UNKNOWN));
    let row = s.db.row("G-TIMEOUT").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Unknown, Some("E901"))
    );

    let t = Instant::now();
    let again = s.call(&m);
    assert_eq!(again, first);
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "no core call on resend"
    );
    // The slow core did book the first send; nothing else ever booked.
    assert!(eventually(WAIT, || s.core().bookings("G-TIMEOUT") == 1));
    assert_eq!(s.db.row("G-TIMEOUT").unwrap().attempts, Some(1));
    assert_eq!(s.core().total_bookings(), 1);
}

#[test]
fn core_down_is_failed_and_a_resend_after_recovery_books_once() {
    skip_if_unavailable!();
    let port = free_port();
    let s = Scene::new()
        .relay_to(&format!("http://127.0.0.1:{port}"), &[])
        .build();
    let m = msg("G-DOWN", 900, "");
    let first = s.call(&m);
    assert_eq!(first, short(&m, &E_NOT_SENT));
    let row = s.db.row("G-DOWN").unwrap();
    assert_eq!((row.state, row.attempts), (State::Failed, Some(1)));
    assert_eq!(row.rsp_code.as_deref(), Some("E902"));

    let core = Core::on_port(port, &[]);
    let second = s.call(&m);
    assert_eq!(code(&second), "0000");
    let row = s.db.row("G-DOWN").unwrap();
    assert_eq!((row.state, row.attempts), (State::Done, Some(2)));
    assert_eq!(row.response.as_deref(), Some(&second[..]));
    assert_eq!(core.bookings("G-DOWN"), 1);
    assert_eq!(s.call(&m), second);
}

#[test]
fn dropped_connection_and_server_error_are_unknown() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).relay(&[]).build();
    for (guid, memo, booked) in [("G-DROP", "DROP", 1), ("G-500", "FAIL500", 0)] {
        let m = msg(guid, 10, memo);
        let reply = s.call(&m);
        assert_eq!(reply, short(&m, &E_UNKNOWN), "{memo}");
        assert_eq!(s.db.state(guid), Some(State::Unknown), "{memo}");
        assert_eq!(s.call(&m), reply, "{memo}: resend answers E901");
        assert_eq!(s.core().bookings(guid), booked, "{memo}");
        assert_eq!(s.db.row(guid).unwrap().attempts, Some(1), "{memo}");
    }
}

#[test]
fn business_rejection_is_done_and_replayed() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).relay(&[]).build();
    let m = msg("G-REJ", 10, "REJECT me");
    let reply = s.call(&m);
    assert_eq!(reply, short(&m, b"B001"));
    let row = s.db.row("G-REJ").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("B001"))
    );
    assert_eq!(s.call(&m), reply);
    assert_eq!(s.core().total_bookings(), 0);
}

#[test]
fn same_guid_for_another_request_is_e904_and_changes_nothing() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).relay(&[]).build();
    let m = msg("G-REUSE", 100, "a");
    assert_eq!(code(&s.call(&m)), "0000");
    let before = s.db.row("G-REUSE").unwrap();
    for other in [msg("G-REUSE", 101, "a"), msg("G-REUSE", 100, "b")] {
        assert_eq!(s.call(&other), short(&other, &E_GUID_REUSED));
    }
    assert_eq!(s.db.row("G-REUSE").unwrap(), before);
    assert_eq!(s.core().bookings("G-REUSE"), 1);
}

#[test]
fn a_restarted_relay_replays_from_the_same_ledger() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let m = msg("G-RESTART", 77, "");
    let mut first_relay = s.start_relay(&[]);
    let first = call(&first_relay.addr, &m);
    assert_eq!(code(&first), "0000");
    first_relay.kill();
    let second_relay = s.start_relay(&[]);
    assert_eq!(call(&second_relay.addr, &m), first);
    assert_eq!(s.core().bookings("G-RESTART"), 1);
}

#[test]
fn hand_made_rows_are_answered_safely() {
    skip_if_unavailable!();
    let done = msg("G-HAND-DONE", 5, "");
    let failed = msg("G-HAND-FAILED", 5, "");
    // Rows as an operator might write them, columns left out (no reply, attempts 0).
    let s = Scene::new()
        .core(&[])
        .relay(&[])
        .row(RowSpec::bare("G-HAND-NULL", State::Done))
        .row(RowSpec::bare("G-HAND-DONE", State::Done).request(&done))
        .row(RowSpec::failed(&failed))
        .build();
    // No stored request: E904. DONE without a stored reply: E901, never a made-up body.
    let null = msg("G-HAND-NULL", 5, "");
    assert_eq!(s.call(&null), short(&null, &E_GUID_REUSED));
    assert_eq!(s.call(&done), short(&done, &E_UNKNOWN));
    // FAILED with the same request: proven unsent, so it is re-claimed and sent.
    assert_eq!(code(&s.call(&failed)), "0000");
    assert_eq!(s.db.row("G-HAND-FAILED").unwrap().attempts, Some(2));
    assert_eq!(
        s.core().bookings("G-HAND-NULL") + s.core().bookings("G-HAND-DONE"),
        0
    );
}
