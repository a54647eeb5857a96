//! Every guarded statement of the `Store` interface, and the selections of the batch tools.

use ledger::{Access, Change, Row, State};

use crate::backend::{Backend, hand};

fn change(guid: &str, from: State, attempt: Option<i64>, to: State, code: &[u8; 4]) -> Change {
    Change::new(guid, from, attempt, to, *code, b"reply".to_vec())
}

fn guids(rows: Vec<Row>) -> Vec<String> {
    rows.into_iter().map(|r| r.guid).collect()
}

pub fn a_claim_is_won_once_and_every_transition_is_guarded(b: &Backend) {
    let s = b.tool();
    assert!(s.claim_new("G1", "TRNF", b"req", None).unwrap());
    assert!(!s.claim_new("G1", "TRNF", b"req", None).unwrap());
    assert_eq!(
        s.reclaim_failed("G1", b"req", None).unwrap(),
        None,
        "SENT is not FAILED"
    );
    assert!(
        s.transition(&change("G1", State::Sent, Some(1), State::Failed, b"E902"))
            .unwrap()
    );
    assert!(
        !s.transition(&change("G1", State::Sent, Some(1), State::Done, b"0000"))
            .unwrap(),
        "left SENT already"
    );
    assert_eq!(
        s.reclaim_failed("G1", b"other", None).unwrap(),
        None,
        "another request"
    );
    assert_eq!(s.reclaim_failed("G1", b"req", None).unwrap(), Some(2));
    assert_eq!(s.reclaim_failed("G1", b"req", None).unwrap(), None);
    let row = s.read("G1").unwrap().unwrap();
    assert_eq!(row.state, State::Sent);
    assert_eq!(row.attempts, Some(2));
    assert_eq!(row.request.as_deref(), Some(&b"req"[..]));
    assert_eq!(row.tx_code.as_deref(), Some("TRNF"));
    assert!(
        s.transition(&change("G1", State::Sent, Some(2), State::Done, b"0000"))
            .unwrap()
    );
    let row = s.read("G1").unwrap().unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref()),
        (State::Done, Some("0000"))
    );
    assert_eq!(row.response.as_deref(), Some(&b"reply"[..]));
    assert_eq!(
        row.updated_at.len(),
        "YYYY-MM-DD HH:MM:SS".len(),
        "{}",
        row.updated_at
    );
    assert_eq!(s.read("nope").unwrap(), None);
}

pub fn a_late_result_never_lands_on_a_later_claim(b: &Backend) {
    let s = b.tool();
    assert!(s.claim_new("G1", "TRNF", b"req", None).unwrap());
    assert!(
        s.transition(&change("G1", State::Sent, Some(1), State::Failed, b"E902"))
            .unwrap()
    );
    assert_eq!(s.reclaim_failed("G1", b"req", None).unwrap(), Some(2));
    assert!(
        !s.transition(&change("G1", State::Sent, Some(1), State::Done, b"0000"))
            .unwrap(),
        "attempt 1's result must not land on attempt 2's claim"
    );
    assert!(
        s.transition(&change("G1", State::Sent, Some(2), State::Done, b"0000"))
            .unwrap()
    );
}

pub fn reprocess_reclaims_only_failed_e902_below_the_cap(b: &Backend) {
    b.put(&[
        hand("A", "FAILED", Some("E902"), 1, 0),
        hand("B", "FAILED", Some("E901"), 1, 0),
        hand("C", "FAILED", Some("E902"), 3, 0),
        hand("D", "UNKNOWN", Some("E902"), 1, 0),
    ]);
    let s = b.tool();
    assert_eq!(s.reclaim_for_resend("A", 3).unwrap(), Some(2));
    assert_eq!(s.reclaim_for_resend("B", 3).unwrap(), None);
    assert_eq!(s.reclaim_for_resend("C", 3).unwrap(), None);
    assert_eq!(s.reclaim_for_resend("D", 3).unwrap(), None);
    assert_eq!(s.reclaim_for_resend("A", 3).unwrap(), None, "now SENT");
}

pub fn selections_follow_the_contract(b: &Backend) {
    const DAY: u64 = 86_400;
    b.put(&[
        hand("U-old", "UNKNOWN", Some("E901"), 1, 120),
        hand("U-new", "UNKNOWN", Some("E901"), 1, 0),
        hand("S-old", "SENT", None, 1, 120),
        hand("F-ok", "FAILED", Some("E902"), 1, DAY),
        hand("F-max", "FAILED", Some("E902"), 3, DAY),
        hand("F-other", "FAILED", Some("E901"), 1, DAY),
        hand("D-old", "DONE", Some("0000"), 1, 10 * DAY),
        hand("D-new", "DONE", Some("0000"), 1, DAY),
        hand("U-ancient", "UNKNOWN", Some("E901"), 1, 100 * DAY),
        hand("F-ancient", "FAILED", Some("E902"), 9, 101 * DAY),
    ]);
    let s = b.tool();
    // resolve's selection (no inquiry has failed here: every row old enough is due).
    assert_eq!(
        guids(s.select_due(State::Unknown, 60, u32::MAX).unwrap()),
        ["U-ancient", "U-old"]
    );
    assert_eq!(
        guids(s.select_due(State::Sent, 60, u32::MAX).unwrap()),
        ["S-old"]
    );
    assert_eq!(guids(s.select_resendable(3, None).unwrap()), ["F-ok"]);
    assert!(s.select_resendable(3, Some(0)).unwrap().is_empty());
    assert_eq!(guids(s.select_purgeable(7).unwrap()), ["D-old"]);
    let mut counts = s.count_by_state().unwrap();
    counts.sort_by_key(|(st, _)| st.as_str());
    assert_eq!(
        counts,
        [
            (State::Done, 2),
            (State::Failed, 4),
            (State::Sent, 1),
            (State::Unknown, 3)
        ]
    );
    assert_eq!(s.all_rows().unwrap().len(), 10);
    assert_eq!(s.all_rows().unwrap()[0].guid, "F-ancient", "oldest first");
}

pub fn purge_deletes_in_bounded_chunks_and_only_old_done_rows(b: &Backend) {
    let old: Vec<String> = (0..25).map(|i| format!("D{i}")).collect();
    let rows: Vec<_> = old
        .iter()
        .map(|g| hand(g, "DONE", Some("0000"), 1, 40 * 86_400))
        .chain([
            hand("U", "UNKNOWN", None, 1, 400 * 86_400),
            hand("F", "FAILED", None, 1, 400 * 86_400),
            hand("S", "SENT", None, 1, 400 * 86_400),
            hand("D-new", "DONE", None, 1, 86_400),
        ])
        .collect();
    b.put(&rows);
    let s = b.tool();
    assert_eq!(s.purge_chunk(30, 10).unwrap(), 10);
    assert_eq!(s.purge_chunk(30, 10).unwrap(), 10);
    assert_eq!(s.purge_chunk(30, 10).unwrap(), 5);
    assert_eq!(s.purge_chunk(30, 10).unwrap(), 0);
    assert_eq!(guids(s.all_rows().unwrap()).len(), 4);
}

pub fn the_newest_booking_is_the_canary(b: &Backend) {
    b.put(&[
        hand("old", "DONE", Some("0000"), 1, 300),
        hand("newer", "DONE", Some("0000"), 1, 100),
        hand("rejected", "DONE", Some("B001"), 1, 10),
        hand("unknown", "UNKNOWN", Some("E901"), 1, 5),
    ]);
    assert_eq!(
        guids(b.tool().recent_bookings(5).unwrap()),
        ["newer", "old"]
    );
}

pub fn every_connection_commits_durably(b: &Backend) {
    for access in [Access::Relay, Access::Tool, Access::Batch] {
        let all = b.open(access).durability().unwrap();
        assert!(!all.is_empty());
        for d in all {
            assert!(d.is_durable(), "{access:?}: {d:?}");
        }
    }
}

pub fn rows_made_by_hand_with_only_the_required_columns_are_read(b: &Backend) {
    b.put_bare("H", "DONE");
    let row = b.tool().read("H").unwrap().unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(
        (row.request, row.response, row.rsp_code),
        (None, None, None)
    );
    assert_eq!(row.attempts, Some(0));
    // And a read-only look at the same ledger sees it too.
    assert!(b.open(Access::ReadOnly).read("H").unwrap().is_some());
    assert!(
        b.open(Access::ReadOnly)
            .claim_new("X", "TRNF", b"x", None)
            .is_err(),
        "read-only"
    );
}

/// What the relay's metrics sampler and `/healthz` read: the oldest row's age per state, and
/// a write and a read round trip that touches no `tx` row.
pub fn the_oldest_age_and_the_health_round_trip(b: &Backend) {
    const DAY: u64 = 86_400;
    let s = b.open(Access::Relay);
    assert_eq!(s.oldest_age_secs(State::Unknown).unwrap(), None, "no row");
    b.put(&[
        hand("U-day", "UNKNOWN", Some("E901"), 1, DAY),
        hand("U-new", "UNKNOWN", Some("E901"), 1, 5),
        hand("D-old", "DONE", Some("0000"), 1, 10 * DAY),
    ]);
    let oldest = s.oldest_age_secs(State::Unknown).unwrap().unwrap();
    assert!(
        (DAY as f64 - 1.0..DAY as f64 + 60.0).contains(&oldest),
        "{oldest}"
    );
    assert_eq!(s.oldest_age_secs(State::Failed).unwrap(), None);
    let before = s.all_rows().unwrap();
    for store in [s, b.tool()] {
        store.health_round_trip().unwrap();
        store.health_round_trip().unwrap();
        assert_eq!(store.all_rows().unwrap(), before, "no tx row changed");
    }
}
