//! `--stale-sent`: SENT rows left by a relay that died between claim and result, settled
//! only when asked on the command line, never under the 60-second floor, and never twice
//! when the relay's own result lands at the same moment.

use wire::{E_NOT_SENT, E_UNKNOWN};

use crate::util::*;

#[test]
fn resolve_stale_sent_settles_orphaned_sent_rows_only_with_the_flag() {
    skip_if_unavailable!();
    let never = msg("G-SS-NEVER", 11, "");
    let young = msg("G-SS-YOUNG", 12, "");
    let unk = msg("G-SS-UNK", 13, "");
    // Other states are never resolve's business, whatever their age and the flags.
    let others = ["G-SS-RECEIVED", "G-SS-FAILED", "G-SS-DONE"];
    let s = Scene::new()
        .core(&["--slow-ms", "600"])
        .row(RowSpec::sent(&never).age(OLD))
        .row(RowSpec::sent(&young).age(5))
        .row(RowSpec::unknown(&unk).age(OLD))
        .row(RowSpec::of(&msg(others[0], 14, ""), State::Received).age(OLD))
        .row(RowSpec::failed(&msg(others[1], 14, "")).age(OLD))
        .row(
            RowSpec::of(&msg(others[2], 14, ""), State::Done)
                .code("0000")
                .age(OLD),
        )
        .build();
    // A relay that dies between claim and result leaves its row SENT, booked by the core.
    // A lock on its row holds the relay's result back until the relay is killed.
    let orphan = msg("G-SS-ORPHAN", 4242, "SLOW");
    {
        let mut dying = s.start_relay(&[]);
        let mut c = Channel::connect(&dying.addr);
        c.send(&orphan);
        assert!(eventually(WAIT, || s.db.state("G-SS-ORPHAN") == Some(State::Sent)));
        let lock = WriteLock::take(&s.db, "G-SS-ORPHAN");
        assert!(eventually(WAIT, || s.core().bookings("G-SS-ORPHAN") == 1));
        dying.kill();
        lock.release_after_waiters_gave_up();
    }
    assert_eq!(s.db.state("G-SS-ORPHAN"), Some(State::Sent));
    s.db.age("G-SS-ORPHAN", OLD);
    s.core().book(&unk);
    // The booked one is known to the core, as the canary inquiry expects.
    s.core().book(&msg(others[2], 14, ""));
    let others_before = rows_of(&s.db, &others);
    let sent_guids = ["G-SS-ORPHAN", "G-SS-NEVER", "G-SS-YOUNG"];
    let sent_before = rows_of(&s.db, &sent_guids);

    // Without the flag: SENT rows are never touched (nor asked about).
    let r = s.resolve(&["--min-age", "60"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout()
            .starts_with("resolve: 1 examined, 1 DONE, 0 FAILED"),
        "{}",
        r.stdout()
    );
    assert_eq!(s.core().inquiries(), 2, "the canary, then G-SS-UNK");
    assert_eq!(rows_of(&s.db, &sent_guids), sent_before);
    assert_done_as_booked(&s.db, s.core(), &unk);

    // With a threshold above the rows' age: still untouched.
    let r = s.resolve(&["--min-age", "60", "--stale-sent", "1000"]);
    r.expect_code(EXIT_SETTLED);
    assert!(
        r.stdout().starts_with("resolve: 0 examined"),
        "{}",
        r.stdout()
    );
    assert_eq!(rows_of(&s.db, &sent_guids), sent_before);

    // With the flag: aged SENT rows settled like UNKNOWN ones; the young one stays.
    let asked = s.core().inquiries();
    let r = s.resolve(&["--min-age", "60", "--stale-sent", "100", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        s.core().inquiries(),
        asked + 3,
        "the canary, then only the two aged SENT rows were asked about"
    );
    assert_counts(
        &r.json(),
        &[
            ("examined", 2),
            ("done", 1),
            ("failed", 1),
            ("sent_to_unknown", 0),
        ],
    );
    let orphan_reply = assert_done_as_booked(&s.db, s.core(), &orphan);
    assert_eq!(s.db.row("G-SS-ORPHAN").unwrap().attempts, Some(1));
    assert_failed_e902(&s.db, &never, 1);
    assert_eq!(s.db.row("G-SS-YOUNG").unwrap(), sent_before[2]);
    assert_eq!(rows_of(&s.db, &others), others_before);

    // A new relay on the same ledger: the orphan replays, the never-sent one books once.
    let relay = s.start_relay(&[]);
    assert_eq!(call(&relay.addr, &orphan), orphan_reply);
    assert_eq!(code(&call(&relay.addr, &never)), "0000");
    assert_eq!(code(&call(&relay.addr, &young)), "E903");
    assert_eq!(s.core().bookings("G-SS-ORPHAN"), 1);
    assert_eq!(s.core().bookings("G-SS-NEVER"), 1);
    assert_eq!(s.core().bookings("G-SS-YOUNG"), 0);
    assert_eq!(s.core().bookings("G-SS-UNK"), 1);
}

#[test]
fn resolve_stale_sent_with_the_core_down_moves_sent_to_unknown() {
    skip_if_unavailable!();
    let s1 = msg("G-SD-1", 10, "");
    let s2 = msg("G-SD-2", 20, "");
    let u = msg("G-SD-U", 30, "");
    let s = Scene::new()
        .row(RowSpec::sent(&s1).age(OLD))
        .row(RowSpec::sent(&s2).attempts(2).age(OLD))
        .row(RowSpec::unknown(&u).age(OLD))
        .build();
    let u_before = s.db.row("G-SD-U").unwrap();

    let r = resolve(
        &s.db,
        &dead_url(),
        &["--min-age", "60", "--stale-sent", "60", "--json"],
    );
    r.expect_code(EXIT_LEFT);
    assert_counts(
        &r.json(),
        &[
            ("examined", 3),
            ("left", 1),
            ("sent_to_unknown", 2),
            ("exit_code", EXIT_LEFT.into()),
        ],
    );
    assert_settled_short(&s.db, &s1, State::Unknown, &E_UNKNOWN, 1);
    assert_settled_short(&s.db, &s2, State::Unknown, &E_UNKNOWN, 2);
    assert_eq!(s.db.row("G-SD-U").unwrap(), u_before);

    // Resends now get E901 at once instead of E903 for ever, and reach no core.
    let core = Core::start(&[]);
    let relay = start_relay(&s.db, &core.url(), &[]);
    assert_eq!(call(&relay.addr, &s1), short(&s1, &E_UNKNOWN));
    assert_eq!(core.total_bookings(), 0);

    // Each failed inquiry was counted, and puts the GUID's next one off by --min-age (the
    // first of the backoff's doublings): a run now asks about none of them.
    for g in ["G-SD-1", "G-SD-2", "G-SD-U"] {
        assert_eq!(inquiry_failures(&s.db, g), Some(1), "{g}");
    }
    let r = resolve(
        &s.db,
        &core.url(),
        &["--min-age", "0", "--stale-sent", "60", "--json"],
    );
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 0)]);
    assert_eq!(core.inquiries(), 0, "no inquiry before the backoff is over");

    // Once they are due, a later run settles them (the core booked only G-SD-2), and the
    // answered inquiries clear the records.
    make_inquiries_due(&s.db);
    core.book(&s2);
    let r = resolve(
        &s.db,
        &core.url(),
        &["--min-age", "0", "--stale-sent", "60"],
    );
    r.expect_code(EXIT_SETTLED);
    assert_failed_e902(&s.db, &s1, 1);
    assert_done_as_booked(&s.db, &core, &s2);
    assert_failed_e902(&s.db, &u, 1);
    assert_eq!(core.total_bookings(), 1);
    assert_eq!(inquiry_records(&s.db), vec![]);
}

#[test]
fn resolve_refuses_a_stale_sent_under_60_seconds_and_never_reads_it_from_the_environment() {
    skip_if_unavailable!();
    let g = "G-FLOOR";
    let m = msg(g, 7, "");
    let s = Scene::new()
        .core(&[])
        .row(RowSpec::sent(&m).age(OLD))
        .build();
    let before = s.db.row(g).unwrap();

    for secs in ["30", "59"] {
        let r = s.resolve(&["--min-age", "60", "--stale-sent", secs]);
        r.expect_code(EXIT_USAGE);
        assert!(
            r.stderr().contains("--stale-sent"),
            "{secs}: {}",
            r.stderr()
        );
        assert_eq!(r.stdout(), "");
        assert_eq!(
            s.db.row(g).unwrap(),
            before,
            "{secs}: refused, nothing done"
        );
    }

    // The environment alone never turns it on.
    let r = Run::with_env(
        "resolve",
        &[
            "--db",
            s.db.arg(),
            "--core",
            &s.core().url(),
            "--min-age",
            "60",
            "--json",
        ],
        &[("RUST_LOG", "info"), ("RESOLVE_STALE_SENT", "60")],
    );
    r.expect_code(EXIT_SETTLED);
    assert_eq!(r.json()["examined"], 0);
    assert!(
        r.stderr().contains("RESOLVE_STALE_SENT"),
        "says the variable is ignored: {}",
        r.stderr()
    );
    assert_eq!(s.db.row(g).unwrap(), before, "SENT stays SENT");
    assert_eq!(s.core().inquiries(), 0);

    // 60 is accepted: the orphaned row is asked about and, never booked, becomes FAILED.
    let r = s.resolve(&["--min-age", "60", "--stale-sent", "60", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 1), ("failed", 1)]);
    assert_settled_short(&s.db, &m, State::Failed, &E_NOT_SENT, 1);
    assert_eq!(s.core().bookings(g), 0);
}

#[test]
fn resolve_stale_sent_and_the_relay_settling_the_same_row_one_writer_wins() {
    skip_if_unavailable!();
    let s = Scene::new().core(&["--slow-ms", "500"]).relay(&[]).build();
    let m = msg("G-1W", 321, "SLOW");
    let pending = send_in_background(s.addr(), &m);
    assert!(eventually(WAIT, || s.db.state("G-1W") == Some(State::Sent)));
    // Old enough for the stale-sent floor (as if the relay had been paused that long).
    s.db.age("G-1W", OLD);
    // Hold the row's writes back so that the relay's result and resolve's settlement both
    // wait, then let them go at once.
    let lock = WriteLock::take(&s.db, "G-1W");
    assert!(eventually(WAIT, || s.core().bookings("G-1W") == 1));
    let r = std::thread::scope(|scope| {
        let run = scope.spawn(|| s.resolve(&["--min-age", "60", "--stale-sent", "60", "--json"]));
        assert!(eventually(WAIT, || s.core().inquiries() == 1));
        lock.release();
        run.join().unwrap()
    });
    let reply = pending.join().unwrap();
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_counts(&j, &[("examined", 1), ("skipped", 0), ("failed", 0)]);
    assert_eq!(
        j["done"].as_u64().unwrap() + j["raced"].as_u64().unwrap(),
        1,
        "{j}"
    );
    let stored = assert_done_as_booked(&s.db, s.core(), &m);
    assert_eq!(reply, stored, "the channel hears what the ledger holds");
    assert_eq!(s.call(&m), stored);
    assert_eq!(s.db.row("G-1W").unwrap().attempts, Some(1));
    assert_eq!(s.core().bookings("G-1W"), 1);
}
