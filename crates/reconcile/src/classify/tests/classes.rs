//! Each class of CONTRACT §10 on a day as the relay leaves it (the end-to-end tests' `day()`
//! makes the same through the real relay and the core simulator): BOOK1 and BOOK2 booked
//! and answered, REJ rejected, E500 unknown and not booked, DROP booked with its answer lost
//! (UNKNOWN), FAIL never sent (FAILED). Alone it is clean: 2 matched, 1 pending. Each test
//! adds what makes one class and checks every count, the GUIDs that break and what each
//! side of a break shows.

use super::*;

const T0: &str = "2026-12-02T09:00:00Z";
const T1: &str = "2026-12-02T09:00:10Z";
const T2: &str = "2026-12-02T09:00:20Z";
/// When the core books once more, around the relay.
const LATER: &str = "2026-12-02T09:00:30Z";

/// A journal line: guid, core_ref, amount, booked_at.
type Line = (&'static str, &'static str, u64, &'static str);

/// The day's journal: the relay's two bookings, and the one whose answer was lost.
const BOOKED: [Line; 3] = [
    ("BOOK1", "C1", 1500, T0),
    ("BOOK2", "C2", 2500, T1),
    ("DROP", "C3", 300, T2),
];

/// The day's ledger.
fn rows() -> Vec<ReconcileRow> {
    let rejected = ReconcileRow {
        response: Some(format!("RTRNF{:<36}B001", "REJ").into_bytes()),
        ..row("REJ", State::Done, Some("B001"))
    };
    vec![
        done("BOOK1", "C1", 1500, T0),
        done("BOOK2", "C2", 2500, T1),
        rejected,
        row("E500", State::Unknown, Some("E901")),
        row("DROP", State::Unknown, Some("E901")),
        row("FAIL", State::Failed, Some("E902")),
    ]
}

/// `lines` against `rows` over the default window (the journal's span).
fn by_default(lines: &[Line], rows: Vec<ReconcileRow>) -> Report {
    let j = journal(lines);
    let w = Window::decide(None, None, j.span).unwrap();
    report(j, w, rows)
}

/// The day's journal with `more` lines, against its rows and `more_rows`.
fn day(more: &[Line], more_rows: Vec<ReconcileRow>) -> Report {
    by_default(&[&BOOKED[..], more].concat(), [rows(), more_rows].concat())
}

#[test]
fn the_day_alone_is_clean() {
    let r = day(&[], vec![]);
    assert_eq!(
        r.counts,
        counts(&[(Class::Matched, 2), (Class::Pending, 1)])
    );
    assert!(r.breaks.is_empty(), "{r:?}");
    assert_eq!(r.totals.journal, total(3, 4300));
    assert_eq!(r.totals.ledger, total(2, 4000));
}

#[test]
fn a_transfer_booked_again_around_the_relay_is_a_double() {
    let r = day(&[("BOOK1", "C4", 1500, LATER)], vec![]);
    assert_eq!(
        r.counts,
        counts(&[(Class::Double, 1), (Class::Matched, 1), (Class::Pending, 1)])
    );
    assert_eq!(breaks(&r), [(Class::Double, "BOOK1")]);
    let b = &r.breaks[0];
    assert_eq!(b.journal.len(), 2);
    assert_eq!(ledger(b).state, "DONE");
    assert_eq!(ledger(b).reply.as_ref().unwrap().amount, 1500);
}

#[test]
fn a_booking_without_a_row_or_on_a_failed_row_is_a_ghost() {
    // A channel that went around the relay, and the FAILED row's transfer booked after all.
    let r = day(
        &[("AROUND", "C5", 700, LATER), ("FAIL", "C6", 400, LATER)],
        vec![],
    );
    assert_eq!(
        r.counts,
        counts(&[(Class::Ghost, 2), (Class::Matched, 2), (Class::Pending, 1)])
    );
    assert_eq!(
        breaks(&r),
        [(Class::Ghost, "AROUND"), (Class::Ghost, "FAIL")]
    );
    assert_eq!(r.breaks[0].ledger, None);
    let failed = ledger(&r.breaks[1]);
    assert_eq!(failed.state, "FAILED");
    assert_eq!(failed.rsp_code.as_deref(), Some("E902"));
}

#[test]
fn a_booking_on_a_sent_or_received_row_is_pending_and_on_a_done_row_without_code_a_ghost() {
    let r = day(
        &[
            ("P-SENT", "C5", 10, LATER),
            ("P-RECV", "C6", 20, LATER),
            ("G-NULL", "C7", 30, LATER),
        ],
        vec![
            row("P-SENT", State::Sent, None),
            row("P-RECV", State::Received, None),
            row("G-NULL", State::Done, None),
        ],
    );
    assert_eq!(
        r.counts,
        counts(&[(Class::Ghost, 1), (Class::Matched, 2), (Class::Pending, 3)])
    );
    assert_eq!(breaks(&r), [(Class::Ghost, "G-NULL")]);
    let b = ledger(&r.breaks[0]);
    assert_eq!((b.state, b.rsp_code.as_deref()), ("DONE", None));
}

#[test]
fn a_rejected_row_the_core_booked_is_a_ghost() {
    let r = day(&[("REJ", "C5", 100, LATER)], vec![]);
    assert_eq!(
        r.counts,
        counts(&[(Class::Ghost, 1), (Class::Matched, 2), (Class::Pending, 1)])
    );
    assert_eq!(breaks(&r), [(Class::Ghost, "REJ")]);
}

#[test]
fn an_amount_or_a_time_the_core_booked_otherwise_is_a_mismatch_and_another_core_ref_a_double() {
    let mut lines = BOOKED.to_vec();
    lines[1].2 = 2501;
    let r = by_default(&lines, rows());
    assert_eq!(
        r.counts,
        counts(&[
            (Class::Matched, 1),
            (Class::Mismatch, 1),
            (Class::Pending, 1)
        ])
    );
    assert_eq!(breaks(&r), [(Class::Mismatch, "BOOK2")]);
    let b = &r.breaks[0];
    assert_eq!(b.journal[0].amount, 2501);
    assert_eq!(ledger(b).reply.as_ref().unwrap().amount, 2500);
    assert_eq!(
        b.why.as_deref(),
        Some("the reply's amount 2500 is not the journal's 2501")
    );
    // booked_at is compared too; another core_ref is the core's word that it booked BOOK2
    // under two core_refs (the one the reply names, the journal's): a double (§10, v1.3).
    for (line, class, named) in [
        (
            ("BOOK2", "C2", 2500, "2030-01-01T00:00:00Z"),
            Class::Mismatch,
            "2030-01-01T00:00:00Z",
        ),
        (("BOOK2", "C99", 2500, T1), Class::Double, "C99"),
    ] {
        lines[1] = line;
        let wide = window("2000-01-01T00:00:00Z", "2040-01-01T00:00:00Z");
        let r = report(journal(&lines), wide, rows());
        assert_eq!(breaks(&r), [(class, "BOOK2")], "{named}");
        let why = r.breaks[0].why.as_deref().unwrap_or_default();
        assert!(why.contains(named), "{named}: {why}");
    }
}

#[test]
fn a_done_row_the_core_has_no_record_of_is_missing() {
    let lines: Vec<Line> = BOOKED.into_iter().filter(|l| l.0 != "BOOK2").collect();
    let wide = window("2000-01-01T00:00:00Z", "2100-01-01T00:00:00+02:00");
    let r = report(journal(&lines), wide, rows());
    assert_eq!(
        r.counts,
        counts(&[
            (Class::Matched, 1),
            (Class::Missing, 1),
            (Class::Pending, 1)
        ])
    );
    assert_eq!(breaks(&r), [(Class::Missing, "BOOK2")]);
    assert_eq!(r.breaks[0].journal, []);
    assert_eq!(
        r.window,
        ShownWindow {
            from: "2000-01-01T00:00:00Z".into(),
            to: "2099-12-31T22:00:00Z".into()
        }
    );
}
