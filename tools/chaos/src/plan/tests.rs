//! The plan's tests: same seed, same steps, schedule and routes.

use super::route::Route;
use super::*;

#[test]
fn same_seed_same_steps() {
    let mut a = Planner::new(7, 3);
    let mut b = Planner::new(7, 3);
    for _ in 0..500 {
        assert_eq!(a.next_step(), b.next_step());
    }
}

#[test]
fn channels_and_seeds_differ() {
    let first = |seed, ch| Planner::new(seed, ch).next_step();
    assert_ne!(first(7, 3), first(7, 4));
    assert_ne!(first(7, 3), first(8, 3));
}

#[test]
fn steps_are_valid_and_guids_unique() {
    let mut p = Planner::new(1, 31);
    let mut new = std::collections::HashSet::new();
    for _ in 0..2000 {
        match p.next_step().action {
            Action::New(r) | Action::InFlight(r) => {
                assert!(wire::parse_request(&r.msg).is_ok());
                assert!(new.insert(r.guid), "GUID reused for a new transfer");
            }
            Action::Resend { req, .. } => assert!(new.contains(&req.guid)),
            Action::OtherAmount { req, .. } => {
                assert!(new.contains(&req.guid));
                assert!(wire::parse_request(&req.msg).is_ok());
            }
        }
    }
}

#[test]
fn resend_is_byte_identical_and_other_amount_differs() {
    let mut p = Planner::new(3, 0);
    let mut seen = std::collections::HashMap::new();
    for _ in 0..2000 {
        match p.next_step().action {
            Action::New(r) | Action::InFlight(r) => {
                seen.insert(r.guid.clone(), r.msg);
            }
            Action::Resend { req, .. } => assert_eq!(seen[&req.guid], req.msg),
            Action::OtherAmount { req, .. } => assert_ne!(seen[&req.guid], req.msg),
        }
    }
}

#[test]
fn schedule_is_deterministic_sorted_and_within_the_run() {
    let a = schedule(5, 60, Targets::SINGLE);
    assert_eq!(a, schedule(5, 60, Targets::SINGLE));
    assert_ne!(a, schedule(6, 60, Targets::SINGLE));
    assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
    let kills = a
        .iter()
        .filter(|e| e.what == Disruption::KillRelay(0))
        .count();
    assert!((12..=60).contains(&kills), "{kills} relay kills in 60 s");
    assert!(a.iter().any(|e| e.what == Disruption::KillCore));
    assert!(
        !a.iter()
            .any(|e| matches!(e.what, Disruption::StopDb | Disruption::KillRelay(1..)))
    );
    // Every kill is followed by its start.
    for (kill, start) in [
        (Disruption::KillRelay(0), Disruption::StartRelay(0)),
        (Disruption::KillCore, Disruption::StartCore),
    ] {
        let k = a.iter().filter(|e| e.what == kill).count();
        let s = a.iter().filter(|e| e.what == start).count();
        assert_eq!(k, s);
    }
}

#[test]
fn more_relays_and_a_database_keep_the_single_relay_schedule() {
    let single = schedule(5, 60, Targets::SINGLE);
    let targets = Targets {
        relays: 3,
        db: true,
    };
    let many = schedule(5, 60, targets);
    assert_eq!(many, schedule(5, 60, targets));
    // Relay 0 and the core: the same events as with one relay.
    let old: Vec<Event> = many
        .iter()
        .filter(|e| {
            matches!(
                e.what,
                Disruption::KillRelay(0)
                    | Disruption::StartRelay(0)
                    | Disruption::KillCore
                    | Disruption::StartCore
            )
        })
        .copied()
        .collect();
    assert_eq!(old, single);
    assert!(many.windows(2).all(|w| w[0].at <= w[1].at));
    for (kill, start) in [
        (Disruption::KillRelay(1), Disruption::StartRelay(1)),
        (Disruption::KillRelay(2), Disruption::StartRelay(2)),
        (Disruption::StopDb, Disruption::StartDb),
    ] {
        let k = many.iter().filter(|e| e.what == kill).count();
        let s = many.iter().filter(|e| e.what == start).count();
        assert_eq!(k, s, "{kill:?}");
        assert!(k >= 3, "{k} {kill:?} in 60 s");
    }
    // The database: up 5–10 s, down 0.1–1 s.
    let db: Vec<&Event> = many
        .iter()
        .filter(|e| matches!(e.what, Disruption::StopDb | Disruption::StartDb))
        .collect();
    for pair in db.chunks(2) {
        let down = pair[1].at - pair[0].at;
        assert!(down >= Duration::from_millis(100) && down <= Duration::from_millis(1000));
    }
    for w in db[1..].chunks(2).filter(|w| w.len() == 2) {
        let up = w[1].at - w[0].at;
        assert!(up >= Duration::from_millis(5000) && up <= Duration::from_millis(10_000));
    }
    assert!(!many.iter().any(|e| e.what == Disruption::KillRelay(3)));
}

#[test]
fn one_relay_routes_everything_to_it_and_keeps_the_digest() {
    let events = schedule(1, 45, Targets::SINGLE);
    // The digest of `--seed 1 --secs 45` before there were several relays.
    assert_eq!(plan_digest(1, 32, 1, 200, &events), 0xa13c45a4ecde1d7e);
    let mut p = Planner::new(1, 0);
    let mut r = Router::new(1, 0, 1);
    for _ in 0..500 {
        assert_eq!(r.route(&p.next_step().action), Route { to: 0, twin: 0 });
    }
}

#[test]
fn resends_mostly_go_to_another_relay() {
    let mut p = Planner::new(9, 4);
    let mut r = Router::new(9, 4, 3);
    let mut firsts = Vec::new();
    let (mut again, mut other) = (0, 0);
    for _ in 0..5000 {
        let action = p.next_step().action;
        let route = r.route(&action);
        assert!(route.to < 3 && route.twin < 3);
        match action {
            Action::New(_) => firsts.push(route.to),
            Action::InFlight(_) => {
                firsts.push(route.to);
                again += 1;
                other += usize::from(route.twin != route.to);
            }
            Action::Resend { index, .. } | Action::OtherAmount { index, .. } => {
                again += 1;
                other += usize::from(route.to != firsts[index]);
            }
        }
    }
    let share = other * 100 / again;
    assert!((70..=90).contains(&share), "{share}% to another relay");
    // Every relay gets new GUIDs.
    for relay in 0..3 {
        assert!(firsts.iter().filter(|&&f| f == relay).count() > 500);
    }
}

#[test]
fn memo_prefixes() {
    assert_eq!(Memo::of("SLOW rent 1"), Memo::Slow);
    assert_eq!(Memo::of("FAIL500 x"), Memo::Fail500);
    assert_eq!(Memo::of("rent SLOW"), Memo::Normal);
}
