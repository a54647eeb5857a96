//! The ledger by hand, as an operator or another tool would touch it: rows made by hand
//! (`RowSpec`), every row in GUID order, and a write lock held from outside.

use ledger::store::InquiryRecord;
use ledger::{Row, State};
use rusqlite::OptionalExtension;
use testkit::TempLedger;

use super::messages::guid_of;

/// A ledger row to insert by hand. Start from the state and the stored request
/// (`RowSpec::unknown(&m)`: UNKNOWN/E901, the GUID taken from `m`, attempts 1, written
/// now), or from a bare GUID (`RowSpec::new(guid, State::Done)`: no code, no request),
/// then change what differs: `.age(OLD)`, `.attempts(2)`, `.code("B001")`, `.request(…)`.
#[derive(Clone, Debug)]
pub struct RowSpec {
    guid: String,
    state: State,
    rsp_code: Option<String>,
    request: Option<Vec<u8>>,
    attempts: i64,
    age_secs: u64,
}

impl RowSpec {
    /// A row for `guid` in `state`, without code or request, attempts 1, written now.
    pub fn new(guid: &str, state: State) -> RowSpec {
        RowSpec {
            guid: guid.to_string(),
            state,
            rsp_code: None,
            request: None,
            attempts: 1,
            age_secs: 0,
        }
    }

    /// A row holding request message `m`, under `m`'s GUID.
    pub fn of(m: &[u8], state: State) -> RowSpec {
        RowSpec::new(&guid_of(m), state).request(m)
    }

    /// UNKNOWN/E901 holding `m`: a send whose outcome is unknown.
    pub fn unknown(m: &[u8]) -> RowSpec {
        RowSpec::of(m, State::Unknown).code("E901")
    }

    /// FAILED/E902 holding `m`: a send proven never to have left.
    pub fn failed(m: &[u8]) -> RowSpec {
        RowSpec::of(m, State::Failed).code("E902")
    }

    /// SENT holding `m`, no code: claimed, result not recorded.
    pub fn sent(m: &[u8]) -> RowSpec {
        RowSpec::of(m, State::Sent)
    }

    /// Stored under `guid` instead of its request's (a request for another GUID).
    pub fn guid(mut self, guid: &str) -> RowSpec {
        self.guid = guid.to_string();
        self
    }

    /// The result code (`None`: NULL).
    pub fn code<'a>(mut self, code: impl Into<Option<&'a str>>) -> RowSpec {
        self.rsp_code = code.into().map(str::to_string);
        self
    }

    /// The stored request, whatever its bytes (another GUID's request, junk).
    pub fn request(mut self, bytes: &[u8]) -> RowSpec {
        self.request = Some(bytes.to_vec());
        self
    }

    pub fn attempts(mut self, n: i64) -> RowSpec {
        self.attempts = n;
        self
    }

    /// `updated_at` is `secs` seconds ago.
    pub fn age(mut self, secs: u64) -> RowSpec {
        self.age_secs = secs;
        self
    }

    /// Inserts the row (the ledger is created if missing).
    pub fn insert(&self, db: &TempLedger) {
        db.open()
            .connection()
            .execute(
                "INSERT INTO tx (guid, tx_code, state, rsp_code, request, attempts, updated_at) \
                 VALUES (?1, CASE WHEN ?4 IS NULL THEN NULL ELSE 'TRNF' END, ?2, ?3, ?4, ?5, \
                 datetime('now', ?6))",
                rusqlite::params![
                    self.guid,
                    self.state.as_str(),
                    self.rsp_code,
                    self.request,
                    self.attempts,
                    format!("-{} seconds", self.age_secs)
                ],
            )
            .unwrap_or_else(|e| panic!("inserting {self:?}: {e}"));
    }
}

/// Every row, in GUID order.
pub fn rows_by_guid(db: &TempLedger) -> Vec<Row> {
    let mut rows = db.rows();
    rows.sort_by(|a, b| a.guid.cmp(&b.guid));
    rows
}

/// The rows of `guids`, in that order (each must exist).
pub fn rows_of(db: &TempLedger, guids: &[&str]) -> Vec<Row> {
    guids
        .iter()
        .map(|g| db.row(g).unwrap_or_else(|| panic!("no row {g}")))
        .collect()
}

/// The ledger's write lock, held from outside (`BEGIN IMMEDIATE`) until `release`: every
/// writer waits for it, up to its busy timeout.
pub struct WriteLock(rusqlite::Connection);

impl WriteLock {
    pub fn take(db: &TempLedger) -> WriteLock {
        let conn = rusqlite::Connection::open(&db.path).expect("open the ledger");
        conn.execute_batch("BEGIN IMMEDIATE")
            .expect("take the write lock");
        WriteLock(conn)
    }

    pub fn release(self) {
        self.0.execute_batch("ROLLBACK").expect("release the lock");
    }
}

/// Every failed-inquiry record (the side table `tx_inquiry`), by GUID.
pub fn inquiry_records(db: &TempLedger) -> Vec<InquiryRecord> {
    db.open().inquiry_records().expect("read tx_inquiry")
}

/// How many inquiries about `guid` have failed in a row (`None`: no record).
pub fn inquiry_failures(db: &TempLedger, guid: &str) -> Option<i64> {
    inquiry_records(db)
        .into_iter()
        .find(|r| r.guid == guid)
        .map(|r| r.failures)
}

/// Makes every failed GUID's next inquiry due now, instead of waiting out its backoff.
pub fn make_inquiries_due(db: &TempLedger) {
    db.exec("UPDATE tx_inquiry SET next_at = datetime('now', '-1 seconds')");
}

/// Seconds from now (the database's clock) until `guid`'s next inquiry is due (`None`: no
/// record).
pub fn inquiry_due_in(db: &TempLedger, guid: &str) -> Option<i64> {
    db.open()
        .connection()
        .query_row(
            "SELECT CAST(strftime('%s', next_at) AS INTEGER) - CAST(strftime('%s', 'now') AS INTEGER) \
             FROM tx_inquiry WHERE guid = ?1",
            [guid],
            |r| r.get(0),
        )
        .optional()
        .expect("read tx_inquiry")
}

/// Asserts that `guid`'s next inquiry is due in about `secs` seconds.
#[track_caller]
pub fn assert_due_in(db: &TempLedger, guid: &str, secs: i64) {
    let got = inquiry_due_in(db, guid).unwrap_or_else(|| panic!("{guid}: no record"));
    assert!(
        (secs - 5..=secs).contains(&got),
        "{guid}: next inquiry in {got} s, want about {secs} s"
    );
}
