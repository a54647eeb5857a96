//! `resolve --parallel K`: up to K inquiries at once over kept-alive connections, against a
//! slow core; every row settled exactly once, each by its own guarded statement, and the
//! summary the same as one at a time would print. (How much faster is the benchmark's
//! business: scripts/drain_bench.sh.)

use serde_json::Value;

use crate::util::*;

const N: usize = 24;

/// `N` UNKNOWN rows; the even ones were booked by the core before their sends were given up.
/// A canary booking; the core thinks `inquiry_ms` over every inquiry.
fn scene(inquiry_ms: u64) -> (Scene, Vec<Vec<u8>>) {
    let canary = msg("G-PAR-CANARY", 1, "");
    let msgs: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-PAR-{i:02}"), 100 + i as u64, ""))
        .collect();
    let s = Scene::new()
        .core(&["--inquiry-ms", &inquiry_ms.to_string()])
        .row(RowSpec::of(&canary, State::Done).code("0000").age(DAY))
        .rows(
            msgs.iter()
                .enumerate()
                .map(|(i, m)| RowSpec::unknown(m).age(OLD + i as u64)),
        )
        .build();
    s.core().book(&canary);
    for m in msgs.iter().step_by(2) {
        s.core().book(m);
    }
    (s, msgs)
}

#[test]
fn parallel_resolve_settles_every_row_once_against_a_slow_core() {
    skip_if_unavailable!();
    let (s, msgs) = scene(200);
    let before = s.core().stats();
    let r = s.resolve(&["--min-age", "60", "--parallel", "8", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(
        &r.json(),
        &[
            ("examined", N as u64),
            ("done", N as u64 / 2),
            ("failed", N as u64 / 2),
            ("left", 0),
            ("raced", 0),
        ],
    );
    let after = s.core().stats();
    assert_eq!(after["bookings"], before["bookings"], "resolve never POSTs");
    assert_eq!(after["by_guid"], before["by_guid"]);
    assert_eq!(
        after["inquiries"].as_u64().unwrap(),
        before["inquiries"].as_u64().unwrap() + N as u64 + 1,
        "one inquiry per row, and the canary"
    );
    for (i, m) in msgs.iter().enumerate() {
        if i % 2 == 0 {
            assert_done_as_booked(&s.db, s.core(), m);
            assert_eq!(s.core().bookings(&guid_of(m)), 1);
        } else {
            assert_failed_e902(&s.db, m, 1);
            assert_eq!(s.core().bookings(&guid_of(m)), 0);
        }
    }
    // Nothing left: a second run examines nothing.
    let r = s.resolve(&["--min-age", "60", "--parallel", "8", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 0)]);
}

/// A ledger with every kind of outcome: booked, never booked, a stored request that cannot
/// be used, inquiries that fail (UNKNOWN and stale SENT), and one GUID already left to an
/// operator. The same on every call, against a core of its own.
fn mixed_scene() -> Scene {
    let canary = msg("G-MIX-CANARY", 1, "");
    let booked: Vec<Vec<u8>> = (0..4)
        .map(|i| msg(&format!("G-MIX-B{i}"), 10, ""))
        .collect();
    let unbooked: Vec<Vec<u8>> = (0..4)
        .map(|i| msg(&format!("G-MIX-N{i}"), 20, ""))
        .collect();
    let bad: Vec<Vec<u8>> = (0..3)
        .map(|i| msg(&format!("G-MIX-X{i}"), 30, ""))
        .collect();
    let stale = msg("G-MIX-S0", 40, "");
    let given_up = msg("G-MIX-OP", 50, "");
    let s = Scene::new()
        .core(&["--inquiry-ms", "50"])
        .row(RowSpec::of(&canary, State::Done).code("0000").age(DAY))
        .rows(booked.iter().map(|m| RowSpec::unknown(m).age(OLD)))
        .rows(unbooked.iter().map(|m| RowSpec::unknown(m).age(OLD)))
        .rows(bad.iter().map(|m| RowSpec::unknown(m).age(OLD)))
        .row(RowSpec::sent(&stale).age(OLD))
        .row(RowSpec::unknown(&given_up).age(OLD))
        .row(
            RowSpec::unknown(&msg("G-MIX-JUNK", 1, ""))
                .guid("G-MIX-J0")
                .age(OLD),
        )
        .build();
    s.core().book(&canary);
    for m in &booked {
        s.core().book(m);
    }
    for g in ["G-MIX-X0", "G-MIX-X1", "G-MIX-X2", "G-MIX-S0", "G-MIX-OP"] {
        s.core().book_unrepresentable(g);
    }
    by_hand(
        &s.db,
        "INSERT INTO tx_inquiry (guid, failures, last_error, next_at) \
         VALUES ('G-MIX-OP', 5, 'no answer', datetime('now', '-1 seconds'))",
        "INSERT INTO tx_inquiry (guid, failures, last_error, next_at) \
         VALUES ('G-MIX-OP', 5, 'no answer', now() - interval '1 second')",
    );
    s
}

#[test]
fn parallel_and_one_at_a_time_print_the_same_summary() {
    skip_if_unavailable!();
    let (j8, one, many) = same_summary_one_or_eight_at_once(
        mixed_scene,
        Scene::resolve,
        &[
            "--min-age",
            "60",
            "--stale-sent",
            "60",
            "--max-inquiries",
            "5",
        ],
        EXIT_LEFT,
    );
    assert_counts(
        &j8,
        &[
            ("examined", 13),
            ("done", 4),
            ("failed", 4),
            ("left", 3),
            ("sent_to_unknown", 1),
            ("skipped", 1),
            ("raced", 0),
        ],
    );
    let unsettled: Vec<&str> = j8["unsettled"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        unsettled,
        ["G-MIX-J0", "G-MIX-S0", "G-MIX-X0", "G-MIX-X1", "G-MIX-X2"],
        "sorted"
    );
    assert_eq!(j8["needs_operator"][0]["guid"], "G-MIX-OP");
    assert_eq!(
        j8["needs_operator"].as_array().map(Vec::len),
        Some(1),
        "{j8}"
    );
    // And the same rows (but for updated_at and the bookings' references and times, which
    // are each core's own).
    let settled = |s: &Scene| {
        rows_by_guid(&s.db)
            .into_iter()
            .map(|r| {
                let header = r.response.map(|mut b| {
                    b.truncate(45);
                    b
                });
                (r.guid, r.state, r.rsp_code, r.attempts, header)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(settled(&one), settled(&many));
    for s in [&one, &many] {
        for g in ["G-MIX-X0", "G-MIX-X1", "G-MIX-X2", "G-MIX-S0"] {
            assert_eq!(inquiry_failures(&s.db, g), Some(1), "{g}");
        }
    }
}
