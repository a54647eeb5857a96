//! The HTTP channel API (CONTRACT §9), its answer table: every row's status, headers and
//! exact JSON body, the malformed requests (`E900`, 400, `detail` naming the field) and the
//! problems without a code (404, 405, 411, 413, 415), and GET from the ledger alone.

use serde_json::{Value, json};

use crate::util::*;

/// A scene with a core and a relay serving HTTP too; the HTTP address.
pub(super) fn http_scene(core: &[&str], relay: &[&str]) -> (Scene, String) {
    let (flag, addr) = http_listen();
    let mut args = vec![flag.as_str(), addr.as_str()];
    args.extend(relay);
    (Scene::new().core(core).relay(&args).build(), addr)
}

/// The §9 body of a stored `0000` reply, byte for byte: the contract's members in its order.
fn booked_body(reply: &[u8]) -> String {
    let r = wire::parse_reply(reply).unwrap();
    let b = r.booking.unwrap();
    format!(
        r#"{{"guid":"{}","rsp_code":"0000","core_ref":"{}","amount":{},"booked_at":"{}"}}"#,
        r.guid,
        b.core_ref,
        b.amount,
        wire::booked_at_rfc3339(&b.booked_at).unwrap()
    )
}

/// The body as text, for the assertions that compare bytes.
fn text(a: &Answer) -> &str {
    std::str::from_utf8(&a.body).expect("a UTF-8 body")
}

fn assert_problem(a: &Answer, status: u16, code: Option<&str>) -> Value {
    assert_eq!(a.status, status, "{a:?}");
    assert_eq!(a.header("content-type"), Some("application/problem+json"));
    let p = a.json();
    assert_eq!(p["status"], json!(status));
    // RFC 9457's members in the contract's order, `code` last.
    let keys: Vec<&str> = [
        "\"type\":",
        "\"title\":",
        "\"status\":",
        "\"detail\":",
        "\"code\":",
    ]
    .into_iter()
    .filter(|k| text(a).contains(k))
    .collect();
    let at: Vec<usize> = keys.iter().map(|k| text(a).find(k).unwrap()).collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]) && at.first() == Some(&1),
        "{}",
        text(a)
    );
    assert!(
        p["type"].is_string() && p["title"].is_string() && p["detail"].is_string(),
        "{p}"
    );
    match code {
        Some(c) => assert_eq!(p["code"], json!(c), "{p}"),
        None => assert!(p.get("code").is_none(), "{p}"),
    }
    p
}

#[test]
fn booked_then_replayed_with_the_header_and_the_same_body() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let body = transfer_body(1500, "rent");
    let first = http_post(&h, Some("\"G-H-OK\""), &body);
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(first.header("idempotent-replayed"), None);
    let row = s.db.row("G-H-OK").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(text(&first), booked_body(row.response.as_deref().unwrap()));
    // The row holds exactly the frame a TCP channel would have sent.
    assert_eq!(
        row.request.as_deref(),
        Some(&msg("G-H-OK", 1500, "rent")[..])
    );

    let again = http_post(&h, Some("\"G-H-OK\""), &body);
    assert_eq!(again.status, 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, first.body);
    assert_eq!(s.core().bookings("G-H-OK"), 1);
}

#[test]
fn a_business_rejection_is_200_with_its_code_only() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let a = http_post(&h, Some("\"G-H-REJ\""), &transfer_body(5, "REJECT"));
    assert_eq!(a.status, 200);
    assert_eq!(text(&a), r#"{"guid":"G-H-REJ","rsp_code":"B001"}"#);
    let again = http_post(&h, Some("\"G-H-REJ\""), &transfer_body(5, "REJECT"));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, a.body);
    assert_eq!(s.core().bookings("G-H-REJ"), 0);
}

#[test]
fn an_unknown_outcome_is_202_with_a_location_until_settled() {
    skip_if_unavailable!();
    let (s, h) = http_scene(
        &["--slow-ms", "1500"],
        &["--read-timeout-ms", "300", "--late-reply-ms", "0"],
    );
    let body = transfer_body(9, "SLOW");
    for _ in 0..2 {
        let a = http_post(&h, Some("\"G-H-UNK\""), &body);
        assert_eq!(a.status, 202, "{a:?}");
        assert_eq!(a.header("location"), Some("/v1/transfers/G-H-UNK"));
        assert_eq!(
            text(&a),
            r#"{"guid":"G-H-UNK","state":"UNKNOWN","rsp_code":"E901"}"#
        );
    }
    assert_eq!(s.db.state("G-H-UNK"), Some(State::Unknown));
    let g = http_get_answer(&h, "/v1/transfers/G-H-UNK");
    assert_eq!(
        text(&g),
        r#"{"guid":"G-H-UNK","state":"UNKNOWN","rsp_code":"E901"}"#
    );
    // Once settled (the core has booked it; resolve asks), the same key gets the final answer.
    assert!(eventually(std::time::Duration::from_secs(10), || {
        s.core().bookings("G-H-UNK") == 1
    }));
    s.resolve(&["--min-age", "0"]).expect_code(0);
    let settled = http_post(&h, Some("\"G-H-UNK\""), &body);
    assert_eq!(settled.status, 200, "{settled:?}");
    assert_eq!(settled.header("idempotent-replayed"), Some("true"));
    let row = s.db.row("G-H-UNK").unwrap();
    assert_eq!(row.state, State::Done);
    assert_eq!(
        text(&settled),
        booked_body(row.response.as_deref().unwrap())
    );
    assert_eq!(s.core().bookings("G-H-UNK"), 1);
}

#[test]
fn not_sent_is_503_with_retry_after() {
    skip_if_unavailable!();
    let (flag, h) = http_listen();
    let s = Scene::new().relay_to(&dead_url(), &[&flag, &h]).build();
    let a = http_post(&h, Some("\"G-H-DOWN\""), &transfer_body(3, ""));
    assert_problem(&a, 503, Some("E902"));
    assert!(a.header("retry-after").is_some(), "{a:?}");
    assert_eq!(s.db.state("G-H-DOWN"), Some(State::Failed));
}

#[test]
fn in_flight_is_409_with_retry_after_and_reuse_is_422() {
    skip_if_unavailable!();
    let m = msg("G-H-SENT", 4, "x");
    let (flag, h) = http_listen();
    let s = Scene::new()
        .core(&[])
        .relay(&[&flag, &h])
        .row(RowSpec::sent(&m))
        .build();
    let a = http_post(&h, Some("\"G-H-SENT\""), &transfer_body(4, "x"));
    assert_problem(&a, 409, Some("E903"));
    assert!(a.header("retry-after").is_some());
    let other = http_post(&h, Some("\"G-H-SENT\""), &transfer_body(5, "x"));
    assert_problem(&other, 422, Some("E904"));
    assert_eq!(other.header("retry-after"), None);
    assert_eq!(s.core().total_bookings(), 0);
}

#[test]
fn malformed_keys_and_bodies_are_e900_naming_the_field_and_record_nothing() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let good = transfer_body(1, "");
    let acct = r#""from_account":"00000000000001","to_account":"00000000000002""#;
    let cases: Vec<(Option<&str>, String, &str)> = vec![
        (None, good.clone(), "Idempotency-Key"),
        (Some("G-H-BAD"), good.clone(), "Idempotency-Key"),
        (Some("\"G-H-BAD\";p=1"), good.clone(), "Idempotency-Key"),
        (Some("\"..\""), good.clone(), "Idempotency-Key"),
        (Some("\"G H\""), good.clone(), "Idempotency-Key"),
        (
            Some("\"0123456789012345678901234567890123456\""),
            good.clone(),
            "Idempotency-Key",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":null}}"#),
            "amount",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":0}}"#),
            "amount",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":1.0}}"#),
            "amount",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":"1"}}"#),
            "amount",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":10000000000000}}"#),
            "amount",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":1,"amount":1}}"#),
            "amount",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":1,"fee":1}}"#),
            "fee",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":1,"memo":7}}"#),
            "memo",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":1,"memo":"{}"}}"#, "x".repeat(41)),
            "memo",
        ),
        (
            Some("\"G-H-BAD\""),
            format!(r#"{{{acct},"amount":1,"tx_code":"TRNX"}}"#),
            "tx_code",
        ),
        (
            Some("\"G-H-BAD\""),
            r#"{"from_account":"1","to_account":"00000000000002","amount":1}"#.into(),
            "from_account",
        ),
        (
            Some("\"G-H-BAD\""),
            r#"{"from_account":"00000000000001","amount":1}"#.into(),
            "to_account",
        ),
        (Some("\"G-H-BAD\""), "not json".into(), "body"),
        (Some("\"G-H-BAD\""), "[]".into(), "body"),
    ];
    let mut c = Http::connect(&h);
    for (key, body, field) in &cases {
        let a = c.post(*key, body);
        let p = assert_problem(&a, 400, Some("E900"));
        let detail = p["detail"].as_str().unwrap();
        assert!(detail.contains(field), "{key:?} {body}: {detail}");
    }
    // Two key lines.
    let mut two = post_bytes(Some("\"G-H-BAD\""), &good);
    let at = two.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    two.splice(at..at, b"Idempotency-Key: \"G-H-BAD\"\r\n".iter().copied());
    c.send_raw(&two);
    assert_problem(&c.answer().unwrap(), 400, Some("E900"));
    assert!(rows_by_guid(&s.db).is_empty(), "nothing recorded");
    assert_eq!(s.core().total_bookings(), 0);
}

#[test]
fn problems_without_a_code_for_paths_methods_lengths_and_types() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let mut c = Http::connect(&h);
    let body = transfer_body(1, "");
    assert_problem(&c.get("/v1/other"), 404, None);
    c.send_raw(b"PUT /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\n\r\n");
    let a = c.answer().unwrap();
    assert_problem(&a, 405, None);
    assert_eq!(a.header("allow"), Some("POST"));
    c.send_raw(b"POST /v1/transfers/G1 HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\n\r\n");
    let a = c.answer().unwrap();
    assert_problem(&a, 405, None);
    assert_eq!(a.header("allow"), Some("GET"));
    c.send_raw(b"POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nIdempotency-Key: \"G-H-X\"\r\n\r\n");
    assert_problem(&c.answer().unwrap(), 411, None);
    let typed = format!(
        "POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Type: text/plain\r\n\
         Idempotency-Key: \"G-H-X\"\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.send_raw(typed.as_bytes());
    assert_problem(&c.answer().unwrap(), 415, None);
    // The connection is still in step after each of these: one more request on it.
    assert_problem(&c.get("/v1/transfers/G-H-X"), 404, None);

    let mut big = Http::connect(&h);
    big.send_raw(b"POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nIdempotency-Key: \"G-H-X\"\r\nContent-Length: 16385\r\n\r\n");
    assert_problem(&big.answer().unwrap(), 413, None);
    let mut chunked = Http::connect(&h);
    chunked.send_raw(b"POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nIdempotency-Key: \"G-H-X\"\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}\r\n0\r\n\r\n");
    assert_problem(&chunked.answer().unwrap(), 411, None);
    assert!(rows_by_guid(&s.db).is_empty());
}

#[test]
fn get_answers_from_the_ledger_without_calling_the_core() {
    skip_if_unavailable!();
    let (flag, h) = http_listen();
    let s = Scene::new()
        .core(&[])
        .relay(&[&flag, &h])
        .row(RowSpec::bare("G-H-BARE", State::Failed))
        .build();
    let booked = http_post(&h, Some("\"G-H-GET\""), &transfer_body(77, "m"));
    assert_eq!(booked.status, 200);
    let g = http_get_answer(&h, "/v1/transfers/G-H-GET");
    assert_eq!(g.status, 200);
    assert_eq!(g.header("idempotent-replayed"), None);
    // The POST's members with `state` after `guid`: §9's order.
    let want = text(&booked).replacen(
        r#""guid":"G-H-GET","#,
        r#""guid":"G-H-GET","state":"DONE","#,
        1,
    );
    assert_eq!(text(&g), want);
    let bare = http_get_answer(&h, "/v1/transfers/G-H-BARE");
    assert_eq!(
        text(&bare),
        r#"{"guid":"G-H-BARE","state":"FAILED","rsp_code":null}"#
    );
    assert_problem(&http_get_answer(&h, "/v1/transfers/G-H-NONE"), 404, None);
    // A row a named channel (§8) owns is not shown to an anonymous one.
    by_hand(
        &s.db,
        "UPDATE tx SET channel = 'channel-a' WHERE guid = 'G-H-BARE'",
        "UPDATE tx SET channel = 'channel-a' WHERE guid = 'G-H-BARE'",
    );
    assert_problem(&http_get_answer(&h, "/v1/transfers/G-H-BARE"), 404, None);
    assert_problem(&http_get_answer(&h, "/v1/transfers/.."), 404, None);
    assert_problem(&http_get_answer(&h, "/v1/transfers/a%20b"), 404, None);
    assert_eq!(s.core().inquiries(), 0);
    assert_eq!(s.core().bookings("G-H-GET"), 1);
}

#[test]
fn a_ledger_that_cannot_be_written_is_503_e905_with_retry_after() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let lock = WriteLock::take(&s.db, "G-H-LOCKED");
    let a = http_post(&h, Some("\"G-H-LOCKED\""), &transfer_body(5, ""));
    lock.release_after_waiters_gave_up();
    assert_problem(&a, 503, Some("E905"));
    assert!(a.header("retry-after").is_some());
    assert_eq!(s.db.state("G-H-LOCKED"), None);
    assert_eq!(s.core().total_bookings(), 0);
    // The same key afterwards goes through.
    assert_eq!(
        http_post(&h, Some("\"G-H-LOCKED\""), &transfer_body(5, "")).status,
        200
    );
}
