//! The relay's end-to-end tests that reach the ledger, on PostgreSQL: the same files as
//! `tests/e2e/relay` (not copies), those whose subject is what the ledger does or says — the
//! claims, replies and results, late replies, recovery, the ledger's errors and start-up, its
//! metrics, GUID ownership — and those that show how the relay stands on a ledger of this
//! kind (the admin port, notify, the start probe's log line with the URL masked). Two files
//! come for their helpers: `build_info` (its one test is SQLite's) and `tls_scene`.
//!
//! Not here, since the ledger's backend changes nothing in them: the wire's framing and the
//! HTTP door's head (`frames`, `http_conn`, `http_openapi`, `http_readme`), TLS to the core and
//! on the channels (`tls`, `tls_channel`, `tls_revoke`, `tls_timeouts`, `http_tls`, `cn_dash`),
//! connection limits (`limits`) and log lines (`log_injection`, `log_storm`). Each decides
//! before the ledger is asked, or asks it what every test here asks it already (a claim, a
//! row's state).

#[path = "../e2e/relay/admin_port.rs"]
mod admin_port;
#[path = "../e2e/relay/build_info.rs"]
mod build_info;
#[path = "../e2e/relay/group_commit.rs"]
mod group_commit;
#[path = "../e2e/relay/http.rs"]
mod http;
#[path = "../e2e/relay/http_doors.rs"]
mod http_doors;
#[path = "../e2e/relay/late_replies.rs"]
mod late_replies;
#[path = "../e2e/relay/late_results.rs"]
mod late_results;
#[path = "../e2e/relay/ledger_errors.rs"]
mod ledger_errors;
#[path = "../e2e/relay/metrics.rs"]
mod metrics;
#[path = "../e2e/relay/notify.rs"]
mod notify;
#[path = "../e2e/relay/reasons.rs"]
mod reasons;
#[path = "../e2e/relay/recovery.rs"]
mod recovery;
#[path = "../e2e/relay/replies.rs"]
mod replies;
#[path = "../e2e/relay/start.rs"]
mod start;
#[path = "../e2e/relay/start_probe.rs"]
mod start_probe;
#[path = "../e2e/relay/tls_ownership.rs"]
mod tls_ownership;
#[path = "../e2e/relay/tls_scene.rs"]
mod tls_scene;
