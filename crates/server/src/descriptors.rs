//! The file descriptor budget: what `--max-connections` needs, and the limit raised to fit.

use ledger::db::{self, Db};
use ledger::group_commit;

use super::StartError;

/// File descriptors the relay may need: per channel connection its socket and one core
/// socket in flight; the core's idle keep-alive sockets; the ledger's (`ledger`); and a
/// margin for the listener, stdio, logs and signal handling.
pub fn descriptors_needed(max_connections: usize, ledger: u64) -> u64 {
    let c = max_connections as u64;
    let idle_core = c.min(core_client::MAX_IDLE as u64);
    2 * c + idle_core + ledger + 64
}

/// The ledger's descriptors: SQLite's connections hold three files each (database, WAL,
/// shared memory); PostgreSQL's one socket each, and as many again for connections given up
/// on a hung server whose threads have not ended yet.
pub(super) fn ledger_descriptors(db: &Db) -> u64 {
    match db {
        Db::Sqlite(_) => 3 * (group_commit::POOL_MAX as u64 + 1),
        Db::Postgres(_) => 2 * db::PG_RELAY_CONNECTIONS as u64,
    }
}

/// Raises the soft limit on open files to the hard limit (the usual soft limit, 1024, is
/// the default of `--max-connections` alone), and refuses to start if what
/// `max_connections` needs does not fit.
pub(super) fn raise_descriptor_limit(
    max_connections: usize,
    ledger: u64,
) -> Result<(), StartError> {
    let needed = descriptors_needed(max_connections, ledger);
    let limit = raise_nofile();
    if limit < needed {
        return Err(StartError::Descriptors {
            max_connections,
            needed,
            limit,
        });
    }
    Ok(())
}

/// Sets RLIMIT_NOFILE's soft limit to its hard limit; returns the soft limit in force.
#[cfg(unix)]
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return u64::MAX; // cannot tell: do not refuse on a guess
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

#[cfg(not(unix))]
fn raise_nofile() -> u64 {
    u64::MAX
}
