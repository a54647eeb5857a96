//! What `reconcile` reads of the ledger: every row's GUID, state, code, stored reply and
//! last change, in one consistent snapshot, handed over one row at a time (never the request,
//! never the whole ledger in one vector on SQLite).

use crate::state::State;

/// One row as reconciliation needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileRow {
    pub guid: String,
    pub state: State,
    pub rsp_code: Option<String>,
    /// The stored reply message (header and body, without the length prefix).
    pub response: Option<Vec<u8>>,
    /// UTC, `YYYY-MM-DD HH:MM:SS`.
    pub updated_at: String,
}
