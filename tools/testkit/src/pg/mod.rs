//! Throwaway PostgreSQL servers for tests, started from the installed binaries: `initdb`
//! into a temp folder, `pg_ctl start` on a free port and a private socket folder, stopped
//! (and the folder removed) when the test process ends. As root, the server runs as the
//! `postgres` user (`initdb` refuses root). `TEST_DATABASE_URL`, when set, is used instead
//! of a server of our own.
//!
//! Each test takes a schema of its own (`Server::fresh_db`): a URL whose `options` set the
//! `search_path`, so that the ledger's `tx` table is a new one.
//!
//! A cluster may be started with a set-up of its own (`Server::own_with`, `Setup`): server
//! settings (`ssl=on`), a `pg_hba.conf` of its own, files in its data folder (a TLS
//! certificate and key, say). Such a server's own SQL (`Server::exec`) goes through its Unix
//! socket, so that a `pg_hba.conf` that refuses plain TCP does not lock the tests out.
//!
//! A cluster may also get a synchronous standby of its own (`Server::own_with_sync_standby`,
//! in `standby`), which the tests freeze to make the primary's commits wait.
//!
//! Here the server the tests use (`Server`: ours, or `TEST_DATABASE_URL`'s) and its set-up;
//! in `cluster` the cluster of our own that is started, restarted, frozen and stopped.

mod cluster;
mod standby;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

pub use self::cluster::Cluster;
pub use self::standby::Standby;

/// Set (to anything) where a missing PostgreSQL must fail the tests instead of skipping
/// them: CI sets it.
pub const REQUIRE_ENV: &str = "REQUIRE_POSTGRES";

/// A PostgreSQL server the tests may use.
pub struct Server {
    /// `postgres://user@host:port/db` without query.
    base: String,
    /// Where `exec` connects: `base`, or the cluster's Unix socket (`own_with`).
    admin: String,
    /// Our own cluster, if we started one (None with TEST_DATABASE_URL).
    own: Option<Cluster>,
}

static SHARED: OnceLock<Option<Server>> = OnceLock::new();
static DID_NOT_RUN: AtomicU64 = AtomicU64::new(0);
static NEXT_SCHEMA: AtomicU64 = AtomicU64::new(0);

/// The server shared by every test of this process, started on first use. `None` (after one
/// line on stderr) when PostgreSQL is not installed and `REQUIRE_POSTGRES` is not set.
pub fn shared() -> Option<&'static Server> {
    SHARED
        .get_or_init(|| match Server::start() {
            Ok(s) => Some(s),
            Err(e) if std::env::var_os(REQUIRE_ENV).is_none() => {
                eprintln!("skipping the PostgreSQL tests: {e:#}");
                None
            }
            Err(e) => panic!("PostgreSQL is required here ({REQUIRE_ENV} is set): {e:#}"),
        })
        .as_ref()
}

/// Counts a PostgreSQL test that returned without running (no server here), and on the
/// first one registers the line that says how many when the test process ends: libtest
/// counts such a test as passed. The line comes from an `atexit` handler, which runs when
/// libtest's `main` returns or calls `exit` (a static's `Drop` would not run).
pub fn did_not_run() {
    if DID_NOT_RUN.fetch_add(1, Ordering::SeqCst) == 0 {
        // SAFETY: registers a plain `extern "C"` function that takes no arguments.
        unsafe {
            libc::atexit(say_how_many_did_not_run);
        }
    }
}

extern "C" fn say_how_many_did_not_run() {
    use std::io::Write;
    let n = DID_NOT_RUN.load(Ordering::SeqCst);
    let _ = writeln!(
        std::io::stderr(),
        "{n} PostgreSQL test(s) did not run (counted as passed above): PostgreSQL is not \
         installed here; set {REQUIRE_ENV}=1 to make that an error"
    );
}

impl Server {
    /// `TEST_DATABASE_URL` if set, else a cluster of our own.
    pub fn start() -> anyhow::Result<Server> {
        if let Ok(url) = std::env::var("TEST_DATABASE_URL") {
            let base = url.split('?').next().unwrap_or(&url).to_string();
            return Ok(Server {
                admin: base.clone(),
                base,
                own: None,
            });
        }
        Server::own()
    }

    /// A cluster of our own, even with `TEST_DATABASE_URL` set (for tests that restart,
    /// pause or stop the server).
    pub fn own() -> anyhow::Result<Server> {
        let c = Cluster::start()?;
        let base = format!("postgres://postgres@127.0.0.1:{}/postgres", c.port);
        Ok(Server {
            admin: base.clone(),
            base,
            own: Some(c),
        })
    }

    /// A cluster of our own started with `setup` (TLS, a `pg_hba.conf` of its own, ...). The
    /// tests' own SQL goes through the cluster's Unix socket (trusted unless `setup.hba`
    /// says otherwise for `local`).
    pub fn own_with(setup: &Setup) -> anyhow::Result<Server> {
        let c = Cluster::start_with(setup)?;
        let admin = format!(
            "host={} port={} user=postgres dbname=postgres",
            c.socket_dir().display(),
            c.port
        );
        Ok(Server {
            base: format!("postgres://postgres@127.0.0.1:{}/postgres", c.port),
            admin,
            own: Some(c),
        })
    }

    /// A cluster of our own (with `setup`, if given), or `None` (after one line on stderr)
    /// when PostgreSQL is not installed and `REQUIRE_POSTGRES` is not set.
    pub fn own_or_skip(setup: Option<&Setup>) -> Option<Server> {
        let started = match setup {
            Some(s) => Server::own_with(s),
            None => Server::own(),
        };
        match started {
            Ok(s) => Some(s),
            Err(e) if std::env::var_os(REQUIRE_ENV).is_none() => {
                eprintln!("skipping: no PostgreSQL cluster could be started: {e:#}");
                did_not_run();
                None
            }
            Err(e) => panic!("PostgreSQL is required here ({REQUIRE_ENV} is set): {e:#}"),
        }
    }

    pub fn cluster(&self) -> Option<&Cluster> {
        self.own.as_ref()
    }

    /// A URL to database `dbname` as `user` (no `options`: its default schema).
    pub fn url_as(&self, user: &str, dbname: &str) -> String {
        let (scheme_user, rest) = self
            .base
            .split_once('@')
            .unwrap_or(("postgres://", &self.base));
        let scheme = scheme_user.split_once("//").map_or("postgres:", |(s, _)| s);
        let host = rest.split_once('/').map_or(rest, |(h, _)| h);
        format!("{scheme}//{user}@{host}/{dbname}")
    }

    /// Sets a server-wide default (`ALTER SYSTEM` and a reload) and waits (up to 10 s) until
    /// new sessions see it.
    pub fn set_server_default(&self, name: &str, value: &str) -> anyhow::Result<()> {
        // ALTER SYSTEM cannot run in the implicit transaction of a multi-statement query.
        self.exec(&format!("ALTER SYSTEM SET {name} = '{value}'"))?;
        self.exec("SELECT pg_reload_conf()")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut c = postgres::Client::connect(&self.admin, postgres::NoTls)?;
            let now: String = c.query_one(&format!("SHOW {name}"), &[])?.get(0);
            if now == value {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("{name} is still {now:?} after the reload, not {value:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A URL to a new, empty schema of its own.
    pub fn fresh_db(&self) -> String {
        let n = NEXT_SCHEMA.fetch_add(1, Ordering::SeqCst);
        let schema = format!("t{}_{n}", std::process::id());
        self.exec(&format!("CREATE SCHEMA {schema}"))
            .unwrap_or_else(|e| panic!("cannot create schema {schema}: {e:#}"));
        format!("{}?options=-c%20search_path%3D{schema}", self.base)
    }

    /// Runs SQL on the server's database as the tests' superuser.
    pub fn exec(&self, sql: &str) -> anyhow::Result<()> {
        exec_on(&self.admin, sql)
    }
}

/// What a cluster is started with beyond the defaults (`Cluster::start_with`).
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// Settings given to the server as `-c NAME=VALUE` at every start (`ssl=on`, ...).
    pub settings: Vec<(String, String)>,
    /// A `pg_hba.conf` replacing initdb's (which trusts everyone), if set.
    pub hba: Option<String>,
    /// Files written into the data folder before the first start: (name, content, mode),
    /// owned by the server's user (a TLS key must be 0600).
    pub files: Vec<(String, Vec<u8>, u32)>,
}

/// Runs SQL on `url` (a libpq URL, `options` honoured).
pub fn exec_on(url: &str, sql: &str) -> anyhow::Result<()> {
    let mut c = postgres::Client::connect(url, postgres::NoTls)
        .with_context(|| format!("cannot connect to {}", ledger::postgres::url::mask(url)))?;
    c.batch_execute(sql).with_context(|| sql.to_string())
}

/// Waits until `url` accepts a query, up to `limit`.
pub fn wait_ready(url: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if exec_on(url, "SELECT 1").is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
