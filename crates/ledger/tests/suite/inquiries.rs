//! resolve's failed inquiries (the side table `tx_inquiry`): counting, the backoff computed
//! against the database's clock, the selection that honours it, the list of GUIDs left to an
//! operator, clearing and pruning; on every store of each backend.

use std::sync::{Arc, Barrier};

use ledger::store::{INQUIRY_BACKOFF_CAP, InquiryRecord, LAST_ERROR_MAX_CHARS};
use ledger::{Access, Row, State, Store};
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

use crate::backend::{Backend, hand};

fn guids(rows: Vec<Row>) -> Vec<String> {
    rows.into_iter().map(|r| r.guid).collect()
}

fn record_guids(records: Vec<InquiryRecord>) -> Vec<String> {
    records.into_iter().map(|r| r.guid).collect()
}

/// Seconds from now (this machine's clock, which is the database's) to `at` (UTC,
/// `YYYY-MM-DD HH:MM:SS`).
fn secs_from_now(at: &str) -> i64 {
    let t = PrimitiveDateTime::parse(
        at,
        format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"),
    )
    .unwrap_or_else(|e| panic!("{at:?}: {e}"))
    .assume_utc();
    (t - OffsetDateTime::now_utc()).whole_seconds()
}

#[track_caller]
fn assert_due_in(r: &InquiryRecord, secs: i64) {
    let got = secs_from_now(&r.next_at);
    assert!(
        (secs - 3..=secs + 1).contains(&got),
        "{}: next inquiry in {got} s, want {secs} s: {r:?}",
        r.guid
    );
}

/// The stores a ledger has: the batch tools' (one at a time, and several rows at once) and
/// the relay's (on SQLite one connection under a lock, and the group-commit writer with its
/// read pool; on PostgreSQL pools).
fn stores(b: &Backend) -> [(&'static str, Arc<dyn Store>); 3] {
    [
        ("tool", b.tool()),
        ("batch", b.open(Access::Batch)),
        ("relay", b.open(Access::Relay)),
    ]
}

pub fn failed_inquiries_count_up_and_back_off_doubling_to_the_cap(b: &Backend) {
    let cap = INQUIRY_BACKOFF_CAP.as_secs() as i64;
    for (name, s) in stores(b) {
        let g = format!("G-BACKOFF-{name}");
        b.put(&[hand(&g, "UNKNOWN", Some("E901"), 1, 120)]);
        // --min-age 60: 60, 120, 240, … seconds, never more than the cap.
        for n in 1..=8_i64 {
            let r = s
                .record_inquiry_failure(&g, &format!("error {n}"), 60)
                .unwrap();
            assert_eq!(r.guid, g);
            assert_eq!(r.failures, n, "{name}");
            assert_eq!(r.last_error.as_deref(), Some(&*format!("error {n}")));
            assert_due_in(&r, (60 << (n - 1)).min(cap));
        }
        let stored = b.inquiry_records();
        assert_eq!(record_guids(stored.clone()), vec![g.clone()], "{name}");
        assert_eq!(stored[0].failures, 8);

        // A successful inquiry clears the record; the next failure starts again at 1.
        assert!(s.clear_inquiry(&g).unwrap(), "{name}");
        assert!(!s.clear_inquiry(&g).unwrap(), "{name}: already gone");
        assert!(b.inquiry_records().is_empty());
        let r = s.record_inquiry_failure(&g, "again", 60).unwrap();
        assert_eq!(r.failures, 1);
        assert_due_in(&r, 60);

        // --min-age 0: no backoff at all; a --min-age beyond the cap waits the cap; an error
        // text is cut; a count far past any doubling cannot overflow.
        let r = s.record_inquiry_failure(&g, "zero", 0).unwrap();
        assert_due_in(&r, 0);
        let r = s
            .record_inquiry_failure(&g, &"x".repeat(5000), u64::MAX)
            .unwrap();
        assert_due_in(&r, cap);
        assert_eq!(r.last_error.unwrap().len(), LAST_ERROR_MAX_CHARS);
        b.exec(
            &format!("UPDATE tx_inquiry SET failures = 100000 WHERE guid = '{g}'"),
            &format!("UPDATE tx_inquiry SET failures = 100000 WHERE guid = '{g}'"),
        );
        let r = s.record_inquiry_failure(&g, "many", 1).unwrap();
        assert_eq!(r.failures, 100_001);
        assert_due_in(&r, cap);
        assert!(s.clear_inquiry(&g).unwrap());
    }
}

pub fn resolve_selects_only_rows_whose_inquiry_is_due_and_not_given_up(b: &Backend) {
    b.put(&[
        hand("U-fresh", "UNKNOWN", Some("E901"), 1, 150),
        hand("U-wait", "UNKNOWN", Some("E901"), 1, 140),
        hand("U-due", "UNKNOWN", Some("E901"), 1, 130),
        hand("U-gave-up", "UNKNOWN", Some("E901"), 1, 120),
        hand("U-young", "UNKNOWN", Some("E901"), 1, 0),
        hand("S-wait", "SENT", None, 1, 140),
        hand("S-due", "SENT", None, 1, 130),
    ]);
    let s = b.tool();
    for g in ["U-due", "S-due", "U-wait", "S-wait", "U-young"] {
        s.record_inquiry_failure(g, "core silent", 60).unwrap();
    }
    for n in 0..3 {
        s.record_inquiry_failure("U-gave-up", &format!("bad answer {n}"), 60)
            .unwrap();
    }
    // The backoff of U-due, S-due, U-young and U-gave-up is over (aged by hand); U-wait and
    // S-wait fail once more, so their next inquiry is a while off.
    b.make_inquiries_due();
    for g in ["U-wait", "S-wait"] {
        s.record_inquiry_failure(g, "core silent", 60).unwrap();
    }
    for (name, s) in stores(b) {
        assert_eq!(
            guids(s.select_due(State::Unknown, 60, 3).unwrap()),
            ["U-fresh", "U-due"],
            "{name}: oldest first; U-wait not due, U-gave-up given up, U-young too young"
        );
        assert_eq!(
            guids(s.select_due(State::Sent, 60, 3).unwrap()),
            ["S-due"],
            "{name}"
        );
        let left = s.needs_operator(3).unwrap();
        assert_eq!(record_guids(left.clone()), ["U-gave-up"], "{name}");
        assert_eq!(left[0].failures, 3);
        assert_eq!(left[0].last_error.as_deref(), Some("bad answer 2"));
        // With a higher cap it is asked about again, and nobody needs an operator.
        assert_eq!(
            guids(s.select_due(State::Unknown, 60, 4).unwrap()),
            ["U-fresh", "U-due", "U-gave-up"],
            "{name}"
        );
        assert!(s.needs_operator(4).unwrap().is_empty());
        // The plain selection (inspect's pages) knows nothing of inquiries.
        let page = s.state_page(State::Unknown, Some(60), None, 100).unwrap();
        assert_eq!(
            guids(page.into_iter().map(|(_, r)| r).collect()),
            ["U-fresh", "U-wait", "U-due", "U-gave-up"]
        );
    }
    // A read-only look (inspect) sees the same operator list.
    assert_eq!(
        record_guids(b.open(Access::ReadOnly).needs_operator(3).unwrap()),
        ["U-gave-up"]
    );
    // Cleared, a GUID is due at once.
    assert!(s.clear_inquiry("U-wait").unwrap());
    assert_eq!(
        guids(s.select_due(State::Unknown, 60, 3).unwrap()),
        ["U-fresh", "U-wait", "U-due"]
    );
}

pub fn needs_operator_lists_only_guids_still_in_doubt_and_prune_forgets_the_rest(b: &Backend) {
    b.put(&[
        hand("U", "UNKNOWN", Some("E901"), 1, 120),
        hand("S", "SENT", None, 1, 120),
        hand("D", "DONE", Some("0000"), 1, 120),
        hand("F", "FAILED", Some("E902"), 1, 120),
    ]);
    let s = b.tool();
    for g in ["U", "S", "D", "F", "gone"] {
        for _ in 0..2 {
            s.record_inquiry_failure(g, "no answer", 60).unwrap();
        }
    }
    for (name, s) in stores(b) {
        assert_eq!(
            record_guids(s.needs_operator(2).unwrap()),
            ["S", "U"],
            "{name}: settled or purged GUIDs need nobody"
        );
        assert!(s.needs_operator(3).unwrap().is_empty(), "{name}");
        assert_eq!(
            record_guids(b.inquiry_records()),
            ["D", "F", "S", "U", "gone"],
            "{name}"
        );
    }
    assert_eq!(s.prune_inquiries().unwrap(), 3);
    assert_eq!(record_guids(b.inquiry_records()), ["S", "U"]);
    let relay = b.open(Access::Relay);
    assert_eq!(relay.prune_inquiries().unwrap(), 0);
    assert_eq!(record_guids(relay.needs_operator(2).unwrap()), ["S", "U"]);
}

pub fn a_ledger_from_before_the_side_table_reads_no_records_and_gets_it(b: &Backend) {
    b.put(&[hand("U", "UNKNOWN", Some("E901"), 1, 120)]);
    // As a ledger made by an earlier version is: no side table (and, on SQLite, schema
    // version 1; on PostgreSQL, no schema version at all).
    b.exec(
        "DROP TABLE tx_inquiry; PRAGMA user_version = 1;",
        "DROP TABLE tx_inquiry; DROP TABLE ledger_schema;",
    );
    let ro = b.open(Access::ReadOnly);
    assert!(ro.needs_operator(1).unwrap().is_empty());
    assert_eq!(ro.inquiry_record("U").unwrap(), None);
    assert!(b.inquiry_records().is_empty());
    // The next tool that opens it for writing adds the table.
    let s = b.tool();
    assert_eq!(
        s.record_inquiry_failure("U", "no answer", 60)
            .unwrap()
            .failures,
        1
    );
    assert!(
        s.select_due(State::Unknown, 60, 20).unwrap().is_empty(),
        "its inquiry just failed"
    );
    assert_eq!(ro.inquiry_record("U").unwrap().map(|r| r.failures), Some(1));
    assert_eq!(record_guids(b.inquiry_records()), ["U"]);
}

/// Failures recorded at once (two resolves, several threads each) are each counted: the
/// count is one upsert, not a read and a write.
pub fn failures_recorded_at_once_are_each_counted(b: &Backend) {
    const THREADS: usize = 40;
    b.put(&[hand("G-MANY", "UNKNOWN", Some("E901"), 1, 120)]);
    let stores = stores(b);
    let barrier = Barrier::new(THREADS);
    let counts: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (store, barrier) = (&stores[i % 3].1, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    store
                        .record_inquiry_failure("G-MANY", &format!("thread {i}"), 60)
                        .unwrap()
                        .failures
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut sorted = counts.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (1..=THREADS as i64).collect::<Vec<_>>(),
        "{counts:?}"
    );
    assert_eq!(b.inquiry_records()[0].failures, THREADS as i64);
}
