//! The checks' tests.

use super::evidence::mentions;
use super::*;
use crate::late::Settled;

#[test]
fn mentions_whole_guids_only() {
    assert!(mentions("guid=c001-000012 code=0000", "c001-000012"));
    assert!(mentions("{\"guid\":\"c001-000012\"}", "c001-000012"));
    assert!(!mentions("guid=c001-000012ab code", "c001-000012"));
    assert!(!mentions("guid=xc001-000012", "c001-000012"));
}

fn row(guid: &str, state: State, code: &str, attempts: i64) -> Row {
    Row {
        guid: guid.into(),
        tx_code: Some("TRNF".into()),
        state,
        rsp_code: Some(code.into()),
        request: None,
        response: None,
        attempts: Some(attempts),
        updated_at: String::new(),
        channel: None,
    }
}

fn settled(guid: &str, code: &str, attempt: i64) -> Settled {
    Settled {
        guid: guid.into(),
        code: code.into(),
        attempt,
    }
}

#[test]
fn late_settled_rows_are_done_as_logged_and_booked_once() {
    let rows = [
        row("g1", State::Done, "0000", 1),
        row("g2", State::Done, "B001", 2),
        row("g3", State::Unknown, "E901", 1),
        row("g4", State::Done, "0000", 2),
        row("g5", State::Done, "0000", 1),
    ];
    let by_guid: BTreeMap<String, u64> = [("g1", 1), ("g4", 1), ("g5", 2)]
        .into_iter()
        .map(|(g, n)| (g.to_string(), n))
        .collect();
    let mut c = Checks::default();
    late(
        &mut c,
        &[settled("g1", "0000", 1), settled("g2", "B001", 2)],
        &rows,
        &by_guid,
    );
    assert_eq!((c.examined[H], c.failed(H)), (2, 0));

    let mut c = Checks::default();
    late(
        &mut c,
        &[
            settled("g3", "0000", 1), // the row is not DONE
            settled("g4", "0000", 1), // another attempt
            settled("g5", "0000", 1), // booked twice
            settled("g6", "0000", 1), // no row
            settled("g1", "0000", 1),
            settled("g1", "0000", 1), // settled twice
        ],
        &rows,
        &by_guid,
    );
    let bad: Vec<&str> = c.violations.iter().map(|v| v.guid.as_str()).collect();
    assert_eq!(bad, ["g3", "g4", "g5", "g6", "g1"]);
    assert_eq!(c.examined[H], 6);
}

#[test]
fn compacts_rfc3339() {
    assert_eq!(compact("2026-12-02T09:30:12Z"), "20261202093012");
}
