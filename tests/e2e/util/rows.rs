//! The ledger by hand, as an operator or another tool would touch it, in the backend's own
//! SQL: rows made by hand (`RowSpec`), every row in GUID order, and a row's writes held back
//! from outside (`WriteLock`).

use std::time::{Duration, Instant};

use ledger::store::InquiryRecord;
use ledger::{Row, State};
use rusqlite::OptionalExtension;
use testkit::TempLedger;
use testkit::temp_ledger::Backend;

use super::messages::guid_of;

/// A ledger row to insert by hand. Start from the state and the stored request
/// (`RowSpec::unknown(&m)`: UNKNOWN/E901, the GUID taken from `m`, attempts 1, written
/// now), or from a bare GUID (`RowSpec::new(guid, State::Done)`: no code, no request),
/// then change what differs: `.age(OLD)`, `.attempts(2)`, `.code("B001")`, `.request(…)`.
/// `RowSpec::bare(guid, state)` writes only the columns the contract requires.
#[derive(Clone, Debug)]
pub struct RowSpec {
    guid: String,
    state: State,
    rsp_code: Option<String>,
    request: Option<Vec<u8>>,
    /// `None`: the column is left out (its default, 0).
    attempts: Option<i64>,
    age_secs: u64,
}

impl RowSpec {
    /// A row for `guid` in `state`, without code or request, attempts 1, written now.
    pub fn new(guid: &str, state: State) -> RowSpec {
        RowSpec {
            guid: guid.to_string(),
            state,
            rsp_code: None,
            request: None,
            attempts: Some(1),
            age_secs: 0,
        }
    }

    /// A row with only guid, state and updated_at written, as the contract allows other
    /// tools to insert it (no tx_code, attempts 0).
    pub fn bare(guid: &str, state: State) -> RowSpec {
        RowSpec {
            attempts: None,
            ..RowSpec::new(guid, state)
        }
    }

    /// A row holding request message `m`, under `m`'s GUID.
    pub fn of(m: &[u8], state: State) -> RowSpec {
        RowSpec::new(&guid_of(m), state).request(m)
    }

    /// UNKNOWN/E901 holding `m`: a send whose outcome is unknown.
    pub fn unknown(m: &[u8]) -> RowSpec {
        RowSpec::of(m, State::Unknown).code("E901")
    }

    /// FAILED/E902 holding `m`: a send proven never to have left.
    pub fn failed(m: &[u8]) -> RowSpec {
        RowSpec::of(m, State::Failed).code("E902")
    }

    /// SENT holding `m`, no code: claimed, result not recorded.
    pub fn sent(m: &[u8]) -> RowSpec {
        RowSpec::of(m, State::Sent)
    }

    /// Stored under `guid` instead of its request's (a request for another GUID).
    pub fn guid(mut self, guid: &str) -> RowSpec {
        self.guid = guid.to_string();
        self
    }

    /// The result code (`None`: NULL).
    pub fn code<'a>(mut self, code: impl Into<Option<&'a str>>) -> RowSpec {
        self.rsp_code = code.into().map(str::to_string);
        self
    }

    /// The stored request, whatever its bytes (another GUID's request, junk).
    pub fn request(mut self, bytes: &[u8]) -> RowSpec {
        self.request = Some(bytes.to_vec());
        self
    }

    pub fn attempts(mut self, n: i64) -> RowSpec {
        self.attempts = Some(n);
        self
    }

    /// `updated_at` is `secs` seconds ago.
    pub fn age(mut self, secs: u64) -> RowSpec {
        self.age_secs = secs;
        self
    }

    /// Inserts the row (the ledger is created if missing).
    pub fn insert(&self, db: &TempLedger) {
        insert_all(db, [self]);
    }

    /// The columns written besides updated_at: guid, state and whatever is set (tx_code
    /// with a stored request, as the relay writes it).
    fn columns(&self) -> Vec<(&'static str, Value<'_>)> {
        let mut cols = vec![
            ("guid", Value::Text(&self.guid)),
            ("state", Value::Text(self.state.as_str())),
        ];
        if let Some(request) = &self.request {
            cols.push(("tx_code", Value::Text("TRNF")));
            cols.push(("request", Value::Bytes(request)));
        }
        if let Some(code) = &self.rsp_code {
            cols.push(("rsp_code", Value::Text(code)));
        }
        if let Some(n) = self.attempts {
            cols.push(("attempts", Value::Int(n)));
        }
        cols
    }
}

/// Inserts rows by hand, in one transaction (the ledger is created if missing).
pub fn insert_all<'a>(db: &TempLedger, rows: impl IntoIterator<Item = &'a RowSpec>) {
    db.create();
    let mut hand = Hand::open(db);
    hand.batch("BEGIN");
    for row in rows {
        hand.insert(row);
    }
    hand.batch("COMMIT");
}

/// A column's value in a row made by hand.
enum Value<'a> {
    Text(&'a str),
    Bytes(&'a [u8]),
    Int(i64),
}

/// A connection of the test's own to its ledger, speaking the backend's SQL.
enum Hand {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

impl Hand {
    fn open(db: &TempLedger) -> Hand {
        match db.backend() {
            Backend::Sqlite => {
                let c = rusqlite::Connection::open(db.path()).expect("open the ledger");
                c.busy_timeout(Duration::from_secs(5))
                    .expect("set a busy timeout");
                Hand::Sqlite(c)
            }
            Backend::Postgres => Hand::Postgres(db.pg_client()),
        }
    }

    fn batch(&mut self, sql: &str) {
        match self {
            Hand::Sqlite(c) => c.execute_batch(sql).map_err(|e| e.to_string()),
            Hand::Postgres(c) => c.batch_execute(sql).map_err(|e| e.to_string()),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// `INSERT INTO tx (…, updated_at) VALUES (…, <now minus the row's age>)`.
    fn insert(&mut self, row: &RowSpec) {
        let cols = row.columns();
        let names: Vec<&str> = cols.iter().map(|(name, _)| *name).collect();
        let age = cols.len() + 1;
        let done = match self {
            Hand::Sqlite(c) => {
                let marks: Vec<String> = (1..age).map(|i| format!("?{i}")).collect();
                let sql = format!(
                    "INSERT INTO tx ({}, updated_at) VALUES ({}, datetime('now', ?{age}))",
                    names.join(", "),
                    marks.join(", ")
                );
                use rusqlite::types::Value as V;
                let mut params: Vec<V> = cols
                    .iter()
                    .map(|(_, v)| match v {
                        Value::Text(s) => V::Text(s.to_string()),
                        Value::Bytes(b) => V::Blob(b.to_vec()),
                        Value::Int(n) => V::Integer(*n),
                    })
                    .collect();
                params.push(V::Text(format!("-{} seconds", row.age_secs)));
                c.execute(&sql, rusqlite::params_from_iter(params))
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            Hand::Postgres(c) => {
                let marks: Vec<String> = (1..age).map(|i| format!("${i}")).collect();
                let sql = format!(
                    "INSERT INTO tx ({}, updated_at) \
                     VALUES ({}, now() - make_interval(secs => ${age}))",
                    names.join(", "),
                    marks.join(", ")
                );
                type P = Box<dyn postgres::types::ToSql + Sync>;
                let mut params: Vec<P> = cols
                    .iter()
                    .map(|(_, v)| match v {
                        Value::Text(s) => Box::new(s.to_string()) as P,
                        Value::Bytes(b) => Box::new(b.to_vec()),
                        Value::Int(n) => Box::new(i32::try_from(*n).expect("attempts fit")),
                    })
                    .collect();
                params.push(Box::new(row.age_secs as f64));
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| p.as_ref()).collect();
                c.execute(&sql, &refs).map(drop).map_err(|e| e.to_string())
            }
        };
        done.unwrap_or_else(|e| panic!("inserting {row:?}: {e}"));
    }
}

/// `--db` values naming a ledger that no tool can open, with nothing else wrong, next to
/// `db` (on its backend): SQLite, a file in a folder that does not exist and a file that is
/// not a database; PostgreSQL, a port where nothing listens and a database that does not
/// exist on the test's server.
pub fn unusable_ledgers(db: &TempLedger) -> Vec<String> {
    match db.backend() {
        Backend::Sqlite => {
            let garbage = db.dir().join("not-a-ledger.db");
            std::fs::write(&garbage, vec![b'x'; 4096]).expect("write a file");
            vec![
                "/nonexistent-dir/x.db".into(),
                garbage.to_str().expect("UTF-8 temp path").into(),
            ]
        }
        Backend::Postgres => {
            let url: postgres::Config = db.arg().parse().expect("a PostgreSQL URL");
            let host = match &url.get_hosts()[0] {
                postgres::config::Host::Tcp(h) => h.clone(),
                other => panic!("a TCP host, not {other:?}"),
            };
            let user = url.get_user().unwrap_or("postgres");
            vec![
                format!(
                    "postgres://{user}@127.0.0.1:{}/ledger",
                    super::coresim::dead_port()
                ),
                format!(
                    "postgres://{user}@{host}:{}/no_such_ledger",
                    url.get_ports()[0]
                ),
            ]
        }
    }
}

/// Every row, in GUID order.
pub fn rows_by_guid(db: &TempLedger) -> Vec<Row> {
    let mut rows = db.rows();
    rows.sort_by(|a, b| a.guid.cmp(&b.guid));
    rows
}

/// The rows of `guids`, in that order (each must exist).
pub fn rows_of(db: &TempLedger, guids: &[&str]) -> Vec<Row> {
    guids
        .iter()
        .map(|g| db.row(g).unwrap_or_else(|| panic!("no row {g}")))
        .collect()
}

/// The writes of one row held back from outside until released, as another program's long
/// transaction would hold them: on SQLite by the ledger's write lock (`BEGIN IMMEDIATE`:
/// every writer waits, up to its busy timeout); on PostgreSQL by that row's lock (`SELECT
/// … FOR UPDATE`, or, while the row does not exist, an INSERT of it that is never
/// committed, which a claim of the GUID waits for). A row lock rather than `LOCK TABLE`, so
/// that tools can start meanwhile (applying the schema waits for a table lock; for that
/// uncommitted INSERT too, see `e2e_pg`'s `start_up`).
pub struct WriteLock(Hand);

impl WriteLock {
    pub fn take(db: &TempLedger, guid: &str) -> WriteLock {
        let mut hand = Hand::open(db);
        match &mut hand {
            Hand::Sqlite(c) => c
                .execute_batch("BEGIN IMMEDIATE")
                .expect("take the write lock"),
            Hand::Postgres(c) => {
                c.batch_execute("BEGIN").expect("begin");
                let locked = c
                    .query("SELECT 1 FROM tx WHERE guid = $1 FOR UPDATE", &[&guid])
                    .expect("lock the row");
                if locked.is_empty() {
                    c.execute(
                        "INSERT INTO tx (guid, state) VALUES ($1, 'RECEIVED')",
                        &[&guid],
                    )
                    .expect("hold back a claim of the GUID");
                }
            }
        }
        WriteLock(hand)
    }

    /// Lets the waiting writers through.
    pub fn release(mut self) {
        self.0.batch("ROLLBACK");
    }

    /// Releases the lock once no writer waits for it any more. On SQLite that is at once: a
    /// writer gives up within its own call. On PostgreSQL a statement whose client gave up
    /// (its deadline passed, or the process was killed) waits on at the server until its
    /// `lock_timeout`, and released earlier it would still take effect: this waits until
    /// the server has cancelled it.
    pub fn release_after_waiters_gave_up(mut self) {
        if let Hand::Postgres(c) = &mut self.0 {
            let limit = Duration::from_secs(20);
            let started = Instant::now();
            loop {
                let waiting: i64 = c
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))",
                        &[],
                    )
                    .and_then(|r| r.try_get(0))
                    .expect("count the sessions waiting for the lock");
                if waiting == 0 {
                    break;
                }
                assert!(
                    started.elapsed() < limit,
                    "{waiting} statement(s) still wait for the lock after {limit:?}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.release();
    }
}

/// Runs SQL by hand, as an operator would: `sqlite` on an SQLite ledger, `pg` on a
/// PostgreSQL one.
pub fn by_hand(db: &TempLedger, sqlite: &str, pg: &str) {
    let mut hand = Hand::open(db);
    match &hand {
        Hand::Sqlite(_) => hand.batch(sqlite),
        Hand::Postgres(_) => hand.batch(pg),
    }
}

/// Every failed-inquiry record (the side table `tx_inquiry`), by GUID.
pub fn inquiry_records(db: &TempLedger) -> Vec<InquiryRecord> {
    testkit::probes::inquiry_records(db.arg())
}

/// How many inquiries about `guid` have failed in a row (`None`: no record).
pub fn inquiry_failures(db: &TempLedger, guid: &str) -> Option<i64> {
    inquiry_records(db)
        .into_iter()
        .find(|r| r.guid == guid)
        .map(|r| r.failures)
}

/// Makes every failed GUID's next inquiry due now, instead of waiting out its backoff.
pub fn make_inquiries_due(db: &TempLedger) {
    by_hand(
        db,
        "UPDATE tx_inquiry SET next_at = datetime('now', '-1 seconds')",
        "UPDATE tx_inquiry SET next_at = now() - interval '1 second'",
    );
}

/// Seconds from now (the database's clock) until `guid`'s next inquiry is due (`None`: no
/// record).
pub fn inquiry_due_in(db: &TempLedger, guid: &str) -> Option<i64> {
    match Hand::open(db) {
        Hand::Sqlite(c) => c
            .query_row(
                "SELECT CAST(strftime('%s', next_at) AS INTEGER) - CAST(strftime('%s', 'now') AS INTEGER) \
                 FROM tx_inquiry WHERE guid = ?1",
                [guid],
                |r| r.get(0),
            )
            .optional()
            .expect("read tx_inquiry"),
        Hand::Postgres(mut c) => c
            .query_opt(
                "SELECT extract(epoch FROM next_at - now())::bigint FROM tx_inquiry WHERE guid = $1",
                &[&guid],
            )
            .expect("read tx_inquiry")
            .map(|r| r.get(0)),
    }
}

/// Asserts that `guid`'s next inquiry is due in about `secs` seconds.
#[track_caller]
pub fn assert_due_in(db: &TempLedger, guid: &str, secs: i64) {
    let got = inquiry_due_in(db, guid).unwrap_or_else(|| panic!("{guid}: no record"));
    assert!(
        (secs - 5..=secs).contains(&got),
        "{guid}: next inquiry in {got} s, want about {secs} s"
    );
}

/// Runs `sql` (bulk inserts, e.g. a million rows from a recursive CTE) on an SQLite ledger in
/// one transaction with the history's insert trigger dropped, then put back as it was: a
/// ledger of production size is built in seconds, with no history rows for it.
pub fn bulk_insert_without_history(db: &TempLedger, sql: &str) {
    let c = rusqlite::Connection::open(db.path()).expect("open the ledger");
    let trigger: String = c
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' \
             AND name = 'tx_history_on_insert'",
            [],
            |r| r.get(0),
        )
        .expect("the history's insert trigger");
    let sql = sql.trim_end().trim_end_matches(';');
    c.execute_batch(&format!(
        "BEGIN; DROP TRIGGER tx_history_on_insert; {sql}; {trigger}; COMMIT;"
    ))
    .expect("the bulk insert");
}
