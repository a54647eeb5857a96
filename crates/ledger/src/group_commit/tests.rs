//! The group commit's own tests: durable connections, and what a batch's COMMIT decides.

use super::writer::{Answer, Job, commit_batch, submission};
use super::*;
use crate::error::LedgerError;
use crate::state::State;
use crate::store::HEALTH_PROBE_GUID;
use crate::store::prelude::*;

/// A claim of `g` as the relay submits it, and where its result comes.
fn claim(g: &str) -> (Box<dyn Job>, Answer<bool>) {
    let g = g.to_string();
    submission(move |l| l.claim_new(&g, "TRNF", g.as_bytes(), None))
}

/// `/healthz`'s write as the relay submits it.
fn touch_health() -> (Box<dyn Job>, Answer<()>) {
    submission(|l| l.touch_health())
}

/// Commits `jobs` as one batch of the writer thread, and the results of the claims among
/// them (`answers`), in order.
fn claims_of(
    l: &Ledger,
    mut jobs: Vec<Box<dyn Job>>,
    answers: &[Answer<bool>],
) -> Vec<Result<bool>> {
    commit_batch(l, &mut jobs);
    answers.iter().map(|a| a.recv().unwrap()).collect()
}

/// A power loss must not forget a claim whose POST reached the core: every connection
/// the relay writes or reads with runs in WAL mode with synchronous=FULL.
#[test]
fn every_connection_of_the_relay_is_wal_and_full() {
    let dir = tempfile::tempdir().unwrap();
    let store = GroupCommit::open(&dir.path().join("l.db"), "test").unwrap();
    let all = store.durability().unwrap();
    assert_eq!(all.len(), 1 + POOL_MAX, "the writer and every reader");
    for d in all {
        assert!(d.is_durable(), "{d:?}");
    }
}

/// A COMMIT that fails for real: a deferred foreign key, checked by SQLite only at
/// COMMIT, that every claimed row violates (test-only tables and trigger on the writer's
/// own connection; nothing in the relay's code path is stubbed). Every statement of the
/// batch ran and said "won", yet none is durable: every one must fail (the relay answers
/// E905 and calls the core for none), and the ledger must hold none of them.
#[test]
fn a_commit_that_fails_fails_every_statement_of_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let l = Ledger::open(&path).unwrap().acting_as("relay");
    l.connection()
        .execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TEMP TABLE parent (id TEXT PRIMARY KEY);
             CREATE TEMP TABLE child (
                 id TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
             CREATE TEMP TRIGGER claim_violates_at_commit AFTER INSERT ON main.tx BEGIN
                 INSERT INTO child (id) VALUES (NEW.guid);
             END;",
        )
        .unwrap();
    let guids = ["G-C1", "G-C2", "G-C3"];
    let (jobs, answers): (Vec<_>, Vec<_>) = guids.iter().map(|g| claim(g)).unzip();

    let results = claims_of(&l, jobs, &answers);

    assert_eq!(results.len(), guids.len());
    for (g, r) in guids.iter().zip(&results) {
        match r {
            Err(LedgerError::Writer(msg)) => {
                assert!(msg.starts_with("transaction not committed: "), "{g}: {msg}");
                assert!(msg.contains("FOREIGN KEY"), "{g}: {msg}");
            }
            Err(e) => panic!("{g}: another error than the commit's: {e}"),
            Ok(_) => panic!("{g}: reported written although its COMMIT failed"),
        }
    }
    assert!(l.connection().is_autocommit(), "the batch was rolled back");
    let other = Ledger::open(&path).unwrap();
    assert_eq!(
        other.count_by_state().unwrap(),
        vec![],
        "no claim is durable"
    );
    for g in guids {
        assert!(
            other.history(g).unwrap().is_empty(),
            "{g}: no history either"
        );
    }
    assert_eq!(
        other
            .connection()
            .query_row("SELECT count(*) FROM tx_actor", [], |r| r.get::<_, i64>(0))
            .unwrap(),
        0,
        "no actor row is left behind"
    );
    // The writer's connection is usable again: the next batch commits.
    l.connection()
        .execute_batch("DROP TRIGGER temp.claim_violates_at_commit")
        .unwrap();
    let (jobs, answers): (Vec<_>, Vec<_>) = guids.iter().map(|g| claim(g)).unzip();
    let again = claims_of(&l, jobs, &answers);
    assert!(again.iter().all(Result::is_ok));
    assert_eq!(other.count_by_state().unwrap(), vec![(State::Sent, 3)]);
}

/// `/healthz`'s probe shares a batch with claims: its row into `tx` is rolled back to its
/// own savepoint, the claims beside it commit; a probe that fails (a `tx` trigger that
/// refuses it) fails alone, and the claims still commit.
#[test]
fn the_health_probe_leaves_the_claims_of_its_batch_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let l = Ledger::open(&path).unwrap().acting_as("relay");
    // A claim, the probe, a claim: one batch; the probe's result and the claims'.
    let batch = |first: &str, second: &str| {
        let ((a, a_won), (probe, probed), (b, b_won)) =
            (claim(first), touch_health(), claim(second));
        let claims = claims_of(&l, vec![a, probe, b], &[a_won, b_won]);
        (claims, probed.recv().unwrap())
    };
    let (claims, probed) = batch("G-H1", "G-H2");
    assert!(claims.iter().all(Result::is_ok) && probed.is_ok());

    l.connection()
        .execute_batch(&format!(
            "CREATE TEMP TRIGGER refuse_the_probe BEFORE INSERT ON main.tx \
             WHEN NEW.guid = '{HEALTH_PROBE_GUID}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        ))
        .unwrap();
    let (claims, probed) = batch("G-H3", "G-H4");
    assert!(claims[0].is_ok() && claims[1].is_ok());
    match probed {
        Err(e) => assert!(e.to_string().contains("refused"), "{e}"),
        Ok(_) => panic!("the refused probe reported healthy"),
    }

    let other = Ledger::open(&path).unwrap();
    assert_eq!(other.count_by_state().unwrap(), vec![(State::Sent, 4)]);
    assert!(other.get(HEALTH_PROBE_GUID).unwrap().is_none());
    assert!(other.history(HEALTH_PROBE_GUID).unwrap().is_empty());
    for g in ["G-H1", "G-H2", "G-H3", "G-H4"] {
        let h = other.history(g).unwrap();
        assert_eq!(h.len(), 1, "{g}: {h:?}");
        assert_eq!(h[0].who, "relay", "{g}: {h:?}");
    }
    assert!(other.read_health().unwrap().is_some());
}

/// Many threads submitting at once: each is answered with its own statement's result, after
/// the commit that holds it, and the writes share commits.
#[test]
fn concurrent_submitters_each_get_their_own_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let writer = std::sync::Arc::new(Writer::start(&path, "test").unwrap());
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let writer = std::sync::Arc::clone(&writer);
            std::thread::spawn(move || {
                (0..50)
                    .map(|n| {
                        // Every GUID twice: the first claim wins, the second finds the row.
                        let g = format!("G-{t}-{}", n / 2);
                        writer
                            .submit(move |l| l.claim_new(&g, "TRNF", g.as_bytes(), None))
                            .unwrap()
                    })
                    .collect::<Vec<bool>>()
            })
        })
        .collect();
    for t in threads {
        let won = t.join().unwrap();
        let want: Vec<bool> = (0..50).map(|n| n % 2 == 0).collect();
        assert_eq!(won, want);
    }
    drop(writer);
    let other = Ledger::open(&path).unwrap();
    assert_eq!(
        other.count_by_state().unwrap(),
        vec![(State::Sent, 16 * 25)]
    );
}

/// A statement that panics ends the writer thread: its submitter, and every one after it,
/// is told the writer stopped instead of waiting for ever.
#[test]
fn a_writer_that_died_answers_every_submitter() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Writer::start(&dir.path().join("l.db"), "test").unwrap();
    assert!(
        writer
            .submit(|l| l.claim_new("G-P1", "TRNF", b"x", None))
            .unwrap()
    );
    let died = writer.submit(|_| -> Result<()> { panic!("a statement that panics") });
    match died {
        Err(LedgerError::Writer(msg)) => assert!(msg.contains("stopped"), "{msg}"),
        other => panic!("{other:?}"),
    }
    let after = writer.submit(|l| l.claim_new("G-P2", "TRNF", b"x", None));
    assert!(matches!(after, Err(LedgerError::Writer(_))), "{after:?}");
}
