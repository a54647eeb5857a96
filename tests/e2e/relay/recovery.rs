//! Recovery mode end to end (contract §11): a ledger marked recovering (the mark written by
//! hand, as a restore leaves it) has forgotten claims the core booked. The relay asks the core
//! before it claims a GUID it has no row for: a booking is answered from the inquiry and
//! booked once, its resend replayed byte for byte; a GUID the core never booked is claimed
//! and booked once; with the core down, `E902` and no row. A running relay sees the mark
//! begin and end within 5 seconds, and `reprocess` settles a FAILED row the core booked
//! without POSTing it. On both backends (`e2e_pg` compiles this module too).

use std::time::{Duration, Instant};

use engine::recovery::BOOKED_BEFORE;

use super::metrics::{relay_with_admin, scrape};
use crate::util::*;

/// The contract's bound on how long a running relay may take to see a change of the mark.
const SEEN_WITHIN: Duration = Duration::from_secs(5);

/// Marks `db` recovering by hand, as a restore (or `inspect recovery --begin`) leaves it.
fn mark_recovering(db: &TempLedger) {
    db.create();
    let sql = "INSERT INTO ledger_recovery (id, since, who) \
               VALUES (1, '2026-01-01T00:00:00Z', 'test')";
    by_hand(db, sql, sql);
}

/// Ends recovery by hand.
fn end_recovery(db: &TempLedger) {
    let sql = "DELETE FROM ledger_recovery";
    by_hand(db, sql, sql);
}

/// A scene with a core and a ledger marked recovering, and a relay started on it.
fn recovering_scene() -> (Scene, Server) {
    let s = Scene::new().core(&[]).build();
    mark_recovering(&s.db);
    let relay = s.start_relay(&[]);
    (s, relay)
}

#[test]
fn a_booking_the_ledger_forgot_is_answered_from_the_inquiry_and_booked_once() {
    skip_if_unavailable!();
    let (s, relay) = recovering_scene();
    let m = msg("G-RC-FORGOT", 1500, "rent");
    let booking = s.core().book(&m);
    let asked = s.core().inquiries();

    let first = call(&relay.addr, &m);
    assert_eq!(
        String::from_utf8_lossy(&first),
        String::from_utf8_lossy(&booked_reply(&m, &booking))
    );
    let again = call(&relay.addr, &m);
    assert_eq!(again, first, "the resend replays the same bytes");
    assert_eq!(s.core().bookings("G-RC-FORGOT"), 1);
    assert_eq!(s.core().inquiries(), asked + 1, "the resend asks nothing");

    let row = s.db.row("G-RC-FORGOT").expect("a row");
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Done, Some("0000"), Some(0))
    );
    assert_eq!(row.request.as_deref(), Some(&m[..]));
    assert_eq!(row.response.as_deref(), Some(&first[..]));
    let last = s.db.store().history("G-RC-FORGOT").unwrap().pop().unwrap();
    assert_eq!(last.reason.as_deref(), Some(BOOKED_BEFORE));

    // The core booked this GUID for another amount: E904, nothing written, nothing sent.
    s.core().book(&msg("G-RC-OTHER", 99, ""));
    let other = msg("G-RC-OTHER", 1500, "rent");
    assert_eq!(
        call(&relay.addr, &other),
        short(&other, &wire::E_GUID_REUSED)
    );
    assert_eq!(s.db.row("G-RC-OTHER"), None);
    assert_eq!(s.core().bookings("G-RC-OTHER"), 1);
}

#[test]
fn a_guid_the_core_never_booked_is_claimed_and_booked_once() {
    skip_if_unavailable!();
    let (s, relay) = recovering_scene();
    let m = msg("G-RC-NEW", 1500, "rent");
    let asked = s.core().inquiries();
    let first = call(&relay.addr, &m);
    assert_code(&first, "0000");
    assert_eq!(call(&relay.addr, &m), first);
    assert_eq!(s.core().bookings("G-RC-NEW"), 1);
    assert_eq!(s.core().inquiries(), asked + 1);
    assert_done_as_booked(&s.db, s.core(), &m);
    assert_eq!(s.db.row("G-RC-NEW").unwrap().attempts, Some(1));
}

#[test]
fn with_the_core_down_a_new_guid_is_e902_and_leaves_no_row() {
    skip_if_unavailable!();
    let s = Scene::new().build();
    mark_recovering(&s.db);
    let relay = start_relay(&s.db, &dead_url(), &[]);
    let m = msg("G-RC-DOWN", 1500, "rent");
    assert_eq!(call(&relay.addr, &m), short(&m, &wire::E_NOT_SENT));
    assert_eq!(s.db.row("G-RC-DOWN"), None, "nothing written");
}

/// Polls the relay's `txrelay_ledger_recovering` until it is `want`; how long that took.
fn gauge_becomes(admin: &str, want: f64) -> Duration {
    let started = Instant::now();
    let seen = eventually(WAIT, || {
        sample(&scrape(admin), "txrelay_ledger_recovering") == want
    });
    assert!(seen, "txrelay_ledger_recovering never became {want}");
    started.elapsed()
}

#[test]
fn a_running_relay_sees_the_mark_begin_and_end_within_5_seconds() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let (relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
    assert_eq!(sample(&scrape(&admin), "txrelay_ledger_recovering"), 0.0);
    let m = msg("G-RC-LIVE", 1500, "rent");
    let booking = s.core().book(&m);

    mark_recovering(&s.db);
    let took = gauge_becomes(&admin, 1.0);
    assert!(took < SEEN_WITHIN, "the mark was seen after {took:?}");
    assert!(
        relay
            .stderr()
            .contains("recovery mode: the ledger is recovering since")
    );
    assert_eq!(call(&relay.addr, &m), booked_reply(&m, &booking));
    assert_eq!(s.core().bookings("G-RC-LIVE"), 1);
    let text = scrape(&admin);
    let inquiries = "txrelay_recovery_inquiries_total";
    assert_eq!(
        sample(&text, &format!("{inquiries}{{outcome=\"booked\"}}")),
        1.0
    );
    assert_eq!(
        sample(&text, &format!("{inquiries}{{outcome=\"error\"}}")),
        0.0
    );

    end_recovery(&s.db);
    let took = gauge_becomes(&admin, 0.0);
    assert!(took < SEEN_WITHIN, "the end was seen after {took:?}");
    assert!(relay.stderr().contains("recovery mode ended"));
    // No longer recovering: a new GUID is claimed and sent without an inquiry.
    let asked = s.core().inquiries();
    let n = msg("G-RC-AFTER", 1500, "rent");
    assert_code(&call(&relay.addr, &n), "0000");
    assert_eq!(s.core().inquiries(), asked);
    assert_eq!(s.core().bookings("G-RC-AFTER"), 1);
}

#[test]
fn reprocess_in_recovery_settles_what_the_core_booked_without_posting_it() {
    skip_if_unavailable!();
    let booked = msg("G-RC-RP-BOOKED", 1500, "rent");
    let never = msg("G-RC-RP-NEVER", 1500, "rent");
    let other = msg("G-RC-RP-OTHER", 1500, "rent");
    // Oldest first: the run's reachability inquiry asks about the first row.
    let s = Scene::new()
        .core(&[])
        .rows([
            RowSpec::failed(&booked).age(OLD + 3),
            RowSpec::failed(&never).age(OLD + 2),
            RowSpec::failed(&other).age(OLD + 1),
        ])
        .build();
    let booking = s.core().book(&booked);
    s.core().book(&msg("G-RC-RP-OTHER", 99, ""));
    mark_recovering(&s.db);

    let r = s.reprocess(&["--max-attempts", "3", "--json"]);
    r.expect_code(EXIT_LEFT);
    assert_counts(
        &r.json(),
        &[
            ("examined", 3),
            ("sent", 1),
            ("done", 2),
            ("recovered", 1),
            ("recovery_left", 1),
            ("skipped", 1),
        ],
    );
    // Settled from the inquiry on its own attempt, never POSTed again.
    let row = s.db.row("G-RC-RP-BOOKED").unwrap();
    assert_eq!((row.state, row.attempts), (State::Done, Some(1)));
    assert_eq!(row.response, Some(booked_reply(&booked, &booking)));
    assert_eq!(s.core().bookings("G-RC-RP-BOOKED"), 1);
    // Never booked: resent once.
    assert_eq!(s.db.row("G-RC-RP-NEVER").unwrap().attempts, Some(2));
    assert_eq!(s.core().bookings("G-RC-RP-NEVER"), 1);
    // Booked for another amount: left FAILED, not sent.
    let row = s.db.row("G-RC-RP-OTHER").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Failed, Some("E902"), Some(1))
    );
    assert_eq!(s.core().bookings("G-RC-RP-OTHER"), 1);
}
