//! A primary with one synchronous standby, for the tests of what a relay does when a
//! COMMIT's wait for the standby is cut short (contract §7, v1.3). The standby is copied
//! from the primary by `pg_basebackup -R` (which also writes its `primary_conninfo` and
//! `standby.signal`) into a folder of its own, started on a port of its own, and only then
//! named synchronous on the primary (`synchronous_standby_names = '*'`; `synchronous_commit`
//! is `on` by default): named earlier, the primary's own set-up commits would wait for a
//! standby that does not exist yet.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::cluster::{as_postgres, give_to_postgres, pg_bin_dir};
use super::{Cluster, Server, did_not_run};

/// A running standby of a `Server` of our own, frozen and thawed by the tests; stopped when
/// dropped.
pub struct Standby {
    pub cluster: Cluster,
}

impl Standby {
    /// Freezes the standby (SIGSTOP): it still holds its replication connection, but
    /// acknowledges nothing, so every COMMIT on the primary waits.
    pub fn freeze(&self) -> anyhow::Result<()> {
        self.cluster.freeze()
    }

    pub fn thaw(&self) -> anyhow::Result<()> {
        self.cluster.thaw()
    }

    /// Makes the standby the primary (a failover's last step).
    pub fn promote(&self) -> anyhow::Result<()> {
        self.cluster.promote()
    }
}

impl Server {
    /// A cluster of our own with one synchronous standby streaming from it, the standby
    /// acknowledged as `sync` before this returns.
    pub fn own_with_sync_standby() -> anyhow::Result<(Server, Standby)> {
        let server = Server::own_with(&super::Setup::default())?;
        let primary = server.cluster().context("a cluster of our own")?;
        let bin = pg_bin_dir()?;
        let dir = tempfile::Builder::new()
            .prefix("txrelay-pg-standby")
            .tempdir()?;
        let sockets = dir.path().join("sock");
        std::fs::create_dir(&sockets)?;
        give_to_postgres(dir.path())?;
        give_to_postgres(&sockets)?;
        let out = as_postgres(&primary.bin().join("pg_basebackup"))
            .args(["-h", "127.0.0.1", "-p", &primary.port.to_string()])
            .args([
                "-U",
                "postgres",
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "--no-sync",
            ])
            .arg("-D")
            .arg(dir.path().join("data"))
            .output()
            .context("cannot run pg_basebackup")?;
        if !out.status.success() {
            bail!(
                "pg_basebackup failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let standby = Standby {
            cluster: Cluster::start_in(bin, dir, Vec::new())?,
        };
        server.set_server_default("synchronous_standby_names", "*")?;
        server.wait_for_sync_standby(Duration::from_secs(30))?;
        Ok((server, standby))
    }

    /// `own_with_sync_standby`, or `None` (after one line on stderr) when PostgreSQL is not
    /// installed and `REQUIRE_POSTGRES` is not set.
    pub fn own_with_sync_standby_or_skip() -> Option<(Server, Standby)> {
        match Server::own_with_sync_standby() {
            Ok(pair) => Some(pair),
            Err(e) if std::env::var_os(super::REQUIRE_ENV).is_none() => {
                eprintln!("skipping: no PostgreSQL primary and standby could be started: {e:#}");
                did_not_run();
                None
            }
            Err(e) => panic!(
                "PostgreSQL is required here ({} is set): {e:#}",
                super::REQUIRE_ENV
            ),
        }
    }

    /// Waits until the primary counts one standby as synchronous (`pg_stat_replication`).
    fn wait_for_sync_standby(&self, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        let mut c = postgres::Client::connect(&self.admin, postgres::NoTls)?;
        loop {
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
                    &[],
                )?
                .get(0);
            if n == 1 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the standby was not synchronous after {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
