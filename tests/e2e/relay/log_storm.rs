//! Repeated warnings are rate-limited (issue 40.6): a full disk once wrote 105,904 log lines
//! (17 MB) in 15 s from two connections. A ledger that refuses every claim (a trigger, as a
//! broken migration or a full disk would) makes every transfer E905: the warning about it is
//! written about once a second, with a line counting those left out, and every one is still
//! counted in the metrics and in the access log.

use std::thread;
use std::time::{Duration, Instant};

use super::metrics::{relay_with_admin, scrape};
use crate::util::*;

/// A `tx` trigger that refuses every INSERT: every claim fails at once (E905).
const BREAK_SQLITE: &str = "CREATE TRIGGER storm BEFORE INSERT ON tx BEGIN \
     SELECT RAISE(ABORT, 'database or disk is full'); END";
const BREAK_PG: &str = "\
    CREATE FUNCTION storm() RETURNS trigger LANGUAGE plpgsql AS \
        $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'; END $$; \
    CREATE TRIGGER storm BEFORE INSERT ON tx FOR EACH ROW EXECUTE FUNCTION storm()";

/// How long the storm blows, and on how many connections.
const STORM: Duration = Duration::from_secs(3);
const CONNECTIONS: usize = 4;

/// The number a count line gives (`suppressed N similar warning(s) …`).
fn suppressed(line: &str) -> u64 {
    let rest = line.split("suppressed ").nth(1).expect("a count");
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[test]
fn a_storm_of_e905_is_about_a_line_a_second_and_the_rest_counted() {
    skip_if_unavailable!();
    let s = Scene::new().core(&[]).build();
    let (relay, admin) = relay_with_admin(&s.db, &s.core().url(), &[]);
    by_hand(&s.db, BREAK_SQLITE, BREAK_PG);

    let started = Instant::now();
    let sent: u64 = thread::scope(|scope| {
        let workers: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                let addr = relay.addr.clone();
                scope.spawn(move || {
                    let mut chan = Channel::connect(&addr);
                    let mut n = 0u64;
                    while started.elapsed() < STORM {
                        let m = msg(&format!("G-STORM-{c}-{n}"), 5, "");
                        assert_code(&chan.call(&m), "E905");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let blew = started.elapsed();
    assert!(sent >= 100, "a storm: {sent} requests in {blew:?}");

    // The warnings of the storm's last second are counted once that second is over.
    let (mut warned, mut counted) = (0, 0);
    let all_counted = eventually(WAIT, || {
        let log = relay.stderr();
        let warnings: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("cannot write the ledger"))
            .collect();
        warned = warnings.len() as u64;
        counted = log
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("ledger errors (E905)"))
            .map(suppressed)
            .sum();
        warned + counted == sent
    });
    assert!(
        all_counted,
        "{warned} warnings + {counted} counted as left out != {sent} E905s"
    );
    // About one a second (the first interval may straddle a second boundary).
    let seconds = blew.as_secs() + 1;
    assert!(
        warned <= seconds + 1,
        "{warned} warnings in {blew:?}:\n{}",
        relay.stderr()
    );
    assert!(counted > 0, "the rest counted as left out");
    let warn_lines = relay
        .stderr()
        .lines()
        .filter(|l| l.contains("WARN"))
        .count() as u64;
    assert!(
        warn_lines <= 3 * (seconds + 1),
        "{warn_lines} WARN lines in {blew:?}"
    );

    // Each request is still in the access log and in the metrics, every one.
    let access = relay
        .stderr()
        .lines()
        .filter(|l| l.contains("INFO") && l.contains("code=E905"))
        .count() as u64;
    assert_eq!(access, sent, "one access line per request");
    let text = scrape(&admin);
    assert_eq!(
        sample(&text, "txrelay_requests_total{code=\"E905\"}"),
        sent as f64
    );
    assert_eq!(s.core().total_bookings(), 0);
}
