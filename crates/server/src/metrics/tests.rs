//! The metrics' tests: the exposition, a sample's readings, a scrape that never shows half a
//! sample, and the thresholds.

use super::*;
use ledger::store::Store;
use std::sync::Arc;

#[test]
fn the_exposition_has_every_family_with_help_and_type() {
    let m = Metrics::new("1a2b3c4");
    m.request(b"0000", None, "tcp");
    m.core_call("not_sent", Duration::from_millis(3));
    m.commit(4, Duration::from_micros(700));
    let text = m.encode();
    for name in [
        "txrelay_requests_total",
        "txrelay_core_call_duration_seconds",
        "txrelay_ledger_commit_duration_seconds",
        "txrelay_ledger_commit_batch_size",
        "txrelay_connections_open",
        "txrelay_connections_refused_total",
        "txrelay_core_connections",
        "txrelay_ledger_rows",
        "txrelay_ledger_oldest_unknown_age_seconds",
        "txrelay_ledger_sampled_timestamp_seconds",
        "txrelay_ledger_sample_errors_total",
        "txrelay_late_replies_adopted_total",
        "txrelay_late_replies_dropped_total",
        "txrelay_late_replies_arrived_total",
        "txrelay_late_replies_settled_total",
        "txrelay_late_replies_waiting",
        "txrelay_ledger_oldest_failed_age_seconds",
        "txrelay_ledger_needs_operator",
        "txrelay_ledger_failed_at_attempt_cap",
        "txrelay_settle_requests_pending",
        "txrelay_settle_requests_oldest_pending_age_seconds",
        "txrelay_settle_requests_expired",
        "txrelay_ledger_recovering",
        "txrelay_recovery_inquiries_total",
        "txrelay_build_info",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}\n{text}");
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}\n{text}");
    }
    assert!(
        text.contains("txrelay_requests_total{code=\"0000\"}"),
        "{text}"
    );
    assert!(
        text.contains("txrelay_ledger_rows{state=\"UNKNOWN\"}"),
        "{text}"
    );
    assert!(
        text.contains("txrelay_core_call_duration_seconds_bucket{outcome=\"not_sent\",le="),
        "{text}"
    );
    let build = format!(
        "txrelay_build_info{{commit=\"1a2b3c4\",version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.contains(&build), "{build}\n{text}");
    #[cfg(target_os = "linux")]
    for name in [
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_threads",
    ] {
        assert!(text.contains(&format!("\n{name} ")), "{name}\n{text}");
    }
}

#[test]
fn a_sample_reads_counts_and_the_oldest_unknown_age() {
    let dir = tempfile::tempdir().unwrap();
    let l = ledger::sqlite::Ledger::open(&dir.path().join("l.db")).unwrap();
    l.connection()
        .execute_batch(
            "INSERT INTO tx (guid, state, attempts, updated_at) VALUES \
             ('a', 'UNKNOWN', 1, datetime('now', '-3600 seconds')), \
             ('b', 'UNKNOWN', 1, datetime('now', '-60 seconds')), \
             ('c', 'DONE', 1, datetime('now'));",
        )
        .unwrap();
    // Settlement requests: one pending (made two minutes ago), one expired undecided.
    l.connection()
        .execute_batch(
            "INSERT INTO settle_request (guid, seen_state, seen_attempts, outcome, to_state, \
             rsp_code, response, evidence, reason, maker, made_at, expires_at) VALUES \
             ('a', 'UNKNOWN', 1, 'booked', 'DONE', '0000', x'00', 'e', 'r', \
              txrelay_identity(), strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-120 seconds'), \
              strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '+1 hour')), \
             ('b', 'UNKNOWN', 1, 'booked', 'DONE', '0000', x'00', 'e', 'r', \
              txrelay_identity(), strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-2 hours'), \
              strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-1 hour'));",
        )
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(Mutex::new(l));
    let oldest = store.oldest_age_secs(State::Unknown).unwrap().unwrap();
    assert!((3599.0..3700.0).contains(&oldest), "{oldest}");
    assert_eq!(store.oldest_age_secs(State::Failed).unwrap(), None);
    assert_eq!(
        store.needs_operator_first(1, 0).map(|c| c.total).unwrap(),
        0
    );
    assert_eq!(store.at_attempt_cap(1, 0).map(|c| c.total).unwrap(), 0);
    let m = Metrics::new("test");
    m.sample(store.as_ref(), &Thresholds::default()).unwrap();
    assert!(m.sampled_at.get() > 0.0);
    assert_eq!(m.rows.with_label_values(&["UNKNOWN"]).get(), 2);
    assert_eq!(m.rows.with_label_values(&["DONE"]).get(), 1);
    assert_eq!(m.settle_requests.pending.get(), 1);
    assert_eq!(m.settle_requests.expired.get(), 1);
    let age = m.settle_requests.oldest_pending.get();
    assert!((119.0..200.0).contains(&age), "{age}");
}

/// A scrape shows one sample whole, never half of one: the rows by state and the ages
/// read in the same sample (once, in CI, a scrape read the rows' gauge before a sample
/// and the ages after it: UNKNOWN rows 0, the oldest UNKNOWN an hour old).
#[test]
fn a_scrape_never_shows_half_a_sample() {
    let dir = tempfile::tempdir().unwrap();
    let open = |name: &str, rows: &str| -> Arc<dyn Store> {
        let l = ledger::sqlite::Ledger::open(&dir.path().join(name)).unwrap();
        l.connection().execute_batch(rows).unwrap();
        Arc::new(Mutex::new(l))
    };
    let one = open(
        "one.db",
        "INSERT INTO tx (guid, state, attempts, updated_at) VALUES \
         ('a', 'UNKNOWN', 1, datetime('now', '-3600 seconds'));",
    );
    let none = open("none.db", "");
    let m = Arc::new(Metrics::new("test"));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (m, stop) = (m.clone(), stop.clone());
        std::thread::spawn(move || {
            for store in [&one, &none].into_iter().cycle() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                m.sample(store.as_ref(), &Thresholds::default()).unwrap();
            }
        })
    };
    let value = |text: &str, key: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(key)).unwrap();
        line[key.len()..].trim().parse().unwrap()
    };
    let mut torn = 0;
    for _ in 0..3000 {
        let text = m.encode();
        let rows = value(&text, "txrelay_ledger_rows{state=\"UNKNOWN\"}");
        let age = value(&text, "txrelay_ledger_oldest_unknown_age_seconds");
        if (rows > 0.0) != (age > 0.0) {
            torn += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    assert_eq!(torn, 0, "scrapes that showed half a sample");
}

#[test]
fn needs_operator_and_the_attempt_cap_are_counted_against_the_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let l = ledger::sqlite::Ledger::open(&dir.path().join("l.db")).unwrap();
    l.connection()
        .execute_batch(
            "INSERT INTO tx (guid, state, rsp_code, attempts, updated_at) VALUES \
             ('f2', 'FAILED', 'E902', 2, datetime('now', '-7200 seconds')), \
             ('f3', 'FAILED', 'E902', 3, datetime('now')), \
             ('f7', 'FAILED', 'E902', 7, datetime('now')), \
             ('u', 'UNKNOWN', 'E901', 1, datetime('now')), \
             ('u19', 'UNKNOWN', 'E901', 1, datetime('now')), \
             ('s', 'SENT', NULL, 1, datetime('now')), \
             ('d', 'DONE', '0000', 9, datetime('now')); \
             INSERT INTO tx_inquiry (guid, failures, next_at) VALUES \
             ('u', 20, datetime('now')), ('u19', 19, datetime('now')), \
             ('s', 25, datetime('now')), ('d', 30, datetime('now'));",
        )
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(Mutex::new(l));
    // DONE is no longer in doubt, whatever its record says; FAILED/E902 from the cap up.
    let counts = |inquiries, attempts| {
        (
            store
                .needs_operator_first(inquiries, 0)
                .map(|c| c.total)
                .unwrap(),
            store.at_attempt_cap(attempts, 0).map(|c| c.total).unwrap(),
        )
    };
    assert_eq!(counts(20, 3), (2, 2));
    assert_eq!(counts(19, 2), (3, 3));
    assert_eq!(counts(26, 8), (0, 0));
    let oldest = store.oldest_age_secs(State::Failed).unwrap().unwrap();
    assert!((7199.0..7300.0).contains(&oldest), "{oldest}");
}
