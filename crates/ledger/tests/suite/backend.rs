//! A ledger of each kind for one test, and rows made by hand the way an operator or another
//! tool would make them.

use std::sync::Arc;

use ledger::{Access, Db, Store};

pub struct Backend {
    pub db: Db,
    /// What `--db` would say.
    pub arg: String,
    _dir: Option<tempfile::TempDir>,
}

/// A row made by hand; `None` columns are left to their defaults (NULL, attempts 0).
pub struct Hand<'a> {
    pub guid: &'a str,
    pub state: &'a str,
    pub rsp_code: Option<&'a str>,
    pub request: Option<&'a [u8]>,
    pub attempts: Option<i64>,
    pub age_secs: u64,
}

impl Backend {
    pub fn sqlite() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.db");
        let arg = path.to_str().unwrap().to_string();
        let b = Backend {
            db: Db::Sqlite(path),
            arg,
            _dir: Some(dir),
        };
        drop(b.open(Access::Relay)); // creates the file and its schema
        b
    }

    pub fn postgres() -> Option<Backend> {
        Backend::postgres_with("")
    }

    /// PostgreSQL with every transaction SERIALIZABLE (`default_transaction_isolation`, as
    /// the distributed SQL engines run): the ledger's statements must hold under it too.
    pub fn postgres_serializable() -> Option<Backend> {
        let b = Backend::postgres_with("%20-c%20default_transaction_isolation%3Dserializable")?;
        let mut c = postgres::Client::connect(&b.arg, postgres::NoTls).unwrap();
        let level: String = c
            .query_one("SHOW transaction_isolation", &[])
            .unwrap()
            .get(0);
        assert_eq!(level, "serializable", "{}", b.arg);
        Some(b)
    }

    /// A fresh schema on the shared server, `options` (URL-encoded) added to its session
    /// options.
    fn postgres_with(options: &str) -> Option<Backend> {
        let server = testkit::pg::shared()?;
        let arg = server.fresh_db() + options;
        let b = Backend {
            db: arg.parse().unwrap(),
            arg,
            _dir: None,
        };
        drop(b.open(Access::Relay)); // creates the schema
        Some(b)
    }

    pub fn open(&self, access: Access) -> Arc<dyn Store> {
        self.db.open(access, "suite").unwrap()
    }

    /// Who this process's stores act as (contract §12): the login user on SQLite, the URL's
    /// role on PostgreSQL.
    pub fn me(&self) -> String {
        match &self.db {
            Db::Sqlite(_) => ledger::identity::operator(),
            Db::Postgres(_) => postgres::Client::connect(&self.arg, postgres::NoTls)
                .unwrap()
                .query_one("SELECT session_user::text", &[])
                .unwrap()
                .get(0),
        }
    }

    /// PostgreSQL: the tools' store, logged in as a role of its own (not a superuser, with
    /// an operator's rights on this test's schema), and that role's name.
    pub fn as_other_role(&self) -> (Arc<dyn Store>, String) {
        let (role, url) = testkit::second_person::postgres_role(&self.arg);
        let db: Db = url.parse().unwrap();
        (db.open(Access::Tool, "suite").unwrap(), role)
    }

    /// Every failed-inquiry record, by GUID, read with a connection of the test's own.
    pub fn inquiry_records(&self) -> Vec<ledger::store::InquiryRecord> {
        testkit::probes::inquiry_records(&self.arg)
    }

    /// The store the batch tools use.
    pub fn tool(&self) -> Arc<dyn Store> {
        self.open(Access::Tool)
    }

    /// Inserts rows by hand.
    pub fn put(&self, rows: &[Hand<'_>]) {
        for r in rows {
            match &self.db {
                Db::Sqlite(path) => {
                    let c = rusqlite::Connection::open(path).unwrap();
                    c.execute(
                        "INSERT INTO tx (guid, tx_code, state, rsp_code, request, attempts, updated_at) \
                         VALUES (?1, 'TRNF', ?2, ?3, ?4, coalesce(?5, 0), datetime('now', ?6))",
                        rusqlite::params![
                            r.guid,
                            r.state,
                            r.rsp_code,
                            r.request,
                            r.attempts,
                            format!("-{} seconds", r.age_secs)
                        ],
                    )
                    .unwrap();
                }
                Db::Postgres(_) => {
                    let mut c = postgres::Client::connect(&self.arg, postgres::NoTls).unwrap();
                    c.execute(
                        "INSERT INTO tx (guid, tx_code, state, rsp_code, request, attempts, updated_at) \
                         VALUES ($1, 'TRNF', $2, $3, $4, coalesce($5, 0), \
                         now() - make_interval(secs => $6))",
                        &[
                            &r.guid,
                            &r.state,
                            &r.rsp_code,
                            &r.request,
                            &r.attempts.map(|a| a as i32),
                            &(r.age_secs as f64),
                        ],
                    )
                    .unwrap();
                }
            }
        }
    }

    /// Runs one statement by hand, as an operator in sqlite3 or psql would (no `txrelay.who`,
    /// no actor): the rows it changed. `sql` must be valid in both dialects.
    pub fn by_hand(&self, sql: &str) -> Result<u64, String> {
        match &self.db {
            Db::Sqlite(path) => rusqlite::Connection::open(path)
                .and_then(|c| c.execute(sql, []))
                .map(|n| n as u64)
                .map_err(|e| e.to_string()),
            Db::Postgres(_) => postgres::Client::connect(&self.arg, postgres::NoTls)
                .and_then(|mut c| c.execute(sql, &[]))
                .map_err(|e| {
                    e.as_db_error()
                        .map_or(e.to_string(), |d| d.message().to_string())
                }),
        }
    }

    /// Rows of history in the whole ledger.
    pub fn history_count(&self) -> u64 {
        match &self.db {
            Db::Sqlite(path) => rusqlite::Connection::open(path)
                .unwrap()
                .query_row("SELECT count(*) FROM tx_history", [], |r| {
                    r.get::<_, i64>(0)
                })
                .unwrap() as u64,
            Db::Postgres(_) => postgres::Client::connect(&self.arg, postgres::NoTls)
                .unwrap()
                .query_one("SELECT count(*) FROM tx_history", &[])
                .unwrap()
                .get::<_, i64>(0) as u64,
        }
    }

    /// A history row `days` old, made by hand (inserting history is allowed; updating it
    /// is not).
    pub fn old_history(&self, guid: &str, days: u64) {
        let sql = match &self.db {
            Db::Sqlite(_) => format!(
                "INSERT INTO tx_history (guid, to_state, who, at) VALUES ('{guid}', 'DONE', 'sql', \
                 strftime('%Y-%m-%d %H:%M:%f', 'now', '-{days} days'))"
            ),
            Db::Postgres(_) => format!(
                "INSERT INTO tx_history (guid, to_state, who, at) VALUES ('{guid}', 'DONE', 'sql', \
                 now() - make_interval(days => {days}))"
            ),
        };
        self.by_hand(&sql).unwrap();
    }

    /// Runs SQL by hand: `sqlite` on an SQLite ledger, `pg` on a PostgreSQL one.
    pub fn exec(&self, sqlite: &str, pg: &str) {
        match &self.db {
            Db::Sqlite(path) => rusqlite::Connection::open(path)
                .unwrap()
                .execute_batch(sqlite)
                .unwrap(),
            Db::Postgres(_) => postgres::Client::connect(&self.arg, postgres::NoTls)
                .unwrap()
                .batch_execute(pg)
                .unwrap(),
        }
    }

    /// Makes every failed GUID's next inquiry due now.
    pub fn make_inquiries_due(&self) {
        self.exec(
            "UPDATE tx_inquiry SET next_at = datetime('now', '-1 seconds')",
            "UPDATE tx_inquiry SET next_at = now() - interval '1 second'",
        );
    }

    /// A row with only the columns the contract requires (guid, state, updated_at).
    pub fn put_bare(&self, guid: &str, state: &str) {
        match &self.db {
            Db::Sqlite(path) => {
                rusqlite::Connection::open(path)
                    .unwrap()
                    .execute(
                        "INSERT INTO tx (guid, state, updated_at) VALUES (?1, ?2, datetime('now'))",
                        [guid, state],
                    )
                    .unwrap();
            }
            Db::Postgres(_) => {
                postgres::Client::connect(&self.arg, postgres::NoTls)
                    .unwrap()
                    .execute(
                        "INSERT INTO tx (guid, state, updated_at) VALUES ($1, $2, now())",
                        &[&guid, &state],
                    )
                    .unwrap();
            }
        }
    }
}

pub fn hand<'a>(
    guid: &'a str,
    state: &'a str,
    rsp_code: Option<&'a str>,
    attempts: i64,
    age_secs: u64,
) -> Hand<'a> {
    Hand {
        guid,
        state,
        rsp_code,
        request: None,
        attempts: Some(attempts),
        age_secs,
    }
}
