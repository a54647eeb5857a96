//! A ledger for one test, on either backend: an SQLite file in a temp directory, or a schema
//! of its own on the tests' PostgreSQL server (`pg::shared`). What a test reads goes through
//! the `Store` interface, as the tools read; what it changes by hand, it changes the way an
//! operator or another tool would, in the backend's own SQL.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once, OnceLock};

use ledger::{Access, Db, Ledger, Row, State, Store};

/// Which database holds a test's ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// Whether tests can run on it here. PostgreSQL needs a server (`pg::shared`): without
    /// one (not installed, and `REQUIRE_POSTGRES` unset) this says so once per process, on
    /// the real stderr (not the test's captured output), and is false.
    pub fn available(self) -> bool {
        match self {
            Backend::Sqlite => true,
            Backend::Postgres => {
                let up = crate::pg::shared().is_some();
                static SAID: Once = Once::new();
                if !up {
                    SAID.call_once(|| {
                        let _ = writeln!(
                            std::io::stderr(),
                            "PostgreSQL is not available here: every PostgreSQL test returns \
                             at once (set {} to make that an error)",
                            crate::pg::REQUIRE_ENV
                        );
                    });
                }
                up
            }
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        })
    }
}

/// A ledger of the test's own: an SQLite path in a temp directory (the file exists once a
/// tool created it), or a PostgreSQL URL to a new, empty schema (its table exists once a
/// tool created it). The temp directory is there on both, for the test's other files.
pub struct TempLedger {
    /// The store the test reads through, opened on first use (dropped before the folder).
    store: OnceLock<Arc<dyn Store>>,
    at: At,
    dir: tempfile::TempDir,
}

enum At {
    File(PathBuf),
    Url(String),
}

impl Default for TempLedger {
    fn default() -> Self {
        TempLedger::new()
    }
}

impl TempLedger {
    /// An SQLite ledger.
    pub fn new() -> TempLedger {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ledger.db");
        TempLedger {
            store: OnceLock::new(),
            at: At::File(path),
            dir,
        }
    }

    /// A PostgreSQL ledger, or `None` where there is no server (see `Backend::available`).
    pub fn postgres() -> Option<TempLedger> {
        Some(TempLedger::at_url(crate::pg::shared()?.fresh_db()))
    }

    /// A PostgreSQL ledger at `url`, on a server of the test's own (a role with a password,
    /// say); the test made the schema `url` names.
    pub fn at_url(url: String) -> TempLedger {
        TempLedger {
            store: OnceLock::new(),
            at: At::Url(url),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A ledger on `backend`, or `None` where it is not available.
    pub fn on(backend: Backend) -> Option<TempLedger> {
        match backend {
            Backend::Sqlite => Some(TempLedger::new()),
            Backend::Postgres => TempLedger::postgres(),
        }
    }

    pub fn backend(&self) -> Backend {
        match self.at {
            At::File(_) => Backend::Sqlite,
            At::Url(_) => Backend::Postgres,
        }
    }

    /// What `--db` says: the path, or the URL.
    pub fn arg(&self) -> &str {
        match &self.at {
            At::File(path) => path.to_str().expect("UTF-8 temp path"),
            At::Url(url) => url,
        }
    }

    /// The temp directory, for the test's other files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The SQLite ledger file. Panics on PostgreSQL: a test that needs the file is an
    /// SQLite test.
    pub fn path(&self) -> &Path {
        match &self.at {
            At::File(path) => path,
            At::Url(_) => panic!("an SQLite ledger file was asked of a PostgreSQL ledger"),
        }
    }

    /// A new connection to the PostgreSQL ledger, its schema first on the search path.
    /// Panics on SQLite.
    pub fn pg_client(&self) -> postgres::Client {
        match &self.at {
            At::Url(url) => postgres::Client::connect(url, postgres::NoTls)
                .unwrap_or_else(|e| panic!("connecting to the test's PostgreSQL ledger: {e}")),
            At::File(_) => panic!("a PostgreSQL connection was asked of an SQLite ledger"),
        }
    }

    /// The store the tests read through (the batch tools' kind), created with its schema
    /// on first use if no tool created it yet.
    pub fn store(&self) -> Arc<dyn Store> {
        Arc::clone(self.store.get_or_init(|| match &self.at {
            At::File(path) => Arc::new(Mutex::new(
                Ledger::open(path).expect("open the temp ledger"),
            )),
            At::Url(url) => {
                let db: Db = url.parse().expect("a PostgreSQL URL");
                db.open(Access::Tool, "testkit")
                    .expect("open the temp ledger")
            }
        }))
    }

    /// Creates the ledger (its schema) unless a tool did already.
    pub fn create(&self) {
        self.store();
    }

    /// Whether the ledger exists: the file, or the table in the test's schema. Creates
    /// nothing.
    pub fn created(&self) -> bool {
        match &self.at {
            At::File(path) => path.exists(),
            At::Url(_) => self
                .pg_client()
                .query_one("SELECT to_regclass('tx') IS NOT NULL", &[])
                .and_then(|r| r.try_get(0))
                .expect("look for the ledger's table"),
        }
    }

    pub fn row(&self, guid: &str) -> Option<Row> {
        self.store().read(guid).expect("read a row")
    }

    pub fn state(&self, guid: &str) -> Option<State> {
        self.row(guid).map(|r| r.state)
    }

    pub fn count(&self) -> i64 {
        let by_state = self.store().count_by_state().expect("count rows");
        by_state.into_iter().map(|(_, n)| n).sum()
    }

    /// Every row, oldest change first.
    pub fn rows(&self) -> Vec<Row> {
        self.store().all_rows().expect("read the rows")
    }

    /// Makes a row look `secs` seconds old, by the database's clock.
    pub fn age(&self, guid: &str, secs: u64) {
        let n = match &self.at {
            At::File(path) => Ledger::open(path)
                .expect("open the temp ledger")
                .connection()
                .execute(
                    "UPDATE tx SET updated_at = datetime('now', ?2) WHERE guid = ?1",
                    [guid, &format!("-{secs} seconds")],
                )
                .expect("age a row") as u64,
            At::Url(_) => self
                .pg_client()
                .execute(
                    "UPDATE tx SET updated_at = now() - make_interval(secs => $2) \
                     WHERE guid = $1",
                    &[&guid, &(secs as f64)],
                )
                .expect("age a row"),
        };
        assert_eq!(n, 1, "no row {guid} to age");
    }
}
