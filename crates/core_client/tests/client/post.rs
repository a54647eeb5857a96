//! Each shape of a POST's answer, or of its failure.

use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use core_client::{CoreClient, Outcome};

use crate::util::*;

#[test]
fn booked_and_the_request_is_the_contract_json() {
    let (tx, rx) = std::sync::mpsc::channel();
    let url = serve(move |mut s| {
        tx.send(read_request(&mut s)).unwrap();
        s.write_all(json_response("200 OK", BOOKING).as_bytes())
            .unwrap();
    });
    let o = client(&url).post_transfer(&transfer());
    assert_eq!(
        o,
        Outcome::Booked(*b"C00000000000000001000000000150020261202093012")
    );
    let req = rx.recv().unwrap();
    assert!(req.starts_with("POST /v1/transfers HTTP/1.1\r\n"), "{req}");
    assert!(req.ends_with(
        r#"{"guid":"G1","tx_code":"TRNF","from_account":"00000000000001","to_account":"00000000000002","amount":1500,"memo":"rent"}"#
    ));
}

#[test]
fn refused_is_not_sent() {
    let url = refusing();
    assert!(matches!(
        client(&url).post_transfer(&transfer()),
        Outcome::NotSent(_)
    ));
}

#[test]
fn unresolvable_host_is_not_sent() {
    let o = client("http://no-such-host.invalid:9201").post_transfer(&transfer());
    assert!(matches!(o, Outcome::NotSent(_)), "{o:?}");
}

#[test]
fn accept_and_close_is_unknown() {
    let url = serve(drop);
    assert!(is_unknown(&client(&url).post_transfer(&transfer())));
}

#[test]
fn read_then_close_is_unknown() {
    let url = serve(|mut s| {
        read_request(&mut s);
    });
    assert!(is_unknown(&client(&url).post_transfer(&transfer())));
}

#[test]
fn never_answering_is_unknown() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let url = serve(move |mut s| {
        read_request(&mut s);
        let _ = rx.recv(); // hold the connection open until the test ends
    });
    let o = client(&url).post_transfer(&transfer());
    drop(tx);
    assert!(is_unknown(&o), "{o:?}");
}

#[test]
fn server_errors_and_odd_statuses_are_unknown() {
    for raw in [
        json_response("500 Internal Server Error", "{}"),
        json_response("503 Service Unavailable", ""),
        json_response("201 Created", BOOKING),
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
    ] {
        let o = client(&answer(raw)).post_transfer(&transfer());
        assert!(is_unknown(&o), "{raw}: {o:?}");
    }
}

#[test]
fn half_a_response_is_unknown() {
    let raw = "HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n{\"guid\":\"G1\",";
    assert!(is_unknown(&client(&answer(raw)).post_transfer(&transfer())));
    let raw = "HTTP/1.1 200 O";
    assert!(is_unknown(&client(&answer(raw)).post_transfer(&transfer())));
}

#[test]
fn unusable_200_bodies_are_unknown() {
    for body in [
        "not json",
        r#"{"guid":"G1"}"#,
        r#"{"guid":"G2","core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#,
        r#"{"core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#,
        r#"{"guid":"G1","core_ref":"C1","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#,
        r#"{"guid":"G1","core_ref":"C1","amount":1500,"booked_at":"yesterday"}"#,
        r#"{"guid":"G1","core_ref":"C1234567890123456789","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#,
    ] {
        let o = client(&answer(json_response("200 OK", body))).post_transfer(&transfer());
        assert!(is_unknown(&o), "{body}: {o:?}");
    }
}

#[test]
fn business_rejections_and_their_limits() {
    let r = |body: &str| {
        client(&answer(json_response("422 Unprocessable Entity", body))).post_transfer(&transfer())
    };
    assert_eq!(
        r(r#"{"code":"B001","message":"no funds"}"#),
        Outcome::Rejected(*b"B001")
    );
    for body in [
        r#"{"code":"0000"}"#,
        r#"{"code":"E901"}"#,
        r#"{"code":"b001"}"#,
        r#"{"code":"B01"}"#,
        "oops",
    ] {
        assert!(is_unknown(&r(body)), "{body}");
    }
}

#[test]
fn the_whole_call_is_bounded_by_connect_plus_read() {
    // Each phase finishes within the read timeout (headers in 0.9 s, then the body in
    // 0.9 s, a booking in the end), but the call as a whole takes longer than
    // connect + read (1.1 s): it must end there, as UNKNOWN, not as a late booking.
    let url = serve(move |mut s| {
        read_request(&mut s);
        let drip = |s: &mut TcpStream, parts: &[&[u8]]| {
            for p in parts {
                if s.write_all(p).is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(900 / parts.len() as u64));
            }
        };
        drip(
            &mut s,
            &[b"HTTP/1.1 200 OK\r\n", b"X-A: 1\r\n", b"X-B: 1\r\n"],
        );
        let head = format!("Content-Length: {}\r\n\r\n", BOOKING.len());
        let (a, b) = BOOKING.as_bytes().split_at(BOOKING.len() / 2);
        drip(&mut s, &[head.as_bytes(), a, b]);
    });
    let c = CoreClient::new(
        &url,
        Duration::from_millis(100),
        Duration::from_millis(1000),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let o = c.post_transfer(&transfer());
    let took = started.elapsed();
    assert!(is_unknown(&o), "{o:?} after {took:?}");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
}

#[test]
fn bad_urls_are_refused() {
    for u in ["ftp://x:1", "x:1", "http://", "http://h:1/?q=1", "https://"] {
        assert!(
            CoreClient::new(u, Duration::from_secs(1), Duration::from_secs(1)).is_err(),
            "{u}"
        );
    }
}
