//! Three relays on three ports sharing one PostgreSQL ledger, in front of one core; every
//! resend goes to another relay than the send before it, as a channel behind a load
//! balancer would send it. No GUID is booked twice, and the three relays answer a GUID with
//! the same bytes.

use std::collections::BTreeMap;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use wire::{E_GUID_REUSED, E_IN_FLIGHT, E_NOT_SENT, E_UNKNOWN};

use crate::util::*;

/// One ledger, one core (not started yet, or started), three relays pointing at it.
struct Trio {
    relays: Vec<Server>,
    db: TempLedger,
}

impl Trio {
    /// Three relays on the test's ledger, in front of `core_url`.
    fn start(core_url: &str) -> Trio {
        let db = temp_ledger();
        let relays = (0..3).map(|_| start_relay(&db, core_url, &[])).collect();
        Trio { relays, db }
    }

    /// The address of relay `i` (mod 3).
    fn addr(&self, i: usize) -> &str {
        &self.relays[i % 3].addr
    }

    /// One round trip to relay `i` (mod 3) on a fresh connection.
    fn call(&self, i: usize, m: &[u8]) -> Vec<u8> {
        call(self.addr(i), m)
    }

    /// The three relays' answers to `m`, each on a fresh connection: all alike.
    fn same_from_all(&self, m: &[u8]) -> Vec<u8> {
        let replies: Vec<Vec<u8>> = (0..3).map(|i| self.call(i, m)).collect();
        for (i, r) in replies.iter().enumerate() {
            assert_eq!(
                String::from_utf8_lossy(r),
                String::from_utf8_lossy(&replies[0]),
                "{}: relay {i} answers otherwise than relay 0",
                guid_of(m)
            );
        }
        replies.into_iter().next().expect("three replies")
    }
}

/// No GUID booked twice, and `want` booked once each.
fn assert_booked_once(core: &Core, want: &[&[u8]]) {
    let by_guid = core.by_guid();
    let twice: BTreeMap<&String, &u64> = by_guid.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "booked more than once: {twice:?}");
    for m in want {
        assert_eq!(by_guid.get(&guid_of(m)), Some(&1), "{}", guid_of(m));
    }
}

#[test]
fn new_transfers_resends_in_flight_and_reused_guids_across_three_relays() {
    skip_if_unavailable!();
    let core = Core::start(&["--slow-ms", "1500"]);
    let t = Trio::start(&core.url());

    // New transfers, each resent byte for byte to the next relay, then to the third, from
    // six channels at once; plain, rejected and dropped (booked, answer lost) alike.
    let memos = ["", "REJECT", "DROP"];
    let msgs: Vec<Vec<u8>> = (0..36)
        .map(|i| msg(&format!("G-3R-{i:02}"), 100 + i as u64, memos[i % 3]))
        .collect();
    let replies: Vec<(usize, Vec<u8>, Vec<u8>)> = thread::scope(|scope| {
        let channels: Vec<_> = (0..6)
            .map(|c| {
                let (t, msgs) = (&t, &msgs);
                scope.spawn(move || {
                    let mut out = Vec::new();
                    for (i, m) in msgs.iter().enumerate().skip(c).step_by(6) {
                        let first = t.call(i, m);
                        let again = t.call(i + 1, m);
                        out.push((i, first, again));
                    }
                    out
                })
            })
            .collect();
        channels
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    for (i, first, again) in &replies {
        let m = &msgs[*i];
        let want = match memos[i % 3] {
            "" => "0000",
            "REJECT" => "B001",
            _ => "E901",
        };
        assert_code(first, want);
        assert_eq!(again, first, "{}: the resend on another relay", guid_of(m));
        assert_eq!(&t.same_from_all(m), first);
        if want == "0000" {
            assert_done_with(&t.db, &core, m, first);
        }
    }

    // Resends while in flight: the first send is still at the (slow) core when the resend
    // reaches another relay, which answers E903 at once; once it is booked, the third relay
    // replays it.
    let slow: Vec<Vec<u8>> = (0..6)
        .map(|i| msg(&format!("G-3R-SLOW-{i}"), 700 + i, "SLOW"))
        .collect();
    let pending: Vec<_> = slow
        .iter()
        .enumerate()
        .map(|(i, m)| send_in_background(t.addr(i), m))
        .collect();
    for (i, m) in slow.iter().enumerate() {
        let g = guid_of(m);
        assert!(eventually(WAIT, || t.db.state(&g) == Some(State::Sent)));
        let asked = Instant::now();
        assert_eq!(t.call(i + 1, m), short(m, &E_IN_FLIGHT), "{g}");
        assert!(
            asked.elapsed() < Duration::from_millis(750),
            "{g}: E903 at once"
        );
    }
    for ((i, m), pending) in slow.iter().enumerate().zip(pending) {
        let first = pending.join().unwrap();
        assert_code(&first, "0000");
        assert_eq!(t.call(i + 2, m), first);
        assert_done_with(&t.db, &core, m, &first);
    }

    // The same GUID for another request, on another relay than the one that booked it.
    for (i, m) in msgs.iter().enumerate().take(6) {
        let g = guid_of(m);
        let before = t.db.row(&g).unwrap();
        let other = msg(&g, 99_999, "another amount");
        assert_eq!(t.call(i + 1, &other), short(&other, &E_GUID_REUSED), "{g}");
        assert_eq!(t.call(i + 2, &other), short(&other, &E_GUID_REUSED), "{g}");
        assert_eq!(t.db.row(&g).unwrap(), before, "{g}: unchanged");
    }

    let booked: Vec<&[u8]> = msgs
        .iter()
        .enumerate()
        .filter(|(i, _)| memos[i % 3] != "REJECT")
        .map(|(_, m)| &m[..])
        .chain(slow.iter().map(|m| &m[..]))
        .collect();
    assert_booked_once(&core, &booked);
    assert_eq!(core.total_bookings(), booked.len() as u64);
}

#[test]
fn a_core_outage_is_e902_and_a_resend_on_another_relay_books_once() {
    skip_if_unavailable!();
    let port = free_port();
    let t = Trio::start(&format!("http://127.0.0.1:{port}"));
    let msgs: Vec<Vec<u8>> = (0..9)
        .map(|i| msg(&format!("G-3R-OUT-{i}"), 10 + i, ""))
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(t.call(i, m), short(m, &E_NOT_SENT));
        assert_failed_e902(&t.db, m, 1);
    }

    // The core comes back where the relays point; each GUID is resent to the next relay
    // from three channels at once, and to the third one after that.
    let core = Core::on_port(port, &[]);
    let firsts: Vec<Vec<u8>> = thread::scope(|scope| {
        let handles: Vec<_> = msgs
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let t = &t;
                scope.spawn(move || t.call(i + 1, m))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, (m, first)) in msgs.iter().zip(&firsts).enumerate() {
        assert_code(first, "0000");
        assert_eq!(t.call(i + 2, m), *first);
        assert_eq!(&t.same_from_all(m), first);
        let row = t.db.row(&guid_of(m)).unwrap();
        assert_eq!(
            (row.state, row.attempts, row.response.as_deref()),
            (State::Done, Some(2), Some(&first[..])),
            "{}: re-claimed once",
            guid_of(m)
        );
    }
    let all: Vec<&[u8]> = msgs.iter().map(|m| &m[..]).collect();
    assert_booked_once(&core, &all);
}

#[test]
fn one_guid_sent_to_three_relays_at_once_is_booked_once() {
    skip_if_unavailable!();
    const ROUNDS: usize = 8;
    let core = Core::start(&["--slow-ms", "300"]);
    let t = Trio::start(&core.url());
    let msgs: Vec<Vec<u8>> = (0..ROUNDS)
        .map(|i| {
            let memo = if i % 2 == 0 { "SLOW" } else { "" };
            msg(&format!("G-3R-RACE-{i}"), 50 + i as u64, memo)
        })
        .collect();
    for m in &msgs {
        // Three channels, one per relay, each sending the same request twice.
        let barrier = Barrier::new(3);
        let replies: Vec<Vec<u8>> = thread::scope(|scope| {
            let handles: Vec<_> = (0..3)
                .map(|i| {
                    let (t, barrier) = (&t, &barrier);
                    scope.spawn(move || {
                        let mut c = Channel::connect(t.addr(i));
                        barrier.wait();
                        vec![c.call(m), c.call(m)]
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let g = guid_of(m);
        let stored = t.same_from_all(m);
        assert_code(&stored, "0000");
        assert_done_with(&t.db, &core, m, &stored);
        for r in &replies {
            assert!(
                *r == stored || *r == short(m, &E_IN_FLIGHT),
                "{g}: {:?}",
                String::from_utf8_lossy(r)
            );
        }
        assert!(replies.contains(&stored), "{g}: someone got the booking");
    }
    let all: Vec<&[u8]> = msgs.iter().map(|m| &m[..]).collect();
    assert_booked_once(&core, &all);
    assert_eq!(core.total_bookings(), ROUNDS as u64);
}

#[test]
fn a_dropped_answer_is_e901_on_every_relay_and_resolve_settles_it_for_all() {
    skip_if_unavailable!();
    let core = Core::start(&[]);
    let t = Trio::start(&core.url());
    let m = msg("G-3R-LOST", 4242, "DROP");
    assert_eq!(t.call(0, &m), short(&m, &E_UNKNOWN));
    assert_eq!(t.same_from_all(&m), short(&m, &E_UNKNOWN));
    t.db.age("G-3R-LOST", OLD);
    resolve(&t.db, &core.url(), &["--min-age", "60"]).expect_code(EXIT_SETTLED);
    let reply = assert_done_as_booked(&t.db, &core, &m);
    assert_eq!(t.same_from_all(&m), reply);
    assert_booked_once(&core, &[&m]);
}
