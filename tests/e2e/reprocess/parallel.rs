//! `reprocess --parallel K`: up to K resends at once over kept-alive connections, against a
//! slow core; every row sent and booked exactly once, each claim and result its own guarded
//! statement; a core that is down costs no attempt (no row is claimed while it does not
//! answer); the summary the same as one at a time.

use std::collections::BTreeMap;

use crate::util::*;

const N: usize = 20;

fn failed_msgs(prefix: &str, memo: &str) -> Vec<Vec<u8>> {
    (0..N)
        .map(|i| msg(&format!("{prefix}-{i:02}"), 10 + i as u64, memo))
        .collect()
}

#[test]
fn parallel_reprocess_sends_every_row_once_against_a_slow_core() {
    skip_if_unavailable!();
    let msgs = failed_msgs("G-PRP", "SLOW");
    let s = Scene::new()
        .core(&["--slow-ms", "300"])
        .rows(
            msgs.iter()
                .enumerate()
                .map(|(i, m)| RowSpec::failed(m).age(OLD + i as u64)),
        )
        .build();
    let r = s.reprocess(&["--max-attempts", "3", "--parallel", "8", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(
        &r.json(),
        &[
            ("examined", N as u64),
            ("sent", N as u64),
            ("done", N as u64),
            ("not_tried", 0),
            ("raced", 0),
        ],
    );
    let want: BTreeMap<String, u64> = msgs.iter().map(|m| (guid_of(m), 1)).collect();
    assert_eq!(s.core().by_guid(), want, "every GUID booked exactly once");
    for m in &msgs {
        assert_done_as_booked(&s.db, s.core(), m);
        assert_eq!(s.db.row(&guid_of(m)).unwrap().attempts, Some(2));
    }
    // Nothing left to send.
    let r = s.reprocess(&["--max-attempts", "3", "--parallel", "8", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 0), ("sent", 0)]);
    assert_eq!(s.core().total_bookings(), N as u64);
}

#[test]
fn parallel_reprocess_with_the_core_down_claims_no_row() {
    skip_if_unavailable!();
    let msgs = failed_msgs("G-PRD", "");
    let s = Scene::new()
        .rows(
            msgs.iter()
                .enumerate()
                .map(|(i, m)| RowSpec::failed(m).age(OLD + (N - i) as u64)),
        )
        .build();
    let r = reprocess(
        &s.db,
        &dead_url(),
        &["--max-attempts", "3", "--parallel", "8", "--json"],
    );
    r.expect_code(EXIT_LEFT);
    assert!(r.stderr().contains("no row claimed"), "{}", r.stderr());
    assert_counts(
        &r.json(),
        &[("examined", N as u64), ("sent", 0), ("not_tried", N as u64)],
    );
    for m in &msgs {
        let row = s.db.row(&guid_of(m)).unwrap();
        assert_eq!(
            (row.state, row.attempts),
            (State::Failed, Some(1)),
            "{}: not claimed",
            row.guid
        );
    }
}

/// Rows of every outcome: booked, rejected, a 500 (outcome unknown), a dropped connection
/// (booked, outcome unknown), a stored request that cannot be used.
fn mixed_scene() -> Scene {
    let rows = [
        msg("G-RMX-OK0", 10, ""),
        msg("G-RMX-OK1", 11, "SLOW"),
        msg("G-RMX-OK2", 12, ""),
        msg("G-RMX-REJ", 20, "REJECT"),
        msg("G-RMX-500", 30, "FAIL500"),
        msg("G-RMX-DROP", 40, "DROP"),
    ];
    Scene::new()
        .core(&["--slow-ms", "200"])
        .rows(
            rows.iter()
                .enumerate()
                .map(|(i, m)| RowSpec::failed(m).age(OLD + i as u64)),
        )
        .row(
            RowSpec::failed(&msg("G-RMX-OTHER", 1, ""))
                .guid("G-RMX-JUNK")
                .age(OLD),
        )
        .build()
}

#[test]
fn parallel_and_one_at_a_time_print_the_same_summary() {
    skip_if_unavailable!();
    let (j8, one, many) = same_summary_one_or_eight_at_once(
        mixed_scene,
        Scene::reprocess,
        &["--max-attempts", "3"],
        EXIT_LEFT,
    );
    assert_counts(
        &j8,
        &[
            ("examined", 7),
            ("sent", 6),
            ("done", 4),
            ("unknown", 2),
            ("failed", 0),
            ("skipped", 1),
        ],
    );
    assert_eq!(
        j8["unsettled"],
        serde_json::json!(["G-RMX-500", "G-RMX-DROP", "G-RMX-JUNK"]),
        "sorted"
    );
    for s in [&one, &many] {
        assert_eq!(
            s.core().by_guid(),
            BTreeMap::from([
                ("G-RMX-DROP".to_string(), 1),
                ("G-RMX-OK0".to_string(), 1),
                ("G-RMX-OK1".to_string(), 1),
                ("G-RMX-OK2".to_string(), 1),
            ])
        );
    }
}
