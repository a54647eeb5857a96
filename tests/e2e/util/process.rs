//! Processes the tests start, on top of `testkit::process` (servers that announce `listening
//! on HOST:PORT`, commands run to their end within a time limit): the relay, and the batch
//! tools and `inspect` run with their default log level.

use std::process::Command;

pub use testkit::process::{Run, Server};
use testkit::{TempLedger, bin};

/// A relay on a free port in front of `core_url`, with its ledger at `db`.
pub fn start_relay(db: &TempLedger, core_url: &str, extra: &[&str]) -> Server {
    Server::start(relay_command(db, core_url, extra))
}

/// `start_relay`'s command, for a test that sets its environment before `Server::start`.
pub fn relay_command(db: &TempLedger, core_url: &str, extra: &[&str]) -> Command {
    relay_command_at(db.arg(), core_url, extra)
}

/// `relay_command` with `--db` as given (a URL a test made: another password, more hosts).
pub fn relay_command_at(db: &str, core_url: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin("relay"));
    cmd.args(["--db", db, "--listen", "127.0.0.1:0", "--core", core_url])
        .args(extra);
    cmd
}

/// Runs a batch tool (or `inspect`) with its default log level, so that per-row warnings
/// reach stderr whatever `RUST_LOG` the test runner has.
pub fn tool(name: &str, args: &[&str]) -> Run {
    Run::with_env(name, args, &[("RUST_LOG", "info")])
}

/// `resolve --db DB --core CORE EXTRA…`
pub fn resolve(db: &TempLedger, core: &str, extra: &[&str]) -> Run {
    tool(
        "resolve",
        &[&["--db", db.arg(), "--core", core], extra].concat(),
    )
}

/// `reprocess --db DB --core CORE EXTRA…`
pub fn reprocess(db: &TempLedger, core: &str, extra: &[&str]) -> Run {
    tool(
        "reprocess",
        &[&["--db", db.arg(), "--core", core], extra].concat(),
    )
}

/// `purge --db DB EXTRA…`
pub fn purge(db: &TempLedger, extra: &[&str]) -> Run {
    tool("purge", &[&["--db", db.arg()], extra].concat())
}
