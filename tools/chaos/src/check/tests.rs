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

/// reconcile's `--json` report, as it prints it (one line).
fn reconcile_json(counts: &str, breaks: &str, exit: u64) -> String {
    format!(
        r#"{{"window":{{"from":"2026-12-04T03:00:00Z","to":"2026-12-04T03:10:00Z"}},"counts":{counts},"breaks":[{breaks}],"totals":{{"journal":{{"count":2,"amount":300}},"ledger":{{"count":2,"amount":300}}}},"tool":"reconcile","exit_code":{exit}}}"#
    )
}

const CLEAN: &str = r#"{"double":0,"ghost":0,"pending":0,"matched":2,"mismatch":0,"missing":0}"#;

#[test]
fn a_clean_reconciliation_passes_with_a_case_per_guid() {
    let got = parse_reconcile(&format!("\n{}\n", reconcile_json(CLEAN, "", 0)));
    let r = got.as_ref().unwrap();
    assert_eq!(r.counts.matched, 2);
    assert_eq!(r.window, "[2026-12-04T03:00:00Z, 2026-12-04T03:10:00Z)");
    assert!(r.breaks.is_empty());
    let mut c = Checks::default();
    reconciled(&mut c, &got);
    assert_eq!(c.examined.get(I), Some(&2));
    assert_eq!(c.failed(I), 0);
}

#[test]
fn every_break_is_a_violation_naming_its_guid() {
    let counts = r#"{"double":1,"ghost":0,"pending":0,"matched":1,"mismatch":0,"missing":0}"#;
    let brk = r#"{"class":"double","guid":"c001-000007","journal":[{"core_ref":"R1","amount":100,"booked_at":"2026-12-04T03:01:00Z"},{"core_ref":"R2","amount":100,"booked_at":"2026-12-04T03:01:01Z"}],"ledger":{"state":"DONE","rsp_code":"0000","updated_at":"2026-12-04 03:01:00"}}"#;
    let got = parse_reconcile(&reconcile_json(counts, brk, 1));
    let r = got.as_ref().unwrap();
    assert_eq!(r.breaks.len(), 1);
    assert_eq!(r.breaks[0].class, "double");
    assert_eq!(r.breaks[0].guid, "c001-000007");
    assert!(
        r.breaks[0].sides.contains("\"R2\""),
        "{}",
        r.breaks[0].sides
    );
    let mut c = Checks::default();
    reconciled(&mut c, &got);
    assert_eq!(c.examined.get(I), Some(&2));
    assert_eq!(c.failed(I), 1);
    assert_eq!(c.violations[0].guid, "c001-000007");
    assert!(
        c.violations[0]
            .what
            .starts_with("reconcile double: journal [")
    );
}

#[test]
fn pending_guids_and_a_report_at_odds_with_itself_fail() {
    let counts = r#"{"double":0,"ghost":0,"pending":1,"matched":1,"mismatch":0,"missing":0}"#;
    let mut c = Checks::default();
    reconciled(&mut c, &parse_reconcile(&reconcile_json(counts, "", 0)));
    assert_eq!(c.failed(I), 1, "{:?}", c.violations);
    // A missing GUID counted but not listed, and exit 0 with a break.
    let counts = r#"{"double":0,"ghost":0,"pending":0,"matched":1,"mismatch":0,"missing":1}"#;
    let mut c = Checks::default();
    reconciled(&mut c, &parse_reconcile(&reconcile_json(counts, "", 0)));
    assert_eq!(c.failed(I), 2, "{:?}", c.violations);
}

#[test]
fn unreadable_or_failed_reconciliations_fail() {
    for out in [
        "",
        "not json",
        r#"{"tool":"resolve","counts":{}}"#,
        r#"{"tool":"reconcile","error":"journal j: no such file","exit":3,"exit_code":3}"#,
        &reconcile_json(r#"{"double":0}"#, "", 0),
        &reconcile_json(CLEAN, r#"{"guid":"g"}"#, 1),
    ] {
        let got = parse_reconcile(out);
        assert!(got.is_err(), "{out}: {got:?}");
        let mut c = Checks::default();
        reconciled(&mut c, &got);
        assert_eq!(c.failed(I), 1, "{out}");
    }
}

/// An HTTP answer stands for the frame the TCP door would have sent.
#[test]
fn http_answers_map_to_reply_frames() {
    use crate::channel::Answer;
    use crate::http::to_frame;
    let t = wire::Transfer {
        guid: "c001-000012".into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount: 1500,
        memo: "rent".into(),
    };
    let req = wire::encode_request(&t).unwrap();
    let frame = |a: Answer| match a {
        Answer::Reply(r) => r,
        other => panic!("{other:?}"),
    };
    let ok = br#"{"guid":"c001-000012","rsp_code":"0000","core_ref":"C1","amount":1500,"booked_at":"2026-12-04T03:01:00Z"}"#;
    let body = wire::booking_body("C1", 1500, "2026-12-04T03:01:00Z").unwrap();
    assert_eq!(
        frame(to_frame(&req, "c001-000012", 200, ok)),
        wire::reply_to(&req, &wire::OK, Some(&body))
    );
    let b001 = br#"{"guid":"c001-000012","rsp_code":"B001"}"#;
    assert_eq!(
        frame(to_frame(&req, "c001-000012", 200, b001)),
        wire::reply_to(&req, b"B001", None)
    );
    let unk = br#"{"guid":"c001-000012","state":"UNKNOWN","rsp_code":"E901"}"#;
    assert_eq!(
        frame(to_frame(&req, "c001-000012", 202, unk)),
        wire::reply_to(&req, &wire::E_UNKNOWN, None)
    );
    let reused = br#"{"type":"urn:txrelay:problem:E904","title":"t","status":422,"detail":"d","code":"E904"}"#;
    assert_eq!(
        frame(to_frame(&req, "c001-000012", 422, reused)),
        wire::reply_to(&req, &wire::E_GUID_REUSED, None)
    );
    // What cannot stand for a frame is garbage, a finding of (e).
    for (status, body) in [
        (200, &ok[..]),
        (200, br#"{"guid":"c001-000012","rsp_code":"0000"}"#),
        (200, unk),
        (503, reused),
        (404, br#"{"status":404}"#),
        (200, b"<html>"),
    ] {
        let guid = if status == 200 && body == ok {
            "other"
        } else {
            "c001-000012"
        };
        assert!(
            matches!(to_frame(&req, guid, status, body), Answer::Garbage(_)),
            "{status} {}",
            String::from_utf8_lossy(body)
        );
    }
}
