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
        let server = testkit::pg::shared()?;
        let arg = server.fresh_db();
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
