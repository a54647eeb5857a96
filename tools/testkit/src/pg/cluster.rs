//! A PostgreSQL cluster of our own: `initdb` into a temp folder, `pg_ctl start` on a free
//! port and a private socket folder; restarted, stopped, frozen and thawed by the fault
//! tests; stopped (and its folder removed) when dropped or when the test process ends. As
//! root, its binaries run as the `postgres` user (`initdb` refuses root).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, bail};

use super::Setup;

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

/// The clusters started and not yet stopped, for the stop at exit.
static STARTED: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

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
        let opts = setup
            .settings
            .iter()
            .map(|(k, v)| format!("-c {k}={v}"))
            .collect();
        Cluster::start_in(bin, dir, opts)
    }

    /// Starts the server whose data folder is `dir`/data (made ready by the caller: by
    /// `initdb`, or by `pg_basebackup` for a standby) on a free port, its socket in
    /// `dir`/sock, and stops it at exit.
    pub(super) fn start_in(
        bin: PathBuf,
        dir: tempfile::TempDir,
        extra_opts: Vec<String>,
    ) -> anyhow::Result<Cluster> {
        let data = dir.path().join("data");
        let sockets = dir.path().join("sock");
        let port = crate::free_port();
        let c = Cluster {
            bin,
            data,
            port,
            extra_opts,
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

    /// The folder of the server's binaries (`initdb`, `pg_ctl`, `pg_basebackup`).
    pub(super) fn bin(&self) -> &Path {
        &self.bin
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

    /// Promotes a standby to primary (`pg_ctl promote -w`: returns once it takes writes).
    pub fn promote(&self) -> anyhow::Result<()> {
        self.pg_ctl(&["promote", "-w", "-t", "30"])
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
/// Where PostgreSQL's server binaries are: `PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian), else `initdb` on `PATH`.
pub(super) fn pg_bin_dir() -> anyhow::Result<PathBuf> {
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
pub(super) fn as_postgres(program: &Path) -> Command {
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

pub(super) fn give_to_postgres(path: &Path) -> anyhow::Result<()> {
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
