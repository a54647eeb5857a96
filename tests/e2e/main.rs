//! End-to-end tests: the real binaries (relay, coresim, the batch tools, the wrappers in
//! `scripts/`) on port 0, a temp ledger each, checked by reply bytes, ledger rows and the
//! core simulator's per-GUID booking counts. One module per tool or area (`alerts`: the
//! Prometheus rules and the Grafana dashboard in docs/alerts); what they share is in `util`
//! (on top of `tools/testkit`).
//!
//! `cargo test --test e2e` runs them all; `cargo test --test e2e resolve::` one module.
//!
//! The ledger is SQLite here. `tests/e2e_pg` compiles the modules that mean something on
//! any ledger (`util`, `batch_usage`, `inspect`, `lifecycle`, `purge`, `relay`, `reprocess`,
//! `resolve`) once more with the ledger on PostgreSQL, where their tests that only mean
//! something on SQLite are ignored (`sqlite_only!`); `alerts`, `scripts`, `backup`,
//! `bench_smoke`, `chaos_smoke` and `one_file` are SQLite's alone.

/// `sqlite_only! { "why", fn name() { … } }`: a test that means something only on SQLite
/// (its locks, its files, its descriptor budget). Here: a plain test.
macro_rules! sqlite_only {
    ($why:literal, $(#[$m:meta])* fn $name:ident() $body:block) => {
        $(#[$m])*
        #[test]
        fn $name() $body
    };
}

mod util;

/// The ledger backend of every test in this binary.
const BACKEND: util::Backend = util::Backend::Sqlite;

mod alerts;
mod backup;
mod batch_metrics;
mod batch_usage;
mod bench_smoke;
mod broken_pipe;
mod chaos_smoke;
mod core_credentials;
mod env_errors;
mod history_upgrade;
mod inspect;
mod json_every_path;
mod layering;
mod lifecycle;
mod one_file;
mod powerloss_smoke;
mod purge;
mod reconcile;
mod reconcile_million;
mod relay;
mod reprocess;
mod resolve;
mod restore;
mod restore_procedure;
mod scripts;
