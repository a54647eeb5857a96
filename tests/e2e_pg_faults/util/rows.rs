//! The ledger's rows, read straight from the server (not through the product), and the
//! synchronous standby that holds a commit back.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use testkit::pg::Server;

/// The ledger's rows, read straight from the server (not through the product), on one
/// connection made when first needed.
pub struct Rows {
    url: String,
    client: Mutex<Option<postgres::Client>>,
}

/// A row's columns the checks look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowView {
    pub state: String,
    pub rsp_code: Option<String>,
    pub attempts: i32,
}

impl Rows {
    /// `url`: the ledger's URL as the tests' superuser may use it without TLS (the schema in
    /// its `options`).
    pub fn new(url: &str) -> Rows {
        Rows {
            url: url.to_string(),
            client: Mutex::new(None),
        }
    }

    /// `f` on the connection; once more on a new one if the server closed it meanwhile
    /// (restarted).
    pub fn with<T>(&self, f: impl Fn(&mut postgres::Client) -> Result<T, postgres::Error>) -> T {
        let mut held = self.client.lock().unwrap_or_else(|e| e.into_inner());
        let mut last = None;
        for _ in 0..2 {
            if held.as_ref().is_none_or(|c| c.is_closed()) {
                *held = Some(
                    postgres::Client::connect(&self.url, postgres::NoTls)
                        .unwrap_or_else(|e| panic!("cannot read the ledger: {e}")),
                );
            }
            match f(held.as_mut().expect("a client")) {
                Ok(v) => return v,
                Err(e) if e.as_db_error().is_none() => {
                    *held = None;
                    last = Some(e);
                }
                Err(e) => panic!("ledger query: {e}"),
            }
        }
        panic!("ledger query: {}", last.expect("an error"))
    }

    pub fn row(&self, guid: &str) -> Option<RowView> {
        self.with(|c| {
            c.query_opt(
                "SELECT state, rsp_code, attempts FROM tx WHERE guid = $1",
                &[&guid],
            )
        })
        .map(|r| RowView {
            state: r.get(0),
            rsp_code: r.get(1),
            attempts: r.get(2),
        })
    }

    /// Moves SENT rows of `guids` back in time, past resolve's stale-sent floor (60 s), as if
    /// their relay had given up long ago. The number moved.
    pub fn age_sent(&self, guids: &[String]) -> u64 {
        self.with(|c| {
            c.execute(
                "UPDATE tx SET updated_at = now() - interval '120 seconds' \
                 WHERE guid = ANY($1) AND state = 'SENT'",
                &[&guids],
            )
        })
    }
}

/// The synchronous standby every commit must wait for: none is ever connected, so a commit
/// that waits for it waits until the setting goes (`release_standby`) or the server does.
pub const MISSING_STANDBY: &str = "nosuch";

/// Makes every commit that waits for a synchronous standby wait for `MISSING_STANDBY`.
pub fn require_missing_standby(server: &Server) {
    server
        .set_server_default("synchronous_standby_names", MISSING_STANDBY)
        .expect("name a synchronous standby");
}

/// No synchronous standby any more: the commits waiting for one return.
pub fn release_standby(server: &Server) {
    server
        .set_server_default("synchronous_standby_names", "")
        .expect("forget the synchronous standby");
}

/// Waits (up to 10 s) until a session of the server waits for the synchronous standby: a
/// claim whose COMMIT is flushed locally and not acknowledged.
pub fn wait_for_a_commit_on_the_standby(rows: &Rows) {
    let limit = Instant::now() + Duration::from_secs(10);
    while !rows.with(|c| {
        c.query_one(
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
            &[],
        )
        .map(|r| r.get::<_, bool>(0))
    }) {
        assert!(
            Instant::now() < limit,
            "no commit waits for the synchronous standby"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (up to 10 s) for `guid`'s row, which a commit released late is writing.
pub fn wait_for_row(rows: &Rows, guid: &str) -> RowView {
    let limit = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(r) = rows.row(guid) {
            return r;
        }
        assert!(Instant::now() < limit, "{guid} has no row");
        std::thread::sleep(Duration::from_millis(10));
    }
}
