//! The SQLite ledger's own tests: opening, pragmas, the schema, reading rows made by hand.

use super::*;

fn temp() -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().unwrap();
    let l = Ledger::open(&dir.path().join("l.db")).unwrap();
    (dir, l)
}

#[test]
fn an_sqlite_uri_is_refused_as_a_ledger_path() {
    let dir = tempfile::tempdir().unwrap();
    for db in [
        "file:l.db?nolock=1",
        "file:l.db?immutable=1",
        "file:l.db?vfs=unix-none",
    ] {
        let p = dir.path().join(db);
        // Relative, as an operator would type it; joined paths keep the prefix.
        for path in [Path::new(db), p.as_path()] {
            let e = Ledger::open(path).err();
            if path.is_relative() {
                assert!(matches!(e, Some(LedgerError::NotAPath(_))), "{db}: {e:?}");
            }
        }
        assert!(matches!(
            Ledger::open_existing(Path::new(db)).err(),
            Some(LedgerError::NotAPath(_))
        ));
    }
}

#[test]
fn read_only_open_changes_nothing_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hand.db");
    {
        // A ledger made by hand from the contract's columns: rollback journal, no index,
        // user_version 0.
        let c = Connection::open(&p).unwrap();
        c.execute_batch(
            "CREATE TABLE tx (guid TEXT PRIMARY KEY, tx_code TEXT, state TEXT NOT NULL,
             rsp_code TEXT, request BLOB, response BLOB, attempts INTEGER NOT NULL DEFAULT 0,
             updated_at TEXT NOT NULL DEFAULT (datetime('now')));
             INSERT INTO tx (guid, state) VALUES ('H', 'UNKNOWN');",
        )
        .unwrap();
    }
    let before = std::fs::read(&p).unwrap();
    let l = Ledger::open_read_only(&p).unwrap();
    assert_eq!(l.get("H").unwrap().unwrap().state, State::Unknown);
    assert_eq!(l.count_by_state().unwrap(), vec![(State::Unknown, 1)]);
    assert!(l.claim_new("G", "TRNF", b"x", None).is_err(), "read-only");
    drop(l);
    assert_eq!(std::fs::read(&p).unwrap(), before, "file unchanged");
    assert!(
        !dir.path().join("hand.db-wal").exists(),
        "not switched to WAL"
    );
}

/// The batch tools (resolve, reprocess, purge) open the ledger with `open_existing`: their
/// writes must be as durable as the relay's.
#[test]
fn every_batch_tool_connection_is_wal_and_full() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.db");
    drop(Ledger::open(&p).unwrap());
    let d = Ledger::open_existing(&p).unwrap().durability().unwrap();
    assert!(d.is_durable(), "{d:?}");
    assert!(
        matches!(d, Durability::Sqlite { synchronous: 2, .. }),
        "FULL, not NORMAL: {d:?}"
    );
}

#[test]
fn state_round_trips() {
    for s in State::ALL {
        assert_eq!(s.as_str().parse::<State>().unwrap(), s);
    }
    assert!("DONEX".parse::<State>().is_err());
}

#[test]
fn a_ledger_of_schema_version_1_gets_the_health_table() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.db");
    migrations::create_at_version(&Connection::open(&p).unwrap(), 1).unwrap();
    let l = Ledger::open(&p).unwrap();
    l.touch_health().unwrap();
    assert!(l.read_health().unwrap().is_some());
}

#[test]
fn open_sets_wal_full_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.db");
    let a = Ledger::open(&p).unwrap();
    let b = Ledger::open(&p).unwrap();
    for l in [&a, &b] {
        let mode: String = l
            .connection()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }
    // The schema text itself is harmless twice.
    a.connection().execute_batch(SCHEMA).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn hand_made_rows_read_leniently() {
    let (_d, l) = temp();
    l.connection()
        .execute_batch(
            "INSERT INTO tx (guid, state, updated_at) VALUES ('H','DONE','2020-01-01 00:00:00');
             INSERT INTO tx (guid, state, request, attempts) VALUES ('T','FAILED','text', 'x');",
        )
        .unwrap();
    let h = l.get("H").unwrap().unwrap();
    assert_eq!((h.request, h.response, h.rsp_code), (None, None, None));
    let t = l.get("T").unwrap().unwrap();
    assert_eq!(t.request.as_deref(), Some(&b"text"[..]));
    assert_eq!(t.attempts, None);
}

/// Contract §8 on an existing ledger: a file from before `channel` (version 5: the tables
/// without the column, the history triggers of then) is read as it is by `inspect` (the
/// column shows as NULL), and upgraded in place by the next tool that opens it: its rows are
/// kept with no channel, new claims name theirs, the history records them.
#[test]
fn a_version_5_ledger_is_read_as_it_is_and_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v5.db");
    {
        let c = Connection::open(&p).unwrap();
        migrations::create_at_version(&c, 5).unwrap();
        c.execute_batch(
            "INSERT INTO tx (guid, tx_code, state, request, attempts)
                 VALUES ('OLD', 'TRNF', 'FAILED', x'71', 1);",
        )
        .unwrap();
    }
    let ro = Ledger::open_read_only(&p).unwrap();
    assert_eq!(ro.get("OLD").unwrap().unwrap().channel, None);
    assert_eq!(ro.all_rows().unwrap().len(), 1);
    assert_eq!(ro.history("OLD").unwrap()[0].channel, None);
    drop(ro);

    let l = Ledger::open(&p).unwrap();
    let version: i64 = l
        .connection()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(
        l.get("OLD").unwrap().unwrap().channel,
        None,
        "kept, no channel"
    );
    assert_eq!(
        l.reclaim_failed("OLD", b"q", Some("atm-1")).unwrap(),
        Some(2)
    );
    assert!(l.claim_new("NEW", "TRNF", b"q", Some("atm-2")).unwrap());
    assert_eq!(
        l.get("OLD").unwrap().unwrap().channel.as_deref(),
        Some("atm-1")
    );
    let h = l.history("OLD").unwrap();
    assert_eq!(h.last().unwrap().channel.as_deref(), Some("atm-1"), "{h:?}");
    assert_eq!(
        l.history("NEW").unwrap()[0].channel.as_deref(),
        Some("atm-2")
    );
    drop(l);
    Ledger::open(&p).expect("opened again: the upgrade is not repeated");
}

#[test]
fn a_file_from_a_newer_build_is_refused_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("newer.db");
    drop(Ledger::open(&p).unwrap());
    Connection::open(&p)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let refused = |e: Option<LedgerError>| match e {
        Some(
            e @ LedgerError::NewerSchema {
                found: 99,
                known: SCHEMA_VERSION,
                ..
            },
        ) => {
            let line = e.to_string();
            assert!(line.contains("version 99") && line.contains(&p.display().to_string()));
            assert_eq!(line.lines().count(), 1, "{line}");
        }
        other => panic!("{other:?}"),
    };
    refused(Ledger::open(&p).err());
    refused(Ledger::open_existing(&p).err());
    refused(Ledger::open_read_only(&p).err());
    let version: i64 = Connection::open(&p)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 99, "not downgraded");
}

#[test]
fn pages_by_keyset_give_every_row_once_and_counts_count_them_all() {
    use crate::page::PageQuery;
    use crate::store::prelude::*;

    let (_dir, l) = temp();
    // Ties of updated_at within a state and across states; an old row; E902 rows by attempt.
    l.conn
        .execute_batch(
            "INSERT INTO tx (guid, state, rsp_code, attempts, updated_at) VALUES
             ('B', 'DONE', '0000', 1, '2026-01-01 00:00:01'),
             ('A', 'DONE', '0000', 1, '2026-01-01 00:00:01'),
             ('C', 'FAILED', 'E902', 3, '2026-01-01 00:00:01'),
             ('D', 'DONE', '0000', 1, '2026-01-01 00:00:02'),
             ('E', 'FAILED', 'E902', 1, '2026-01-01 00:00:00'),
             ('F', 'UNKNOWN', 'E901', 1, '2025-01-01 00:00:00'),
             ('G', 'FAILED', 'E902', 5, '2026-01-01 00:00:03');",
        )
        .unwrap();
    let store = std::sync::Mutex::new(l);
    let mut q = PageQuery {
        state: None,
        older_than_secs: None,
        after: None,
        limit: 2,
    };
    let mut seen = Vec::new();
    loop {
        let p = store.page(&q).unwrap();
        assert!(p.rows.len() <= 2);
        seen.extend(p.rows.into_iter().map(|r| r.guid));
        match p.next {
            Some(c) => q.after = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ["F", "E", "A", "B", "C", "D", "G"]);

    q.state = Some(State::Done);
    q.after = None;
    let p = store.page(&q).unwrap();
    let guids: Vec<&str> = p.rows.iter().map(|r| r.guid.as_str()).collect();
    assert_eq!(guids, ["A", "B"]);
    let next = p.next.expect("D follows");
    assert_eq!(
        (next.at.as_str(), next.guid.as_str()),
        ("2026-01-01 00:00:01", "B")
    );
    q.after = Some(next);
    let p = store.page(&q).unwrap();
    assert_eq!(
        (p.rows.len(), &p.rows[0].guid, p.next),
        (1, &"D".to_string(), None)
    );

    // Ages by the database's clock: a row of 2025 is older than a day, not than a century.
    assert_eq!(store.count_aged(State::Unknown, Some(86_400)).unwrap(), 1);
    assert_eq!(
        store
            .count_aged(State::Unknown, Some(36_500 * 86_400))
            .unwrap(),
        0
    );
    assert_eq!(store.count_aged(State::Failed, None).unwrap(), 3);

    let capped = store.at_attempt_cap(3, 1).unwrap();
    assert_eq!(capped.total, 2);
    assert_eq!(
        capped
            .first
            .iter()
            .map(|r| r.guid.as_str())
            .collect::<Vec<_>>(),
        ["C"]
    );
    assert!(
        store
            .row_age_secs("F")
            .unwrap()
            .is_some_and(|a| a > 86_400.0)
    );
    assert_eq!(store.row_age_secs("nope").unwrap(), None);
    for _ in 0..3 {
        store.record_inquiry_failure("F", "down", 60).unwrap();
    }
    let given_up = store.needs_operator_first(3, 0).unwrap();
    assert_eq!((given_up.total, given_up.first.len()), (1, 0));
    assert_eq!(
        store.inquiry_record("F").unwrap().map(|r| r.failures),
        Some(3)
    );
    assert_eq!(store.inquiry_record("A").unwrap(), None);
}
