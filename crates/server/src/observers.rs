//! What the lower layers report, routed to the relay's metrics: the ledger's commits
//! (`ledger::observe`) and the core client's connections (`core_client::observe`). A commit
//! the ledger took as not written because its wait for the synchronous standby was cut
//! short is also said in the log, rate-limited: every request of a storm of them (a pooler
//! cancelling every session) is in the access lines and the counter anyway.

use std::sync::Arc;

use log_limit::{PER_REQUEST, warn_limited};

use crate::metrics::Metrics;

/// Makes the ledger and the core client report to `metrics` (their commits, their
/// connections to the core): called once, before the relay opens its ledger. The hooks are
/// the process's (a process is one relay); the first relay of a process keeps them.
pub fn install(metrics: &Arc<Metrics>) {
    let m = Arc::clone(metrics);
    ledger::observe::on_commit(Box::new(move |statements, took| m.commit(statements, took)));
    let m = Arc::clone(metrics);
    ledger::observe::on_not_replicated(Box::new(move |what| {
        m.commits_not_replicated.inc();
        warn_limited!(
            PER_REQUEST,
            "commits not replicated to the synchronous standby",
            "ledger commit ({what}) not replicated: its wait for the synchronous standby was \
             cancelled, so it is on the primary alone and would be lost in a failover; \
             treated as not written (a claim is not won: E905, the core not called; a \
             result is not recorded: E901, row SENT) and its connection closed"
        );
    }));
    let m = Arc::clone(metrics);
    core_client::observe::on_connection(Box::new(move |delta| m.core_connections.add(delta)));
}
