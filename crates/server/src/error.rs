//! Why the relay could not start: one line for the operator each.

use std::fmt;
use std::io;

use core_client::BadCoreUrl;
use ledger::error::LedgerError;

#[derive(Debug)]
pub enum StartError {
    Ledger(LedgerError),
    /// The ledger opened but the start's write through the claim path failed (a read-only
    /// file or database, a full disk, a role without the right to write).
    Unwritable(LedgerError),
    /// Another relay holds this SQLite ledger, or its lock file cannot be used.
    Lock(super::LockError),
    Core(BadCoreUrl),
    Bind {
        addr: String,
        source: io::Error,
    },
    /// The admin address (`--admin`) cannot be bound or served.
    Admin {
        addr: String,
        source: io::Error,
    },
    /// A TLS file of the channel listener cannot be used.
    Tls(super::TlsError),
    /// `--max-connections` does not fit in the file descriptors the process may open.
    Descriptors {
        max_connections: usize,
        needed: u64,
        limit: u64,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Ledger(e) => e.fmt(f),
            StartError::Unwritable(e) => write!(
                f,
                "the relay cannot write its ledger (every transfer would be E905): {e}"
            ),
            StartError::Lock(e) => e.fmt(f),
            StartError::Core(e) => e.fmt(f),
            StartError::Tls(e) => e.fmt(f),
            StartError::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            StartError::Admin { addr, source } => {
                write!(f, "cannot listen on {addr} (--admin): {source}")
            }
            StartError::Descriptors {
                max_connections,
                needed,
                limit,
            } => write!(
                f,
                "--max-connections {max_connections} needs about {needed} file descriptors \
                 (channel and core sockets, ledger files, calls awaiting a late reply), but \
                 the process may open only {limit} (ulimit -n, hard limit): raise the limit \
                 or lower --max-connections (or --max-late-replies)"
            ),
        }
    }
}

impl std::error::Error for StartError {}
