//! End-to-end tests: the real binaries (relay, coresim, the batch tools, the wrappers in
//! `scripts/`) on port 0, a temp ledger each, checked by reply bytes, ledger rows and the
//! core simulator's per-GUID booking counts. One module per tool or area; what they share
//! is in `util` (on top of `tools/testkit`).
//!
//! `cargo test --test e2e` runs them all; `cargo test --test e2e resolve::` one module.

mod util;

mod batch_metrics;
mod batch_usage;
mod bench_smoke;
mod chaos_smoke;
mod inspect;
mod lifecycle;
mod purge;
mod relay;
mod reprocess;
mod resolve;
mod scripts;
