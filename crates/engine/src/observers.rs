//! What the lower layers report, routed to the relay's metrics: the ledger's commits
//! (`ledger::observe`) and the core client's connections (`core_client::observe`).

use crate::metrics::metrics;

/// Makes the ledger and the core client report to the metrics (their commits, their
/// connections to the core): called once, before the relay opens its ledger.
pub fn install() {
    ledger::observe::on_commit(|statements, took| metrics().commit(statements, took));
    core_client::observe::on_connection(|delta| metrics().core_connections.add(delta));
}
