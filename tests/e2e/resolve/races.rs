//! resolve racing channel resends, and two resolve runs at once: every row is settled once
//! and no GUID is booked twice.

use std::sync::Barrier;
use std::thread;

use wire::{E_IN_FLIGHT, E_UNKNOWN};

use crate::util::*;

#[test]
fn resolve_racing_channel_resends_never_books_an_unknown_guid_twice() {
    skip_if_unavailable!();
    const N: usize = 15;
    const RESENDERS: usize = 4;
    // Half booked by a lost answer (DROP), half never reached the core (hand-made).
    let dropped: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-RR-D{i:02}"), 1 + i as u64, "DROP"))
        .collect();
    let lost: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-RR-L{i:02}"), 1 + i as u64, ""))
        .collect();
    let s = Scene::new()
        .core(&[])
        .relay(&[])
        .rows(lost.iter().map(|m| RowSpec::unknown(m).age(OLD)))
        .build();
    for m in &dropped {
        assert_eq!(s.call(m), short(m, &E_UNKNOWN));
        s.db.age(&guid_of(m), OLD);
    }
    let all: Vec<Vec<u8>> = dropped.iter().chain(&lost).cloned().collect();

    let barrier = Barrier::new(1 + RESENDERS);
    let (r, replies) = thread::scope(|scope| {
        let run = scope.spawn(|| {
            barrier.wait();
            s.resolve(&["--min-age", "60", "--json"])
        });
        let resenders: Vec<_> = (0..RESENDERS)
            .map(|t| {
                let (barrier, all, s) = (&barrier, &all, &s);
                scope.spawn(move || {
                    barrier.wait();
                    let mut c = Channel::connect(s.addr());
                    let mut out = Vec::new();
                    for round in 0..3 {
                        for k in 0..all.len() {
                            let m = &all[(k + t * 5 + round * 3) % all.len()];
                            out.push((m.clone(), c.call(m)));
                        }
                    }
                    out
                })
            })
            .collect();
        let replies: Vec<(Vec<u8>, Vec<u8>)> = resenders
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        (run.join().unwrap(), replies)
    });
    r.expect_code(EXIT_SETTLED);
    assert_counts(
        &r.json(),
        &[
            ("examined", 2 * N as u64),
            ("done", N as u64),
            ("failed", N as u64),
            ("raced", 0),
        ],
    );

    for m in &dropped {
        let guid = guid_of(m);
        let final_reply = assert_done_as_booked(&s.db, s.core(), m);
        for (_, reply) in replies.iter().filter(|(sm, _)| sm == m) {
            assert!(
                *reply == final_reply || *reply == short(m, &E_UNKNOWN),
                "{guid}: {:?}",
                String::from_utf8_lossy(reply)
            );
        }
        assert_eq!(s.call(m), final_reply);
        assert_eq!(
            s.core().bookings(&guid),
            1,
            "{guid}: booked by the lost send only"
        );
        assert_eq!(
            s.db.row(&guid).unwrap().attempts,
            Some(1),
            "{guid}: never re-claimed"
        );
    }
    for m in &lost {
        let guid = guid_of(m);
        // Any resend after resolve made it FAILED re-claimed it; make sure one did.
        let final_reply = s.call(m);
        assert_eq!(code(&final_reply), "0000", "{guid}");
        assert_eq!(assert_done_as_booked(&s.db, s.core(), m), final_reply);
        for (_, reply) in replies.iter().filter(|(sm, _)| sm == m) {
            assert!(
                *reply == final_reply
                    || *reply == short(m, &E_UNKNOWN)
                    || *reply == short(m, &E_IN_FLIGHT),
                "{guid}: {:?}",
                String::from_utf8_lossy(reply)
            );
        }
        assert_eq!(s.core().bookings(&guid), 1, "{guid}");
        assert_eq!(
            s.db.row(&guid).unwrap().attempts,
            Some(2),
            "{guid}: re-claimed once"
        );
    }
    assert_eq!(s.core().total_bookings(), 2 * N as u64);
}

#[test]
fn two_resolve_runs_at_once_settle_each_row_once() {
    skip_if_unavailable!();
    const N: usize = 40;
    let msgs: Vec<Vec<u8>> = (0..N)
        .map(|i| msg(&format!("G-R2R-{i:02}"), 1 + i as u64, ""))
        .collect();
    let s = Scene::new()
        .core(&[])
        .rows(msgs.iter().map(|m| RowSpec::unknown(m).age(OLD)))
        .build();
    for m in msgs.iter().step_by(2) {
        s.core().book(m);
    }
    let outs: Vec<serde_json::Value> = at_once(2, || s.resolve(&["--min-age", "60", "--json"]))
        .iter()
        .map(|r| r.expect_code(EXIT_SETTLED).json())
        .collect();
    let n = |k: &str| outs[0][k].as_u64().unwrap() + outs[1][k].as_u64().unwrap();
    assert_eq!(
        (n("done"), n("failed")),
        (N as u64 / 2, N as u64 / 2),
        "{outs:?}"
    );
    assert_eq!(
        n("done") + n("failed") + n("raced"),
        n("examined"),
        "{outs:?}"
    );
    for (i, m) in msgs.iter().enumerate() {
        if i % 2 == 0 {
            assert_done_as_booked(&s.db, s.core(), m);
        } else {
            assert_failed_e902(&s.db, m, 1);
        }
    }
    assert_eq!(
        s.core().total_bookings(),
        N as u64 / 2,
        "resolve never POSTs"
    );
}
