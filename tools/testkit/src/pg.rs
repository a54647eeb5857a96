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
//! certificate and key, say). Such a server's own SQL (`Server::exec`) goes through its Unix socket, so
//! that a `pg_hba.conf` that refuses plain TCP does not lock the tests out.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

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

/// A cluster started by us.
pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    pub port: u16,
    /// `-c` settings beyond the defaults, given at every start.
    extra_opts: Vec<String>,
    /// Keeps the folder (data, sockets, log) until the cluster is dropped.
    _dir: tempfile::TempDir,
}

static SHARED: OnceLock<Option<Server>> = OnceLock::new();
static DID_NOT_RUN: AtomicU64 = AtomicU64::new(0);
static STARTED: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());
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

impl Cluster {
    pub fn start() -> anyhow::Result<Cluster> {
        Cluster::start_with(&Setup::default())
    }

    /// A cluster whose data folder gets `setup`'s files and `pg_hba.conf` after `initdb`,
    /// and whose server runs with `setup`'s settings.
    pub fn start_with(setup: &Setup) -> anyhow::Result<Cluster> {
        let bin = pg_bin_dir()?;
        let dir = tempfile::Builder::new().prefix("txrelay-pg").tempdir()?;
        let data = dir.path().join("data");
        let sockets = dir.path().join("sock");
        std::fs::create_dir(&sockets)?;
        give_to_postgres(dir.path())?;
        give_to_postgres(&sockets)?;
        let out = as_postgres(&bin.join("initdb"))
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output()
            .context("cannot run initdb")?;
        if !out.status.success() {
            bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        for (name, content, mode) in &setup.files {
            write_owned(&data.join(name), content, *mode)?;
        }
        if let Some(hba) = &setup.hba {
            write_owned(&data.join("pg_hba.conf"), hba.as_bytes(), 0o600)?;
        }
        let port = crate::free_port();
        let c = Cluster {
            bin,
            data,
            port,
            extra_opts: setup
                .settings
                .iter()
                .map(|(k, v)| format!("-c {k}={v}"))
                .collect(),
            _dir: dir,
        };
        c.pg_ctl_start(&sockets)?;
        STARTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((c.bin.clone(), c.data.clone()));
        register_stop_at_exit();
        Ok(c)
    }

    /// The folder of the server's Unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.data.parent().unwrap_or(&self.data).join("sock")
    }

    fn pg_ctl_start(&self, sockets: &Path) -> anyhow::Result<()> {
        let mut opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=300",
            self.port,
            sockets.display()
        );
        for o in &self.extra_opts {
            opts.push(' ');
            opts.push_str(o);
        }
        let log = self.data.parent().unwrap_or(&self.data).join("server.log");
        let out = as_postgres(&self.bin.join("pg_ctl"))
            .args(["start", "-w", "-t", "30", "-D"])
            .arg(&self.data)
            .args(["-l"])
            .arg(&log)
            .args(["-o", &opts])
            .stdout(Stdio::null())
            .output()
            .context("cannot run pg_ctl start")?;
        if !out.status.success() {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            bail!(
                "pg_ctl start failed: {}\n{log}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// `pg_ctl restart -m immediate`: every connection is cut, no checkpoint (a crash, as far
    /// as the data is concerned).
    pub fn restart_immediate(&self) -> anyhow::Result<()> {
        self.pg_ctl(&["stop", "-m", "immediate", "-w"])?;
        self.pg_ctl_start(&self.socket_dir())
    }

    /// Stops the server (immediate mode) until `start_again`.
    pub fn stop(&self) -> anyhow::Result<()> {
        self.pg_ctl(&["stop", "-m", "immediate", "-w"])
    }

    pub fn start_again(&self) -> anyhow::Result<()> {
        self.pg_ctl_start(&self.socket_dir())
    }

    /// Freezes every process of the server (SIGSTOP): connections stay open, the kernel
    /// still accepts and acknowledges, nothing answers — a hung host.
    pub fn freeze(&self) -> anyhow::Result<()> {
        self.signal_all(libc::SIGSTOP)
    }

    /// Undoes `freeze`.
    pub fn thaw(&self) -> anyhow::Result<()> {
        self.signal_all(libc::SIGCONT)
    }

    fn signal_all(&self, sig: i32) -> anyhow::Result<()> {
        let pids = self.pids()?;
        for pid in pids {
            // SAFETY: kill(2) on a pid of our own server's process tree.
            unsafe {
                libc::kill(pid, sig);
            }
        }
        Ok(())
    }

    /// The postmaster and its children.
    fn pids(&self) -> anyhow::Result<Vec<i32>> {
        let pidfile = std::fs::read_to_string(self.data.join("postmaster.pid"))
            .context("no postmaster.pid: is the server running?")?;
        let master: i32 = pidfile
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .context("bad postmaster.pid")?;
        let mut pids = vec![master];
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // pid (comm) state ppid ...
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if ppid == Some(master) {
                pids.push(pid);
            }
        }
        Ok(pids)
    }

    fn pg_ctl(&self, args: &[&str]) -> anyhow::Result<()> {
        let out = as_postgres(&self.bin.join("pg_ctl"))
            .args(args)
            .arg("-D")
            .arg(&self.data)
            .stdout(Stdio::null())
            .output()
            .context("cannot run pg_ctl")?;
        if !out.status.success() {
            bail!("pg_ctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.thaw();
        let _ = self.pg_ctl(&["stop", "-m", "immediate", "-w"]);
        STARTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(_, d)| d != &self.data);
    }
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

/// Where PostgreSQL's server binaries are: `PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian), else `initdb` on `PATH`.
fn pg_bin_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|d| d.join("initdb").exists())
        .context("PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin nor on PATH; on Debian: apt-get install postgresql)")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `initdb` and `pg_ctl` refuse to run as root: as root, run them as `postgres`.
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Writes `content` to `path` with `mode`, owned by the server's user.
fn write_owned(path: &Path, content: &[u8], mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, content).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot chmod {}", path.display()))?;
    give_to_postgres(path)
}

fn give_to_postgres(path: &Path) -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let out = Command::new("chown")
        .arg("postgres:postgres")
        .arg(path)
        .output()
        .context("cannot run chown")?;
    if !out.status.success() {
        bail!(
            "chown postgres {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Stops every cluster still running when the process exits (statics are never dropped).
fn register_stop_at_exit() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        extern "C" fn stop_all() {
            let started = STARTED.lock().map(|v| v.clone()).unwrap_or_default();
            for (bin, data) in started {
                let _ = as_postgres(&bin.join("pg_ctl"))
                    .args(["stop", "-m", "immediate", "-D"])
                    .arg(&data)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                if let Some(dir) = data.parent() {
                    let _ = std::fs::remove_dir_all(dir);
                }
            }
        }
        // SAFETY: registering a plain extern "C" function with atexit.
        unsafe {
            libc::atexit(stop_all);
        }
    });
}
