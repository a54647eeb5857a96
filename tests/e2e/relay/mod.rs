//! The relay end to end: real `relay` and `coresim` processes, a temp ledger each, and
//! assertions on exact reply bytes, ledger rows and the core's per-GUID booking counts; and
//! its admin port, metrics and log formats (`metrics`), and the admin port under slow
//! clients and a ledger whose claims fail (`admin_port`); what every tool's `--version` says
//! (`build_info`); TLS to the core (`tls`) and on the channel listener (`tls_channel`);
//! recovery mode, a ledger put back to an earlier state (`recovery`).

mod admin_port;
pub(crate) mod build_info;
mod cn_dash;
mod frames;
mod group_commit;
mod http;
mod http_conn;
mod http_doors;
mod http_openapi;
mod http_readme;
mod http_tls;
mod late_replies;
mod late_results;
mod ledger_errors;
mod limits;
mod log_injection;
mod log_storm;
pub(crate) mod metrics;
mod notify;
mod reasons;
mod recovery;
mod replies;
mod start;
mod start_probe;
pub(crate) mod tls;
mod tls_channel;
mod tls_ownership;
mod tls_revoke;
pub(crate) mod tls_scene;
mod tls_timeouts;
