//! HTTP connections (CONTRACT §9): keep-alive, `Connection: close`, a request not complete
//! within the frame timeout, idle connections, a malformed or huge head (400/431 and close),
//! and the connection limits counting TCP and HTTP connections together.

use std::thread;
use std::time::{Duration, Instant};

use super::http::http_scene;
use crate::util::*;

const FRAME_MS: u64 = 500;

#[test]
fn keep_alive_serves_requests_in_turn_and_close_closes() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let mut c = Http::connect(&h);
    assert_eq!(c.post(Some("\"G-K-1\""), &transfer_body(1, "")).status, 200);
    assert_eq!(c.post(Some("\"G-K-2\""), &transfer_body(2, "")).status, 200);
    // Two requests written back to back are answered in order.
    let mut both = post_bytes(Some("\"G-K-3\""), &transfer_body(3, ""));
    both.extend(b"GET /v1/transfers/G-K-3 HTTP/1.1\r\nHost: r\r\nConnection: close\r\n\r\n");
    c.send_raw(&both);
    assert_eq!(c.answer().unwrap().status, 200);
    let g = c.answer().unwrap();
    assert_eq!(g.json()["state"], "DONE");
    assert_eq!(g.header("connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(5)));
    assert_eq!(s.core().total_bookings(), 3);
}

#[test]
fn a_head_request_is_answered_405_without_a_body_and_the_connection_stays_usable() {
    skip_if_unavailable!();
    let (_s, h) = http_scene(&[], &[]);
    let mut c = Http::connect(&h);
    assert_eq!(
        c.post(Some("\"G-K-HEAD\""), &transfer_body(1, "")).status,
        200
    );
    c.send_raw(b"HEAD /v1/transfers/G-K-HEAD HTTP/1.1\r\nHost: r\r\n\r\n");
    c.send_raw(b"GET /v1/transfers/G-K-HEAD HTTP/1.1\r\nHost: r\r\n\r\n");
    let head = c.head_answer().unwrap();
    assert_eq!(head.status, 405);
    assert_eq!(head.header("allow"), Some("GET"));
    // Had the HEAD's answer carried its body, these would be its bytes, not a status line.
    let g = c.answer().unwrap();
    assert_eq!(g.status, 200, "{g:?}");
    assert_eq!(g.json()["state"], "DONE");
}

#[test]
fn half_a_head_or_a_short_body_is_closed_at_the_frame_timeout() {
    skip_if_unavailable!();
    let ms = FRAME_MS.to_string();
    let (s, h) = http_scene(&[], &["--frame-timeout-ms", &ms]);
    let mut half = Http::connect(&h);
    let t = Instant::now();
    half.send_raw(b"POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Ty");
    assert!(half.closed_within(Duration::from_secs(10)));
    assert!(
        t.elapsed() >= Duration::from_millis(FRAME_MS - 50),
        "{:?}",
        t.elapsed()
    );

    let mut short = Http::connect(&h);
    let body = transfer_body(1, "");
    let mut bytes = post_bytes(Some("\"G-K-SHORT\""), &body);
    bytes.truncate(bytes.len() - 5);
    let t = Instant::now();
    short.send_raw(&bytes);
    assert!(short.answer().is_none(), "closed without an answer");
    assert!(t.elapsed() >= Duration::from_millis(FRAME_MS - 50));
    assert!(rows_by_guid(&s.db).is_empty());
}

#[test]
fn an_idle_connection_is_closed_after_the_idle_timeout() {
    skip_if_unavailable!();
    let (_s, h) = http_scene(&[], &["--idle-timeout-secs", "1"]);
    let mut c = Http::connect(&h);
    assert_eq!(c.get("/v1/transfers/G-K-IDLE").status, 404);
    let t = Instant::now();
    assert!(c.closed_within(Duration::from_secs(10)));
    assert!(t.elapsed() >= Duration::from_millis(900));
}

#[test]
fn a_malformed_or_huge_head_is_refused_and_closed() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let mut bad = Http::connect(&h);
    bad.send_raw(b"GARBAGE\r\n\r\n");
    let a = bad.answer().unwrap();
    assert_eq!(a.status, 400);
    assert_eq!(a.header("content-type"), Some("application/problem+json"));
    assert!(bad.closed_within(Duration::from_secs(5)));

    let mut bad_header = Http::connect(&h);
    bad_header.send_raw(b"GET /v1/transfers/G HTTP/1.1\r\nno colon here\r\n\r\n");
    assert_eq!(bad_header.answer().unwrap().status, 400);
    assert!(bad_header.closed_within(Duration::from_secs(5)));

    // A 1 MiB header: the relay stops reading at 16 KiB, answers 431 and closes; the rest of
    // the write may then be refused by a reset, so it runs in the background.
    let mut bytes = b"GET /v1/transfers/G HTTP/1.1\r\nX-Big: ".to_vec();
    bytes.extend(std::iter::repeat_n(b'a', 1 << 20));
    bytes.extend(b"\r\n\r\n");
    let mut writer = std::net::TcpStream::connect(&h).unwrap();
    let t = thread::spawn(move || {
        use std::io::Write;
        let _ = writer.write_all(&bytes);
        writer
    });
    let writer = t.join().unwrap();
    let mut reader = Http::over(writer.try_clone().unwrap(), Box::new(writer));
    if let Some(a) = reader.answer() {
        assert_eq!(a.status, 431, "{a:?}");
    }
    assert!(reader.closed_within(Duration::from_secs(5)));
    assert_eq!(s.core().total_bookings(), 0);
}

/// With `limit` at 2, one TCP and one HTTP connection fill it: a third (HTTP) is closed,
/// and once the TCP one goes, HTTP connections are served again.
fn two_doors_share(limit: &str) {
    let (s, h) = http_scene(&[], &[limit, "2"]);
    let mut tcp = Channel::connect(s.addr());
    assert_code(&tcp.call(&msg("G-K-LIM1", 1, "")), "0000");
    let mut http = Http::connect(&h);
    assert_eq!(http.get("/v1/transfers/G-K-LIM1").status, 200);
    let mut third = Http::connect(&h);
    assert!(
        third.closed_within(Duration::from_secs(5)),
        "{limit}: over the limit"
    );
    drop(tcp);
    assert!(eventually(Duration::from_secs(10), || {
        let mut c = Http::connect(&h);
        c.send_raw(b"GET /v1/transfers/G-K-LIM1 HTTP/1.1\r\nHost: r\r\n\r\n");
        c.answer().is_some_and(|a| a.status == 200)
    }));
}

#[test]
fn the_peer_limit_counts_tcp_and_http_connections_together() {
    skip_if_unavailable!();
    two_doors_share("--max-connections-per-peer");
}

#[test]
fn the_total_limit_counts_tcp_and_http_connections_together() {
    skip_if_unavailable!();
    two_doors_share("--max-connections");
}

#[test]
fn a_shutdown_closes_idle_http_connections_and_stops_both_listeners() {
    skip_if_unavailable!();
    let (mut s, h) = http_scene(&[], &[]);
    let mut c = Http::connect(&h);
    assert_eq!(c.get("/v1/transfers/G-K-STOP").status, 404);
    s.relay().signal("-TERM");
    assert!(c.closed_within(Duration::from_secs(10)));
    let exit = s.relay_mut().wait_exit(Duration::from_secs(10));
    assert!(exit.is_some_and(|e| e.success()), "{exit:?}");
}

#[test]
fn expect_100_continue_gets_the_interim_answer_before_the_body() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let body = transfer_body(44, "continue");
    let mut c = Http::connect(&h);
    c.send_raw(
        format!(
            "POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n\
             Idempotency-Key: \"G-K-CONT\"\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    assert_eq!(c.answer().unwrap().status, 100);
    c.send_raw(body.as_bytes());
    assert_eq!(c.answer().unwrap().status, 200);
    assert_eq!(s.core().bookings("G-K-CONT"), 1);
}
