//! The relay's claim of a new GUID: the GUID is ours iff this inserts its row (`SENT`,
//! attempt 1), naming the channel that claims it in the same statement.

use rusqlite::params;

use crate::error::Result;
use crate::postgres::PgStore;
use crate::postgres::claims::Claim;
use crate::sqlite::{Hold, Ledger};

const SQLITE: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at, channel) \
    VALUES (?1, ?2, 'SENT', ?3, 1, datetime('now'), ?4) \
    ON CONFLICT (guid) DO NOTHING";

/// Claims of new GUIDs, batched (`postgres::claims`): $1 GUIDs (each once), $2 transaction
/// codes, $3 requests, $4 channels; the GUIDs returned are the claims won.
pub(crate) const POSTGRES_BATCH: &str = "\
    INSERT INTO tx (guid, tx_code, state, request, attempts, updated_at, channel) \
    SELECT v.guid, v.tx_code, 'SENT', v.request, 1, now(), v.channel \
    FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[]) \
        WITH ORDINALITY AS v(guid, tx_code, request, channel, n) \
    ORDER BY v.n \
    ON CONFLICT (guid) DO NOTHING \
    RETURNING guid";

pub trait ClaimNew {
    /// The relay's claim: true iff this inserted the row (`SENT`, attempt 1), naming the
    /// `channel` that claims it (contract §8; `None`: anonymous) in the same statement.
    fn claim_new(
        &self,
        guid: &str,
        tx_code: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<bool>;
}

impl Ledger {
    /// Step 1 of the relay: the GUID is ours iff this inserts the row (attempt 1), naming
    /// the `channel` that claims it.
    pub fn claim_new(
        &self,
        guid: &str,
        tx_code: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<bool> {
        self.as_actor(None, None, || {
            let n = self
                .conn
                .prepare_cached(SQLITE)?
                .execute(params![guid, tx_code, request, channel])?;
            Ok(n == 1)
        })
    }
}

/// Every write owns its arguments: it may run on another thread (the group commit's writer).
impl<H: Hold> ClaimNew for H {
    fn claim_new(
        &self,
        guid: &str,
        tx_code: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<bool> {
        let (guid, tx_code, request) = (guid.to_string(), tx_code.to_string(), request.to_vec());
        let channel = channel.map(str::to_string);
        self.write_with(move |l| l.claim_new(&guid, &tx_code, &request, channel.as_deref()))
    }
}

impl ClaimNew for PgStore {
    fn claim_new(
        &self,
        guid: &str,
        tx_code: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<bool> {
        self.claim(Claim {
            guid: guid.to_string(),
            tx_code: tx_code.to_string(),
            request: request.to_vec(),
            channel: channel.map(str::to_string),
        })
    }
}
