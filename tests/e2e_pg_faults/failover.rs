//! A failover (contract §7; issue 42, item 1): the relay's URL lists the primary and then
//! its synchronous standby, with `target_session_attrs=read-write`. The primary dies (an
//! immediate stop); until the standby is promoted nothing is writable, and every request gets
//! `E905` within the deadline (the standby, read-only, is passed over; the relay neither
//! exits nor hangs). Once it is promoted the relay finds it by itself and books again. Every
//! GUID answered `0000` before the failover is on the new primary: its resend gets the same
//! bytes, and nothing is booked twice.

use std::time::Duration;

use testkit::Chan;
use testkit::pg::Server;

use crate::util::*;

/// `db` (a URL to the primary at 127.0.0.1) with the standby on `standby_port` listed after
/// it, and `target_session_attrs=read-write`.
fn primary_then_standby(db: &str, standby_port: u16) -> String {
    let (head, rest) = db.split_once("@127.0.0.1:").expect("a URL to 127.0.0.1");
    let (port, tail) = rest.split_once('/').expect("a database");
    let sep = if tail.contains('?') { '&' } else { '?' };
    format!(
        "{head}@127.0.0.1:{port},127.0.0.1:{standby_port}/{tail}{sep}target_session_attrs=read-write"
    )
}

/// The whole reply to a new transfer for `guid` (or its resend).
fn reply(relay: &str, guid: &str) -> Vec<u8> {
    Chan::connect(relay, Duration::from_secs(30))
        .and_then(|mut c| c.call(&msg(guid)))
        .expect("a reply")
}

#[test]
fn after_a_failover_the_relay_finds_the_promoted_standby_and_forgets_nothing() {
    let Some((server, standby)) = Server::own_with_sync_standby_or_skip() else {
        return;
    };
    let url = primary_then_standby(&server.fresh_db(), standby.cluster.port);
    let (core_proc, core) = coresim();
    let relay = relay(&url, &core_proc.url());
    let before: Vec<(String, Vec<u8>)> = (0..20)
        .map(|_| {
            let g = guid("failover-before");
            let r = reply(&relay.addr, &g);
            assert_eq!(&r[41..45], b"0000", "{g}: {}", String::from_utf8_lossy(&r));
            (g, r)
        })
        .collect();

    server
        .cluster()
        .expect("a cluster of our own")
        .stop()
        .expect("the primary dies");
    let gap = call(&relay.addr, &guid("failover-gap"));
    assert_e905_in_time(&gap, "no writable host");

    standby.promote().expect("the standby promoted");
    let calls = until_booked(&relay.addr, "failover-after", Duration::from_secs(30));
    for c in &calls {
        assert!(
            (c.code == "E905" || c.code == "0000") && c.elapsed <= CALL_LIMIT,
            "{c:?}"
        );
    }
    let last = calls.last().expect("a call");
    assert_eq!(
        last.code, "0000",
        "the promoted standby was not found: {calls:?}"
    );
    eprintln!(
        "failover: booked again {} ms after the promotion began, {} calls answered E905 meanwhile",
        ms(last.ended().duration_since(gap.ended())),
        calls.len() - 1
    );

    for (g, r) in &before {
        assert_eq!(
            &reply(&relay.addr, g),
            r,
            "{g}: the stored reply, from the new primary"
        );
    }
    let booked = bookings(&core);
    assert!(booked.values().all(|&n| n == 1), "{booked:?}");
    for (g, _) in &before {
        assert_eq!(booked.get(g), Some(&1), "{g}");
    }
    for c in std::iter::once(&gap)
        .chain(&calls)
        .filter(|c| c.code == "E905")
    {
        assert_eq!(booked.get(&c.guid), None, "{}: E905, yet booked", c.guid);
    }
}
