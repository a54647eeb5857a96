//! Why the relay could not start: one line for the operator each. The relay prints it with
//! anyhow's `{:#}` (`cli::exit_code`): this error's message, then its `source()` chain, each
//! after ": ". So a variant that wraps a cause does not repeat it in its own message.

use std::io;

use core_client::BadCoreUrl;
use ledger::error::LedgerError;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Ledger(LedgerError),
    /// The ledger opened but the start's write through the claim path failed (a read-only
    /// file or database, a full disk, a role without the right to write).
    #[error("the relay cannot write its ledger (every transfer would be E905)")]
    Unwritable(#[source] LedgerError),
    /// Another relay holds this SQLite ledger, or its lock file cannot be used. Its message,
    /// not transparent: a `LockError` says its own cause and also returns it as `source()`.
    #[error("{0}")]
    Lock(super::LockError),
    #[error(transparent)]
    Core(BadCoreUrl),
    #[error("cannot listen on {addr}")]
    Bind { addr: String, source: io::Error },
    /// The admin address (`--admin`) cannot be bound or served.
    #[error("cannot listen on {addr} (--admin)")]
    Admin { addr: String, source: io::Error },
    /// A TLS file of the channel listener cannot be used.
    #[error(transparent)]
    Tls(super::TlsError),
    /// `--max-connections` does not fit in the file descriptors the process may open.
    #[error(
        "--max-connections {max_connections} needs about {needed} file descriptors (channel \
         and core sockets, ledger files, calls awaiting a late reply), but the process may \
         open only {limit} (ulimit -n, hard limit): raise the limit or lower \
         --max-connections (or --max-late-replies)"
    )]
    Descriptors {
        max_connections: usize,
        needed: u64,
        limit: u64,
    },
}
