//! What only the tests read from a ledger, with a connection of the test's own: the ledger's
//! interface (`ledger::Store`) has no such read, because no tool needs it.

use ledger::postgres::is_pg_url;
use ledger::store::InquiryRecord;

/// Every failed-inquiry record (the side table `tx_inquiry`) of the ledger `db` (what `--db`
/// says: a file, or a PostgreSQL URL), by GUID; none without the table (a ledger made before
/// it).
pub fn inquiry_records(db: &str) -> Vec<InquiryRecord> {
    if is_pg_url(db) {
        pg_inquiry_records(db)
    } else {
        sqlite_inquiry_records(db)
    }
}

fn sqlite_inquiry_records(path: &str) -> Vec<InquiryRecord> {
    // Never creates a file (a mistyped path fails), and waits out a writer's lock.
    let c =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
            .expect("open the ledger");
    c.busy_timeout(std::time::Duration::from_secs(5))
        .expect("set a busy timeout");
    let has: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tx_inquiry'",
            [],
            |r| r.get(0),
        )
        .expect("look for tx_inquiry");
    if has == 0 {
        return Vec::new();
    }
    let mut st = c
        .prepare("SELECT guid, failures, last_error, next_at FROM tx_inquiry ORDER BY guid")
        .expect("read tx_inquiry");
    st.query_map([], |r| {
        Ok(InquiryRecord {
            guid: r.get(0)?,
            failures: r.get(1)?,
            last_error: r.get(2)?,
            next_at: r.get(3)?,
        })
    })
    .and_then(|rows| rows.collect())
    .expect("read tx_inquiry")
}

fn pg_inquiry_records(url: &str) -> Vec<InquiryRecord> {
    let mut c = postgres::Client::connect(url, postgres::NoTls).expect("connect to the ledger");
    let has: bool = c
        .query_one("SELECT to_regclass('tx_inquiry') IS NOT NULL", &[])
        .expect("look for tx_inquiry")
        .get(0);
    if !has {
        return Vec::new();
    }
    c.query(
        "SELECT guid, failures, last_error, \
         to_char(next_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') \
         FROM tx_inquiry ORDER BY guid",
        &[],
    )
    .expect("read tx_inquiry")
    .iter()
    .map(|r| InquiryRecord {
        guid: r.get(0),
        failures: r.get::<_, i32>(1).into(),
        last_error: r.get(2),
        next_at: r.get(3),
    })
    .collect()
}
