//! A ledger in a temp directory, and ways to look at it or change it by hand, as an operator
//! or another tool would.

use std::path::PathBuf;

use ledger::{Ledger, Row, State};

/// A temp directory with a ledger path in it (the file exists once a tool created it).
pub struct TempLedger {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Default for TempLedger {
    fn default() -> Self {
        TempLedger::new()
    }
}

impl TempLedger {
    pub fn new() -> TempLedger {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ledger.db");
        TempLedger { dir, path }
    }

    /// The path as a command-line argument.
    pub fn arg(&self) -> &str {
        self.path.to_str().expect("UTF-8 temp path")
    }

    /// A connection to the ledger (created if missing).
    pub fn open(&self) -> Ledger {
        Ledger::open(&self.path).expect("open the temp ledger")
    }

    pub fn row(&self, guid: &str) -> Option<Row> {
        self.open().get(guid).expect("read a row")
    }

    pub fn state(&self, guid: &str) -> Option<State> {
        self.row(guid).map(|r| r.state)
    }

    pub fn count(&self) -> i64 {
        self.open()
            .connection()
            .query_row("SELECT count(*) FROM tx", [], |r| r.get(0))
            .expect("count rows")
    }

    /// Every row, oldest change first.
    pub fn rows(&self) -> Vec<Row> {
        self.open().all_rows().expect("read the rows")
    }

    /// Runs SQL by hand.
    pub fn exec(&self, sql: &str) {
        self.open()
            .connection()
            .execute_batch(sql)
            .expect("hand-made SQL");
    }

    /// Makes a row look `secs` seconds old.
    pub fn age(&self, guid: &str, secs: u64) {
        let n = self
            .open()
            .connection()
            .execute(
                "UPDATE tx SET updated_at = datetime('now', ?2) WHERE guid = ?1",
                [guid, &format!("-{secs} seconds")],
            )
            .expect("age a row");
        assert_eq!(n, 1, "no row {guid} to age");
    }
}
