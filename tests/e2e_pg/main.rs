//! The end-to-end tests with the ledger on PostgreSQL: the modules of `tests/e2e` that mean
//! something on any ledger, compiled once more here (the same files, not copies), every
//! ledger a schema of its own on the server `testkit::pg` starts; and what only PostgreSQL
//! has: relays on several ports sharing one ledger, `migrate` from SQLite, passwords in the
//! database URL, tools starting on a ledger in use, `backup` refusing a PostgreSQL ledger, the
//! history's statement triggers (and the upgrade to them).
//!
//! Without PostgreSQL installed (outside CI) every test returns at once, after one line
//! that says so, and the process ends with one line saying how many did not run; with
//! `REQUIRE_POSTGRES` set (CI) that is an error instead. The tests of `tests/e2e` that only
//! mean something on SQLite are ignored here (`sqlite_only!`); of the relay's, only those that
//! reach the ledger are here at all (`relay.rs` says which and why).
//!
//! `cargo test --test e2e_pg` runs them all; `cargo test --test e2e_pg relay::` one module.

/// `sqlite_only! { "why", fn name() { … } }`: a test that means something only on SQLite
/// (its locks, its files, its descriptor budget). Here: ignored, so that cargo counts it
/// as ignored, not as passed.
macro_rules! sqlite_only {
    ($why:literal, $(#[$m:meta])* fn $name:ident() $body:block) => {
        $(#[$m])*
        #[test]
        #[ignore = $why]
        fn $name() $body
    };
}

// The shared helpers serve both binaries; some only the tests that stay on SQLite (TLS,
// framing, the HTTP door's head): unused here.
#[path = "../e2e/util/mod.rs"]
#[allow(dead_code)]
mod util;

/// The ledger backend of every test in this binary.
const BACKEND: util::Backend = util::Backend::Postgres;

#[path = "../e2e/batch_usage.rs"]
mod batch_usage;
#[path = "../e2e/inspect.rs"]
mod inspect;
#[path = "../e2e/lifecycle.rs"]
mod lifecycle;
#[path = "../e2e/purge.rs"]
mod purge;
#[path = "../e2e/reconcile.rs"]
mod reconcile;
#[path = "../e2e/reprocess/mod.rs"]
mod reprocess;
#[path = "../e2e/resolve/mod.rs"]
mod resolve;

mod backup;
mod history_triggers;
mod inspect_million;
mod migrate;
mod multi_host;
mod passwords;
mod relay;
mod shared_ledger;
mod start_up;
