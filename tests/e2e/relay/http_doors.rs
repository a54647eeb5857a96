//! One GUID, two doors (CONTRACT §9): a request over HTTP is the frame a TCP channel would
//! send, so a GUID crossing doors is a replay (or `E904`) and books once; many POSTs of one
//! key at once book once; the relay announces the HTTP port on its second stdout line.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Barrier};
use std::thread;

use serde_json::json;

use super::http::http_scene;
use crate::util::*;

#[test]
fn a_guid_booked_over_tcp_is_replayed_over_http() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let m = msg("G-X-TCP", 250, "cross");
    let first = s.call(&m);
    assert_code(&first, "0000");
    let a = http_post(&h, Some("\"G-X-TCP\""), &transfer_body(250, "cross"));
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.header("idempotent-replayed"), Some("true"));
    let b = wire::parse_reply(&first).unwrap().booking.unwrap();
    assert_eq!(a.json()["core_ref"], json!(b.core_ref));
    let other = http_post(&h, Some("\"G-X-TCP\""), &transfer_body(251, "cross"));
    assert_eq!(other.status, 422);
    assert_eq!(other.json()["code"], json!("E904"));
    assert_eq!(s.core().bookings("G-X-TCP"), 1);
}

#[test]
fn a_guid_booked_over_http_is_replayed_over_tcp() {
    skip_if_unavailable!();
    let (s, h) = http_scene(&[], &[]);
    let a = http_post(&h, Some("\"G-X-HTTP\""), &transfer_body(80, "back"));
    assert_eq!(a.status, 200);
    assert_eq!(a.header("idempotent-replayed"), None);
    let m = msg("G-X-HTTP", 80, "back");
    let stored = s.db.row("G-X-HTTP").unwrap();
    assert_eq!(
        stored.request.as_deref(),
        Some(&m[..]),
        "the frame's exact bytes"
    );
    let reply = s.call(&m);
    assert_eq!(
        Some(reply),
        stored.response,
        "the stored reply, byte for byte"
    );
    assert_code(&s.call(&msg("G-X-HTTP", 81, "back")), "E904");
    assert_eq!(s.core().bookings("G-X-HTTP"), 1);
}

#[test]
fn simultaneous_posts_of_one_key_book_once() {
    skip_if_unavailable!();
    const N: usize = 20;
    let (s, h) = http_scene(&["--slow-ms", "1500"], &["--read-timeout-ms", "10000"]);
    let barrier = Arc::new(Barrier::new(N));
    let body = transfer_body(600, "SLOW race");
    let handles: Vec<_> = (0..N)
        .map(|_| {
            let (barrier, h, body) = (barrier.clone(), h.clone(), body.clone());
            thread::spawn(move || {
                let mut c = Http::connect(&h);
                barrier.wait();
                c.post(Some("\"G-X-RACE\""), &body)
            })
        })
        .collect();
    let answers: Vec<Answer> = handles.into_iter().map(|t| t.join().unwrap()).collect();
    let first: Vec<_> = answers
        .iter()
        .filter(|a| a.status == 200 && a.header("idempotent-replayed").is_none())
        .collect();
    assert_eq!(first.len(), 1, "{answers:?}");
    for a in &answers {
        let busy = a.status == 409 && a.json()["code"] == json!("E903");
        let replay = a.status == 200 && a.body == first[0].body;
        assert!(busy || replay, "{a:?}");
    }
    assert_eq!(s.core().bookings("G-X-RACE"), 1);
    assert_eq!(s.db.state("G-X-RACE"), Some(State::Done));
}

#[test]
fn the_http_port_is_announced_after_the_tcp_one() {
    skip_if_unavailable!();
    let db = temp_ledger();
    let core = Core::start(&[]);
    let mut cmd = relay_command(&db, &core.url(), &["--http-listen", "127.0.0.1:0"]);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let tcp = lines.next().unwrap().unwrap();
    let http = lines.next().unwrap().unwrap();
    assert!(tcp.starts_with("listening on 127.0.0.1:"), "{tcp}");
    let addr = http
        .strip_prefix("http listening on ")
        .unwrap_or_else(|| panic!("{http}"));
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"),
        "{addr}"
    );
    let a = http_post(addr, Some("\"G-X-PORT\""), &transfer_body(1, ""));
    assert_eq!(a.status, 200);
    let _ = child.kill();
    let _ = child.wait();
}
