//! reprocess racing channel resends, and two reprocess runs at once: every GUID is sent
//! again once at most and booked once.

use std::sync::Barrier;
use std::thread;

use wire::{E_IN_FLIGHT, E_NOT_SENT};

use crate::util::*;

#[test]
fn reprocess_racing_channel_resends_books_every_guid_once() {
    skip_if_unavailable!();
    const N: usize = 30;
    const RESENDERS: usize = 4;
    let port = free_port();
    let core_url = format!("http://127.0.0.1:{port}");
    let s = Scene::new().relay_to(&core_url, &[]).build();
    let msgs: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-RA-{i:02}"), 100 + i as u64, "SLOW"))
        .collect();
    for m in &msgs {
        assert_eq!(s.call(m), short(m, &E_NOT_SENT), "core down");
    }
    // The core comes back on the very address the relay uses.
    let core = Core::on_port(port, &["--slow-ms", "20"]);

    let barrier = Barrier::new(2 + RESENDERS);
    let (runs, replies) = thread::scope(|scope| {
        let runs: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    reprocess(&s.db, &core_url, &["--max-attempts", "5", "--json"])
                })
            })
            .collect();
        let resenders: Vec<_> = (0..RESENDERS)
            .map(|t| {
                let (barrier, msgs, s) = (&barrier, &msgs, &s);
                scope.spawn(move || {
                    barrier.wait();
                    let mut c = Channel::connect(s.addr());
                    (0..N)
                        .map(|k| {
                            let m = &msgs[(k * (t + 1) + t * 7) % N]; // a different order each
                            (m.clone(), c.call(m))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let runs: Vec<Run> = runs.into_iter().map(|h| h.join().unwrap()).collect();
        let replies: Vec<(Vec<u8>, Vec<u8>)> = resenders
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        (runs, replies)
    });
    let mut sent = 0;
    for r in &runs {
        r.expect_code(EXIT_SETTLED);
        sent += r.json()["sent"].as_u64().unwrap();
    }

    for m in &msgs {
        let guid = guid_of(m);
        assert_eq!(core.bookings(&guid), 1, "{guid}");
        let final_reply = assert_done_as_booked(&s.db, &core, m);
        assert_eq!(
            s.db.row(&guid).unwrap().attempts,
            Some(2),
            "{guid}: exactly one re-claim"
        );
        assert_eq!(s.call(m), final_reply, "{guid}");
        for (sent_m, reply) in replies.iter().filter(|(sm, _)| sm == m) {
            assert!(
                *reply == final_reply || *reply == short(sent_m, &E_IN_FLIGHT),
                "{guid}: {:?}",
                String::from_utf8_lossy(reply)
            );
        }
    }
    assert_eq!(core.total_bookings(), N as u64);
    assert!(sent <= N as u64, "reprocess runs sent {sent} in all");
}

#[test]
fn two_reprocess_runs_at_once_never_send_a_guid_twice() {
    skip_if_unavailable!();
    const N: usize = 40;
    let msgs: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-R2-{i:02}"), 1 + i as u64, "SLOW"))
        .collect();
    let s = Scene::new()
        .core(&["--slow-ms", "40"])
        .rows(msgs.iter().map(|m| RowSpec::failed(m).age(OLD)))
        .build();
    let outs: Vec<serde_json::Value> =
        at_once(2, || s.reprocess(&["--max-attempts", "3", "--json"]))
            .iter()
            .map(|r| r.expect_code(EXIT_SETTLED).json())
            .collect();
    let n = |j: &serde_json::Value, k: &str| j[k].as_u64().unwrap();
    assert_eq!(
        n(&outs[0], "sent") + n(&outs[1], "sent"),
        N as u64,
        "{outs:?}"
    );
    for j in &outs {
        assert_eq!(n(j, "sent") + n(j, "raced"), n(j, "examined"), "{j}");
        assert_eq!(n(j, "done"), n(j, "sent"), "{j}");
    }
    for m in &msgs {
        let guid = guid_of(m);
        assert_eq!(s.core().bookings(&guid), 1, "{guid}");
        assert_done_as_booked(&s.db, s.core(), m);
        assert_eq!(s.db.row(&guid).unwrap().attempts, Some(2), "{guid}");
    }
    assert_eq!(s.core().total_bookings(), N as u64);
}
