//! `relay --admin` under clients that misbehave, and `/healthz` when claims cannot be
//! written: connections that dribble their request head cannot starve the port (its head
//! deadline, its slots), and `/healthz` fails when the `tx` table's triggers do, leaving no
//! probe row and no history behind when they work.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ledger::store::HEALTH_PROBE_GUID;
use server::admin::{HEAD_DEADLINE, MAX_CONNECTIONS};
use wire::E_LEDGER;

use super::metrics::relay_with_admin;
use crate::util::*;

/// How long a dribbling client goes on if the relay never closes its connection.
const DRIP_FOR: Duration = Duration::from_secs(15);

/// A client that connects now (before this returns, so that the admin port accepts it
/// before any later connection) and then sends a request head that never ends, one byte a
/// second; each pause is a read, which also sees the relay close the connection. Joins to
/// how long the connection lived, or `None` if it was still open after `DRIP_FOR`.
fn drip(admin: &str) -> JoinHandle<Option<Duration>> {
    let mut s = TcpStream::connect(admin).unwrap_or_else(|e| panic!("connect {admin}: {e}"));
    let started = Instant::now();
    thread::spawn(move || {
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let head = b"GET /healthz HTTP/1.1\r\nX-Drip: "
            .iter()
            .chain(b"a".iter().cycle());
        let mut buf = [0u8; 256];
        for byte in head {
            if started.elapsed() > DRIP_FOR {
                return None;
            }
            if s.write_all(&[*byte]).is_err() {
                return Some(started.elapsed());
            }
            match s.read(&mut buf) {
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                _ => return Some(started.elapsed()), // closed (or answered, then closed)
            }
        }
        unreachable!("the head never ends")
    })
}

/// `GET path`, tried again while the port closes the connection unanswered, until `limit`:
/// the status and body, or `None` if no answer came in time.
fn get_within(admin: &str, path: &str, limit: Duration) -> Option<(u16, String)> {
    let mut answer = None;
    eventually(limit, || {
        let Ok(mut s) = TcpStream::connect(admin) else {
            return false;
        };
        s.set_read_timeout(Some(limit)).unwrap();
        let mut out = String::new();
        let sent = write!(s, "GET {path} HTTP/1.1\r\nHost: {admin}\r\n\r\n");
        if sent.is_err() || s.read_to_string(&mut out).is_err() || out.is_empty() {
            return false;
        }
        let (head, body) = out.split_once("\r\n\r\n").expect("a head and a body");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
        answer = Some((status.expect("a status line"), body.to_string()));
        true
    });
    answer
}

#[test]
fn a_few_dribbling_clients_do_not_starve_metrics_or_healthz() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let (_relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
    let drips: Vec<_> = (0..4).map(|_| drip(&admin)).collect();

    let started = Instant::now();
    let bound = Duration::from_secs(3);
    let health = get_within(&admin, "/healthz", bound);
    assert_eq!(
        health,
        Some((200, "ok\n".to_string())),
        "while 4 clients dribble"
    );
    let metrics = get_within(&admin, "/metrics", bound).expect("/metrics answers");
    assert_eq!(metrics.0, 200, "{}", metrics.1);
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());

    for d in drips {
        let lived = d
            .join()
            .unwrap()
            .expect("the relay closes a dribbling client");
        assert!(lived < HEAD_DEADLINE + Duration::from_secs(3), "{lived:?}");
    }
}

#[test]
fn an_admin_port_whose_every_slot_dribbles_recovers_at_the_head_deadline() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let (_relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
    let drips: Vec<_> = (0..MAX_CONNECTIONS).map(|_| drip(&admin)).collect();

    let started = Instant::now();
    let health = get_within(&admin, "/healthz", HEAD_DEADLINE + Duration::from_secs(5));
    assert_eq!(
        health,
        Some((200, "ok\n".to_string())),
        "once the slots are free"
    );
    assert!(
        started.elapsed() < HEAD_DEADLINE + Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    for d in drips {
        let lived = d
            .join()
            .unwrap()
            .expect("the relay closes a dribbling client");
        // Each one held its slot until the head deadline, whatever its drip rate: never
        // closed early, never kept past it.
        assert!(
            lived >= HEAD_DEADLINE - Duration::from_millis(200),
            "{lived:?}"
        );
        assert!(lived < HEAD_DEADLINE + Duration::from_secs(3), "{lived:?}");
    }
}

/// A `tx` trigger that refuses every INSERT, as a broken migration or a hand-made change
/// could leave one: every claim fails (E905).
const BREAK_SQLITE: &str = "CREATE TRIGGER broken BEFORE INSERT ON tx BEGIN \
     SELECT RAISE(ABORT, 'broken by hand'); END";
const BREAK_PG: &str = "\
    CREATE FUNCTION broken() RETURNS trigger LANGUAGE plpgsql AS \
        $$ BEGIN RAISE EXCEPTION 'broken by hand'; END $$; \
    CREATE TRIGGER broken BEFORE INSERT ON tx FOR EACH ROW EXECUTE FUNCTION broken()";
const MEND_SQLITE: &str = "DROP TRIGGER broken";
const MEND_PG: &str = "DROP TRIGGER broken ON tx; DROP FUNCTION broken()";

#[test]
fn healthz_fails_while_claims_cannot_be_written_and_its_probe_leaves_nothing() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let (relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
    for _ in 0..3 {
        assert_eq!(http_get(&admin, "/healthz"), (200, "ok\n".to_string()));
    }
    assert_eq!(s.db.count(), 0, "no probe row is left");
    let probe_history = || s.db.store().history(HEALTH_PROBE_GUID).unwrap();
    assert_eq!(probe_history(), vec![], "nor its history");

    by_hand(&s.db, BREAK_SQLITE, BREAK_PG);
    let m = msg("G-BROKEN-TX", 5, "");
    assert_eq!(
        call(&relay.addr, &m),
        short(&m, &E_LEDGER),
        "every claim fails"
    );
    let (status, body) = http_get(&admin, "/healthz");
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("ledger: "), "{body}");
    assert!(body.contains("broken by hand"), "{body}");
    assert_eq!(s.core().total_bookings(), 0);

    by_hand(&s.db, MEND_SQLITE, MEND_PG);
    assert_eq!(http_get(&admin, "/healthz"), (200, "ok\n".to_string()));
    assert_code(&call(&relay.addr, &m), "0000");
    assert_eq!(s.db.count(), 1, "the transfer's row, no probe's");
    assert_eq!(probe_history(), vec![]);
    assert_eq!(s.db.store().history("G-BROKEN-TX").unwrap().len(), 2);
}
