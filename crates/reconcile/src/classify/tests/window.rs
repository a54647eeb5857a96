//! Which GUIDs a window reports, and from which bookings (CONTRACT §10): the window is
//! `[from, to)` and a bound given alone replaces only its own default; a DONE/`0000` row is
//! placed in time by its stored reply's `booked_at`, by `updated_at` when the reply cannot
//! be read; a reported GUID is classified from all its lines wherever they fall; identical
//! lines (the same instant in another offset too) are one booking.

use super::*;

const T0: &str = "2026-12-02T09:00:00Z";
const T1: &str = "2026-12-02T09:00:10Z";
const T2: &str = "2026-12-02T09:00:20Z";

/// The report of `j` with no row, over the window of `--from`/`--to` (`None`: the default).
fn bounded(j: Journal, from: Option<&str>, to: Option<&str>) -> Report {
    let w = Window::decide(from.map(at), to.map(at), j.span).unwrap();
    report(j, w, vec![])
}

/// A, B and C booked at T0, T1 and T2, with no row: ghosts when in the window.
fn abc() -> Journal {
    journal(&[("A", "C1", 1, T0), ("B", "C2", 2, T1), ("C", "C3", 3, T2)])
}

fn guids(r: &Report) -> Vec<&str> {
    r.breaks.iter().map(|b| b.guid.as_str()).collect()
}

fn shown(from: &str, to: &str) -> ShownWindow {
    ShownWindow {
        from: from.into(),
        to: to.into(),
    }
}

#[test]
fn the_window_is_from_included_to_excluded_and_a_bound_alone_replaces_its_default() {
    let r = bounded(abc(), None, None);
    assert_eq!(guids(&r), ["A", "B", "C"]);
    assert_eq!(r.counts, counts(&[(Class::Ghost, 3)]));
    assert_eq!(r.window, shown(T0, "2026-12-02T09:00:21Z"));
    assert_eq!(r.totals.journal, total(3, 6));
    let r = bounded(abc(), Some(T1), None);
    assert_eq!(guids(&r), ["B", "C"]);
    assert_eq!(r.window, shown(T1, "2026-12-02T09:00:21Z"));
    let r = bounded(abc(), None, Some(T1));
    assert_eq!(guids(&r), ["A"]);
    assert_eq!(r.window, shown(T0, T1));
    assert_eq!(guids(&bounded(abc(), Some(T1), Some(T2))), ["B"]);
    // The same instant in another offset.
    let from = Some("2026-12-02T10:00:10+01:00");
    assert_eq!(guids(&bounded(abc(), from, Some(T2))), ["B"]);
    let r = bounded(
        abc(),
        Some("2026-12-02T09:00:21Z"),
        Some("2026-12-02T09:00:30Z"),
    );
    assert_eq!(r.counts, Counts::default());
}

#[test]
fn a_reported_guid_is_classified_from_all_its_lines_wherever_they_fall() {
    // A: booked at T0 and T2; only T2 is in the window, and A is a double.
    // B: booked at T0 only: outside the window, not reported.
    let j = journal(&[("A", "C1", 1, T0), ("B", "C2", 2, T0), ("A", "C9", 1, T2)]);
    let r = bounded(j, Some(T1), None);
    assert_eq!(breaks(&r), [(Class::Double, "A")]);
    assert_eq!(r.breaks[0].journal.len(), 2);
    assert_eq!(r.totals.journal, total(1, 1));
}

#[test]
fn a_done_row_without_a_readable_reply_is_placed_by_updated_at() {
    // Every row updated at T1 (`row`); TORN's reply, whole, would say booked in 2030.
    let rows = || {
        let whole = done("TORN", "C1", 5, "2030-01-01T00:00:00Z")
            .response
            .unwrap();
        vec![
            row("HAND", State::Done, Some("0000")),
            ReconcileRow {
                response: Some(whole[..60].to_vec()),
                ..row("TORN", State::Done, Some("0000"))
            },
            row("REJ", State::Done, Some("B001")),
            row("UNK", State::Unknown, Some("E901")),
        ]
    };
    let placed = |from, to| report(journal(&[]), window(from, to), rows());
    let r = placed("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z");
    assert_eq!(r.counts, counts(&[(Class::Missing, 2)]));
    assert_eq!(
        breaks(&r),
        [(Class::Missing, "HAND"), (Class::Missing, "TORN")]
    );
    assert_eq!(
        ledger(&r.breaks[0]).reply_error.as_deref(),
        Some("no stored reply")
    );
    assert_eq!(
        ledger(&r.breaks[1]).reply_error.as_deref(),
        Some("the stored reply is 60 bytes, not 90")
    );
    // A window that ends before the rows' updated_at does not report them, nor one that ends
    // at it; one that starts at it does.
    let r = placed("2000-01-01T00:00:00Z", "2001-01-01T00:00:00Z");
    assert_eq!(r.counts, Counts::default());
    assert_eq!(placed(T0, T1).counts, Counts::default());
    assert_eq!(placed(T1, T2).counts, counts(&[(Class::Missing, 2)]));
}

#[test]
fn a_done_row_is_placed_by_its_replys_booked_at_at_the_windows_edges() {
    // Its stored reply says booked at T1; its updated_at is days later.
    let reported = |from, to| {
        let row = ReconcileRow {
            updated_at: "2026-12-05 12:00:00".into(),
            ..done("PLACED", "C1", 5, T1)
        };
        let r = report(journal(&[]), window(from, to), vec![row]);
        let each = r
            .breaks
            .iter()
            .map(|b| format!("{} {}", b.class.as_str(), b.guid));
        each.collect::<Vec<_>>()
    };
    assert_eq!(reported(T1, T2), ["missing PLACED"], "from is included");
    assert!(reported(T0, T1).is_empty(), "to is excluded");
    // Not by updated_at: a window around it, far from T1, does not report it.
    assert!(reported("2026-12-03T00:00:00Z", "2100-01-01T00:00:00Z").is_empty());
}

#[test]
fn identical_lines_are_one_booking() {
    let l = ("A", "C1", 5, T0);
    let same_instant = ("A", "C1", 5, "2026-12-02T10:00:00+01:00");
    let r = bounded(journal(&[l, l, same_instant]), None, None);
    assert_eq!(r.counts, counts(&[(Class::Ghost, 1)]));
    assert_eq!(r.totals.journal, total(1, 5));
}
