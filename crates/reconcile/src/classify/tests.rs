//! The classes' unit tests, on journals and ledger rows built in memory (the helpers below;
//! no file, no ledger, no process). Here: the classes of one GUID from its bookings and its
//! row, above all the v1.3 rule: a stored reply naming another core_ref than the journal's
//! one booking is `double`. In `classes`: each class on a day as the relay leaves it. In
//! `window`: which GUIDs a window reports and from which bookings. What needs the binary or
//! a real ledger is tested end to end (`tests/e2e/reconcile.rs`).

mod classes;
mod window;

use super::*;
use crate::time::parse_rfc3339;

/// Day 1 and day 2 of the case: the relay's booking, then the core's second one.
const DAY1: &str = "2026-12-02T23:59:59Z";
const DAY2: &str = "2026-12-03T00:00:01Z";

fn at(t: &str) -> Secs {
    parse_rfc3339(t).unwrap()
}

/// The journal of the lines `(guid, core_ref, amount, booked_at)`.
fn journal(lines: &[(&str, &str, u64, &str)]) -> Journal {
    let mut j = Journal::default();
    for (guid, core_ref, amount, booked_at) in lines {
        let line = serde_json::json!({"guid": guid, "core_ref": core_ref, "amount": amount,
                                      "booked_at": booked_at});
        j.add(line.to_string().as_bytes()).unwrap();
    }
    j.seal().unwrap();
    j
}

/// A DONE/`0000` row whose stored reply says `core_ref`, `amount`, `booked_at`.
fn done(guid: &str, core_ref: &str, amount: u64, booked_at: &str) -> ReconcileRow {
    let compact: String = booked_at.chars().filter(char::is_ascii_digit).collect();
    let reply = format!("RTRNF{guid:<36}0000{core_ref:<18}{amount:013}{compact}");
    ReconcileRow {
        guid: guid.into(),
        state: State::Done,
        rsp_code: Some("0000".into()),
        response: Some(reply.into_bytes()),
        updated_at: booked_at.replace('T', " ").replace('Z', ""),
    }
}

/// A row with no stored reply, its updated_at `2026-12-02 09:00:10`.
fn row(guid: &str, state: State, rsp_code: Option<&str>) -> ReconcileRow {
    ReconcileRow {
        guid: guid.into(),
        state,
        rsp_code: rsp_code.map(Into::into),
        response: None,
        updated_at: "2026-12-02 09:00:10".into(),
    }
}

/// The window `[from, to)`.
fn window(from: &str, to: &str) -> Window {
    Window {
        from: at(from),
        to: at(to),
    }
}

/// Day 2's window.
fn day2() -> Window {
    Window {
        from: at("2026-12-03T00:00:00Z"),
        to: at("2026-12-04T00:00:00Z"),
    }
}

/// The report of `rows` against `j` over `window`.
fn report(j: Journal, window: Window, rows: Vec<ReconcileRow>) -> Report {
    let mut r = Reconciler::new(j, window);
    for row in rows {
        r.row(row);
    }
    r.finish()
}

fn one(report: &Report) -> &Break {
    assert_eq!(report.breaks.len(), 1, "{report:?}");
    &report.breaks[0]
}

/// The six counts, those not named 0.
fn counts(named: &[(Class, u64)]) -> Counts {
    let mut c = Counts::default();
    for &(class, n) in named {
        (0..n).for_each(|_| c.bump(class));
    }
    c
}

/// `(class, guid)` of every break, in the report's order.
fn breaks(report: &Report) -> Vec<(Class, &str)> {
    report
        .breaks
        .iter()
        .map(|b| (b.class, b.guid.as_str()))
        .collect()
}

/// A control total.
fn total(count: u64, amount: u64) -> Total {
    Total { count, amount }
}

/// The ledger's side of a break (the break has a row).
fn ledger(b: &Break) -> &ShownRow {
    b.ledger.as_ref().expect("a row")
}

#[test]
fn a_reply_naming_another_core_ref_than_the_one_booking_is_a_double() {
    // The relay booked X as C1 on day 1; the core booked X again as C2 on day 2, and only
    // day 2's export is read.
    let j = journal(&[("X", "C2", 1500, DAY2)]);
    let r = report(j, day2(), vec![done("X", "C1", 1500, DAY1)]);
    assert_eq!(r.counts.double, 1);
    assert_eq!(r.counts.breaks(), 1);
    let b = one(&r);
    assert_eq!((b.class, b.guid.as_str()), (Class::Double, "X"));
    let line = b.line();
    assert!(
        line.starts_with("double X: journal 1 booking(s) [C2 1500 2026-12-03T00:00:01Z]; ledger DONE 0000 reply [C1 1500 2026-12-02T23:59:59Z]"),
        "{line}"
    );
    assert!(
        line.ends_with(
            "; the ledger's reply names core_ref C1, the journal's one booking C2: the core \
             booked X at least twice (the reply's booking is not in the journal read)"
        ),
        "{line}"
    );
    let json = serde_json::to_value(b).unwrap();
    assert_eq!(json["class"], "double");
    assert!(json["why"].as_str().unwrap().contains("core_ref C1"));
    // Another amount as well does not make it a mismatch: the core_ref decides.
    let j = journal(&[("X", "C2", 1501, DAY2)]);
    let r = report(j, day2(), vec![done("X", "C1", 1500, DAY1)]);
    assert_eq!(one(&r).class, Class::Double);
}

#[test]
fn both_days_read_show_the_two_bookings() {
    let j = journal(&[("X", "C1", 1500, DAY1), ("X", "C2", 1500, DAY2)]);
    let r = report(j, day2(), vec![done("X", "C1", 1500, DAY1)]);
    let b = one(&r);
    assert_eq!(b.class, Class::Double);
    assert_eq!(b.journal.len(), 2);
    // The reply names one of them: the class and the two bookings say it all.
    assert_eq!(b.why, None);
    // A reply naming neither: the core booked it a third time.
    let j = journal(&[("X", "C2", 1500, DAY1), ("X", "C3", 1500, DAY2)]);
    let r = report(j, day2(), vec![done("X", "C1", 1500, DAY1)]);
    let why = one(&r).why.clone().unwrap();
    assert!(why.contains("none of the journal's 2 bookings"), "{why}");
    assert!(why.contains("at least 3 times"), "{why}");
}

#[test]
fn the_same_core_ref_told_otherwise_is_a_mismatch_naming_the_field() {
    let j = journal(&[("X", "C1", 1501, DAY2)]);
    let r = report(j, day2(), vec![done("X", "C1", 1500, DAY2)]);
    let b = one(&r);
    assert_eq!(b.class, Class::Mismatch);
    assert_eq!(
        b.why.as_deref(),
        Some("the reply's amount 1500 is not the journal's 1501")
    );
    let j = journal(&[("X", "C1", 1500, "2026-12-03T00:00:02Z")]);
    let r = report(j, day2(), vec![done("X", "C1", 1500, DAY2)]);
    let b = one(&r);
    assert_eq!(b.class, Class::Mismatch);
    assert!(
        b.line().ends_with(
            "; the reply's booked_at 2026-12-03T00:00:01Z is not the journal's \
             2026-12-03T00:00:02Z"
        ),
        "{}",
        b.line()
    );
}

#[test]
fn no_stored_reply_or_an_unreadable_one_stays_a_mismatch() {
    let mut none = done("X", "C1", 1500, DAY2);
    none.response = None;
    let mut torn = done("Y", "C1", 1500, DAY2);
    torn.response.as_mut().unwrap().truncate(60);
    let j = journal(&[("X", "C9", 1500, DAY2), ("Y", "C9", 1500, DAY2)]);
    let r = report(j, day2(), vec![none, torn]);
    assert_eq!(r.counts.mismatch, 2);
    assert!(r.breaks.iter().all(|b| b.why.is_none()));
    assert_eq!(
        r.breaks[0].ledger.as_ref().unwrap().reply_error.as_deref(),
        Some("no stored reply")
    );
}

#[test]
fn an_agreeing_reply_is_matched_and_other_rows_keep_their_class() {
    let j = journal(&[
        ("M", "C1", 1500, DAY2),
        ("F", "C2", 10, DAY2),
        ("R", "C3", 10, DAY2),
    ]);
    let failed = ReconcileRow {
        state: State::Failed,
        rsp_code: Some("E902".into()),
        response: None,
        ..done("F", "C9", 10, DAY2)
    };
    let rejected = ReconcileRow {
        rsp_code: Some("B001".into()),
        ..done("R", "C9", 10, DAY2)
    };
    let r = report(
        j,
        day2(),
        vec![done("M", "C1", 1500, DAY2), failed, rejected],
    );
    assert_eq!((r.counts.matched, r.counts.ghost), (1, 2));
    assert_eq!(r.counts.double, 0);
}

#[test]
fn a_guid_with_nothing_in_the_window_is_not_reported() {
    // The differing booking and the reply both on day 1: day 2 says nothing of X.
    let j = journal(&[("X", "C2", 1500, DAY1)]);
    let r = report(j, day2(), vec![done("X", "C1", 1500, DAY1)]);
    assert_eq!(r.counts, Counts::default());
    // The reply in the window and the differing booking out of it: reported, a double.
    let j = journal(&[("X", "C2", 1500, DAY1)]);
    let r = report(j, day2(), vec![done("X", "C1", 1500, DAY2)]);
    assert_eq!(one(&r).class, Class::Double);
}
