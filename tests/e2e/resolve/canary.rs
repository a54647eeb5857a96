//! A core that is not ours (another environment, a wrong path, a proxy's 404 page) must
//! change no row: the canary inquiry, and a 404 without the core's JSON.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use wire::E_NOT_SENT;

use crate::util::*;

#[test]
fn a_core_that_does_not_know_our_bookings_changes_no_row() {
    skip_if_unavailable!();
    let lost = msg("G-CAN-LOST", 200, "");
    let s = Scene::new()
        .core(&[])
        .relay(&[])
        .row(RowSpec::unknown(&lost).age(OLD))
        .build();
    let a = s.core();
    let booked = msg("G-CAN-BOOKED", 100, "");
    let booked_reply = s.call(&booked);
    assert_eq!(code(&booked_reply), "0000");
    let before = rows_by_guid(&s.db);

    let b = Core::start(&[]);
    let wrong_path = format!("{}/wrongprefix", a.url());
    for (what, url) in [
        ("another environment", b.url()),
        ("a wrong path", wrong_path),
    ] {
        let r = resolve(&s.db, &url, &["--min-age", "60"]);
        r.expect_code(EXIT_FATAL);
        let err = r.stderr();
        assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
        assert!(
            err.contains("canary") && err.contains("G-CAN-BOOKED"),
            "{what}: {err}"
        );
        assert_eq!(r.stdout(), "", "{what}");
        assert_eq!(rows_by_guid(&s.db), before, "{what}: no row changed");
    }
    assert_eq!(b.inquiries(), 1, "only the canary was asked");

    // The core down entirely: nothing can be checked, nothing changes, a later run may.
    let r = resolve(&s.db, &dead_url(), &["--min-age", "60"]);
    r.expect_code(EXIT_LEFT);
    assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
    assert!(r.stderr().contains("canary"), "{}", r.stderr());
    assert_eq!(rows_by_guid(&s.db), before, "core down: no row changed");

    // The core that booked it: the canary passes and the lost send is settled.
    let r = s.resolve(&["--min-age", "60", "--json"]);
    r.expect_code(EXIT_SETTLED);
    assert_counts(&r.json(), &[("examined", 1), ("failed", 1), ("done", 0)]);
    assert_settled_short(&s.db, &lost, State::Failed, &E_NOT_SENT, 1);
    assert_eq!(s.db.row("G-CAN-BOOKED").unwrap(), before[0]);
    assert_eq!(s.call(&booked), booked_reply);
    assert_eq!(a.by_guid(), BTreeMap::from([("G-CAN-BOOKED".into(), 1)]));
    assert_eq!(b.total_bookings(), 0);
}

/// An HTTP server that answers every request `404` with an HTML page, as a proxy or load
/// balancer in front of the wrong backend would. Returns its base URL and a request count.
fn html_404_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            // Read the request head (inquiries are GETs without a body).
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => break,
                }
            }
            count.fetch_add(1, Ordering::SeqCst);
            let page = "<html><body><h1>404 Not Found</h1>nginx</body></html>";
            let _ = write!(
                s,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    (url, served)
}

#[test]
fn a_404_that_is_not_the_cores_json_proves_nothing() {
    skip_if_unavailable!();
    let (url, served) = html_404_server();
    let unknown = msg("G-HTML-UNK", 10, "");
    let sent = msg("G-HTML-SENT", 20, "");
    let s = Scene::new()
        .row(RowSpec::unknown(&unknown).age(OLD))
        .row(RowSpec::sent(&sent).age(OLD))
        .build();
    let unk_before = s.db.row("G-HTML-UNK").unwrap();

    let r = resolve(
        &s.db,
        &url,
        &["--min-age", "60", "--stale-sent", "60", "--json"],
    );
    r.expect_code(EXIT_LEFT);
    assert_counts(
        &r.json(),
        &[
            ("examined", 2),
            ("failed", 0),
            ("left", 1),
            ("sent_to_unknown", 1),
        ],
    );
    assert_eq!(served.load(Ordering::SeqCst), 2, "one inquiry per row");
    assert_eq!(s.db.row("G-HTML-UNK").unwrap(), unk_before, "stays UNKNOWN");
    // A stale SENT row whose inquiry proves nothing is UNKNOWN, never FAILED.
    let row = s.db.row("G-HTML-SENT").unwrap();
    assert_eq!(
        (row.state, row.rsp_code.as_deref(), row.attempts),
        (State::Unknown, Some("E901"), Some(1))
    );
    assert!(r.stderr().contains("G-HTML-UNK"), "{}", r.stderr());
}
