//! What only a PostgreSQL session has: `synchronous_commit` forced to a durable value whatever
//! the role, the database or the server says; the pool's timeouts still in place after the
//! schema was applied; the schema's advisory lock waited for as long as applying the schema
//! may take; `TRUNCATE tx` refused, and a ledger of schema version 1 upgraded. Each test that
//! changes server settings starts a server of its own.

use ledger::store::prelude::*;

use std::thread;
use std::time::{Duration, Instant};

use ledger::db::PG_OP_DEADLINE;
use ledger::postgres::{PgStore, SCHEMA_LOCK, Settings};
use ledger::state::{Change, State};
use ledger::{Access, Db, Durability};
use testkit::pg::Server;

/// A store on `url` with the pool's usual deadline and at most `max` connections.
fn open(url: &str, max: usize) -> ledger::error::Result<PgStore> {
    let settings = Settings {
        max,
        op_deadline: PG_OP_DEADLINE,
        read_only: false,
        application_name: "txrelay-suite".into(),
        who: "suite".into(),
    };
    PgStore::open(url.parse().expect("a PostgreSQL URL"), settings)
}

/// Every connection `url`'s stores write or read with says `synchronous_commit = want`, both
/// as the pool read it back at set-up and as the live session shows it.
fn assert_sessions_commit(url: &str, want: &str, what: &str) {
    let db: Db = url.parse().expect("a PostgreSQL URL");
    for access in [Access::Relay, Access::Tool, Access::ReadOnly] {
        let store = db
            .open(access, "suite")
            .unwrap_or_else(|e| panic!("{what}, {access:?}: {e}"));
        let all = store.durability().expect("durability");
        assert!(!all.is_empty(), "{what}");
        for d in all {
            assert_eq!(
                d,
                Durability::Postgres {
                    synchronous_commit: want.into()
                },
                "{what}, {access:?}"
            );
            assert!(d.is_durable(), "{what}: {d:?}");
        }
    }
    let store = open(url, 1).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        store.session_setting("synchronous_commit").unwrap(),
        want,
        "{what}: the live session"
    );
}

/// Issue 23.2: a role, a database or a server whose default is `off`, `local` or
/// `remote_write` (none waits for a synchronous standby, `off` not even for the local disk)
/// still gets sessions that commit `on`; a server that says `remote_apply` (stronger) keeps it.
#[test]
fn every_session_commits_on_whatever_the_role_database_or_server_says() {
    let Some(server) = Server::own_or_skip(None) else {
        return;
    };
    for weak in ["off", "local", "remote_write"] {
        let role = format!("r_{weak}");
        server
            .exec(&format!(
                "CREATE ROLE {role} LOGIN SUPERUSER; \
                 ALTER ROLE {role} SET synchronous_commit = {weak}"
            ))
            .unwrap();
        let by_role =
            server
                .fresh_db()
                .replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
        assert_sessions_commit(&by_role, "on", &format!("role default {weak}"));

        let dbname = format!("d_{weak}");
        server
            .exec(&format!("CREATE DATABASE {dbname}"))
            .and_then(|_| {
                server.exec(&format!(
                    "ALTER DATABASE {dbname} SET synchronous_commit = {weak}"
                ))
            })
            .unwrap();
        let by_db = server.url_as("postgres", &dbname);
        assert_sessions_commit(&by_db, "on", &format!("database default {weak}"));

        server
            .set_server_default("synchronous_commit", weak)
            .unwrap();
        let by_server = server.fresh_db();
        assert_sessions_commit(&by_server, "on", &format!("server default {weak}"));
    }
    server
        .set_server_default("synchronous_commit", "remote_apply")
        .unwrap();
    assert_sessions_commit(
        &server.fresh_db(),
        "remote_apply",
        "server default remote_apply",
    );
}

/// Issue 16.11: applying the schema lifts the session's timeouts for as long as it may take;
/// afterwards the pooled session has the pool's own again (the operation deadline as the
/// server-side backstop), not 0 nor the server's default.
#[test]
fn after_applying_the_schema_the_session_keeps_the_pools_timeouts() {
    let Some(server) = testkit::pg::shared() else {
        return;
    };
    // One connection: the one that applied the schema is the one asked.
    let store = open(&server.fresh_db(), 1).expect("open");
    let ms = PG_OP_DEADLINE.as_millis().to_string();
    for name in ["statement_timeout", "lock_timeout"] {
        assert_eq!(store.session_setting(name).unwrap(), ms, "{name}");
    }
}

/// Issue 16.11: a tool starting while another session holds the schema's advisory lock
/// longer than one operation's lock timeout (5 s), but less than applying the schema may
/// take (30 s), waits for it and starts.
#[test]
fn a_tool_waits_for_the_schema_lock_as_long_as_applying_the_schema_may_take() {
    let Some(server) = Server::own_or_skip(None) else {
        return;
    };
    let url = server.fresh_db();
    let mut holder = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    holder
        .execute("SELECT pg_advisory_lock($1)", &[&SCHEMA_LOCK])
        .unwrap();
    let hold = PG_OP_DEADLINE + Duration::from_secs(2);
    let (opened, waited) = thread::scope(|s| {
        let tool = s.spawn(|| {
            let started = Instant::now();
            let store = open(&url, 1);
            (store, started.elapsed())
        });
        // Once the tool waits on the lock, hold it past the lock timeout.
        let mut watcher = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let limit = Instant::now() + Duration::from_secs(10);
        while !watcher
            .query_one(
                "SELECT count(*) > 0 FROM pg_stat_activity \
                 WHERE application_name = 'txrelay-suite' AND wait_event_type = 'Lock'",
                &[],
            )
            .unwrap()
            .get::<_, bool>(0)
        {
            assert!(Instant::now() < limit, "the tool never waited on the lock");
            thread::sleep(Duration::from_millis(20));
        }
        thread::sleep(hold);
        holder
            .execute("SELECT pg_advisory_unlock($1)", &[&SCHEMA_LOCK])
            .unwrap();
        tool.join().unwrap()
    });
    let store = opened.unwrap_or_else(|e| panic!("the tool gave up after {waited:?}: {e}"));
    assert!(waited >= hold, "waited only {waited:?}");
    assert!(
        store.read("G-none").unwrap().is_none(),
        "the schema is there"
    );
}

/// Issue 16.12: `TRUNCATE tx` would delete every row without a line of history (it fires no
/// row trigger): the schema refuses it. A ledger of schema version 1 (before that trigger)
/// gets it from the next tool that opens it.
#[test]
fn truncate_tx_is_refused_and_a_version_1_ledger_gets_the_refusal() {
    let Some(server) = testkit::pg::shared() else {
        return;
    };
    let url = server.fresh_db();
    let store = open(&url, 1).expect("open");
    assert!(store.claim_new("G-T", "TRNF", b"x", None).unwrap());
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let refused = |sql: &mut postgres::Client| {
        let e = sql
            .batch_execute("TRUNCATE tx")
            .expect_err("TRUNCATE tx went through");
        let msg = e.as_db_error().map(|d| d.message().to_string());
        assert!(
            msg.as_deref()
                .is_some_and(|m| m.starts_with("TRUNCATE tx is refused")),
            "{e:?}"
        );
        let n: i64 = sql
            .query_one("SELECT count(*) FROM tx", &[])
            .unwrap()
            .get(0);
        assert_eq!(n, 1, "the rows are gone");
    };
    refused(&mut sql);

    // As a ledger of version 1 was: no such trigger, version 1 recorded.
    sql.batch_execute(
        "DROP TRIGGER tx_is_never_truncated ON tx; \
         DELETE FROM ledger_schema; INSERT INTO ledger_schema (version) VALUES (1)",
    )
    .unwrap();
    drop(open(&url, 1).expect("a tool opens the version 1 ledger"));
    refused(&mut sql);
    let v: i32 = sql
        .query_one("SELECT max(version) FROM ledger_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(v, ledger::postgres::SCHEMA_VERSION);
    assert!(store.read("G-T").unwrap().is_some());
}

/// Contract §8 on an existing PostgreSQL ledger: one at schema version 2 (no `channel`) is
/// refused by a read-only open with the reason (inspect never upgrades), and upgraded in
/// place by the next tool: rows kept with no channel, new claims and history name theirs.
#[test]
fn a_version_2_ledger_is_upgraded_in_place_with_the_channel_column() {
    let Some(server) = testkit::pg::shared() else {
        return;
    };
    let url = server.fresh_db();
    let store = open(&url, 1).expect("open");
    assert!(store.claim_new("G-OLD", "TRNF", b"x", None).unwrap());
    drop(store);
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // As a ledger of version 2 was: no channel columns, version 2 recorded.
    sql.batch_execute(
        "ALTER TABLE tx DROP COLUMN channel; ALTER TABLE tx_history DROP COLUMN channel; \
         DELETE FROM ledger_schema; INSERT INTO ledger_schema (version) VALUES (2)",
    )
    .unwrap();
    let read_only = PgStore::open(
        url.parse().unwrap(),
        Settings {
            max: 1,
            op_deadline: PG_OP_DEADLINE,
            read_only: true,
            application_name: "txrelay-suite".into(),
            who: "inspect".into(),
        },
    );
    let e = read_only
        .err()
        .expect("a read-only open of version 2 is refused");
    assert!(e.to_string().contains("schema is version 2"), "{e}");

    let store = open(&url, 1).expect("a tool opens the version 2 ledger");
    assert_eq!(store.read("G-OLD").unwrap().unwrap().channel, None);
    assert!(
        store
            .claim_new("G-NEW", "TRNF", b"x", Some("atm-2"))
            .unwrap()
    );
    assert_eq!(
        store.read("G-NEW").unwrap().unwrap().channel.as_deref(),
        Some("atm-2")
    );
    assert_eq!(
        store.history("G-NEW").unwrap()[0].channel.as_deref(),
        Some("atm-2")
    );
    let v: i32 = sql
        .query_one("SELECT max(version) FROM ledger_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(v, ledger::postgres::SCHEMA_VERSION);
}

/// Issue 19.3: a ledger a newer build wrote (`ledger_schema` above this build's version) is
/// refused by every open, read-only included, with one line naming both versions, and left
/// as it is.
#[test]
fn a_ledger_from_a_newer_build_is_refused_and_left_as_it_is() {
    let Some(server) = testkit::pg::shared() else {
        return;
    };
    let url = server.fresh_db();
    drop(open(&url, 1).expect("open"));
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    sql.batch_execute("INSERT INTO ledger_schema (version) VALUES (99)")
        .unwrap();
    let db: Db = url.parse().expect("a PostgreSQL URL");
    for access in [Access::Relay, Access::Tool, Access::ReadOnly] {
        match db.open(access, "suite").err() {
            Some(
                e @ ledger::error::LedgerError::NewerSchema {
                    found: 99, known, ..
                },
            ) => {
                assert_eq!(known, i64::from(ledger::postgres::SCHEMA_VERSION));
                let line = e.to_string();
                assert!(line.contains("schema is version 99"), "{line}");
                assert_eq!(line.lines().count(), 1, "{line}");
            }
            other => panic!("{access:?}: {other:?}"),
        }
    }
    let v: i32 = sql
        .query_one("SELECT max(version) FROM ledger_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(v, 99, "left as it is");
}

/// `column` summed over the server's statements so far whose text starts with `prefix`,
/// from `pg_stat_statements` (updated as each statement ends).
fn statements(url: &str, column: &str, prefix: &str) -> i64 {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.query_one(
        &format!(
            "SELECT coalesce(sum({column}), 0)::int8 FROM public.pg_stat_statements \
             WHERE starts_with(query, $1)"
        ),
        &[&prefix],
    )
    .unwrap()
    .get(0)
}

/// The start of the results statement's text, and of the claims statement's.
const RESULTS: &str = "UPDATE tx SET state = v.to_state";
const CLAIMS: &str = "INSERT INTO tx (guid, tx_code, state, request, attempts";

/// A server of its own with `pg_stat_statements` counting plans, and a fresh database on it.
fn counting_statements() -> Option<(Server, String)> {
    let setup = testkit::pg::Setup {
        settings: vec![
            (
                "shared_preload_libraries".into(),
                "pg_stat_statements".into(),
            ),
            ("pg_stat_statements.track_planning".into(), "on".into()),
        ],
        ..Default::default()
    };
    let server = Server::own_or_skip(Some(&setup))?;
    server.exec("CREATE EXTENSION pg_stat_statements").unwrap();
    let url = server.fresh_db();
    Some((server, url))
}

/// Claims `guid` and records its booking, each as a batch of one.
fn finish(store: &PgStore, guid: &str) {
    assert!(store.claim_new(guid, "TRNF", b"x", None).unwrap());
    let done = Change::new(
        guid,
        State::Sent,
        Some(1),
        State::Done,
        *b"0000",
        b"r".to_vec(),
    );
    assert!(store.transition(&done).unwrap());
}

/// Found by the benchmark (issue 22): a plan cached on a new, nearly empty ledger (a
/// sequential scan of `tx` is the cheapest way to find a row there) would scan the whole
/// table for every result once the table has grown, until autovacuum's next ANALYZE: a relay
/// started on a fresh ledger slowed down with every row. The batch writers plan once, on the
/// empty table, and their plan must still find each row through the primary key.
#[test]
fn a_result_on_a_grown_table_reads_a_few_blocks_not_the_table() {
    let Some((_server, url)) = counting_statements() else {
        return;
    };
    let store = open(&url, 1).expect("open");
    // More results than PostgreSQL's five custom plans before it may settle on a generic one.
    for i in 0..10 {
        finish(&store, &format!("G-PLAN-{i}"));
    }
    // The table grows (other relays, a day's traffic): 20,000 rows, in hundreds of blocks.
    testkit::pg::exec_on(
        &url,
        "INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts, updated_at) \
         SELECT 'G-BULK-' || i, 'TRNF', 'DONE', '0000', '\\x00', '\\x00', 1, now() \
         FROM generate_series(1, 20000) i",
    )
    .unwrap();
    let blocks = || statements(&url, "shared_blks_hit + shared_blks_read", RESULTS);
    let before = blocks();
    finish(&store, "G-PLAN-AFTER");
    let used = blocks() - before;
    assert!(
        used < 100,
        "one result read {used} blocks: the whole table, not its row through the index"
    );
}

/// Issue 22: planning a batch statement cost the server more than running it, once per
/// batch. The claims and results statements are planned once per session of the batch
/// writers (at most four sessions), however many batches they run.
#[test]
fn claims_and_results_are_planned_once_per_session_not_per_batch() {
    let Some((_server, url)) = counting_statements() else {
        return;
    };
    let store = open(&url, 1).expect("open");
    for i in 0..30 {
        finish(&store, &format!("G-ONCE-{i}"));
    }
    for (what, prefix) in [("claims", CLAIMS), ("results", RESULTS)] {
        let (calls, plans) = (
            statements(&url, "calls", prefix),
            statements(&url, "plans", prefix),
        );
        assert_eq!(calls, 30, "{what}: one statement per batch");
        assert!(
            plans <= 4,
            "{what}: planned {plans} times for {calls} batches"
        );
    }
}
