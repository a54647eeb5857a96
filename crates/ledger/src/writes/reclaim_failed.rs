//! The relay's re-claim of a `FAILED` GUID whose earlier send provably never left, for the
//! very request stored with it, by the channel that owns the row.

use rusqlite::params;

use crate::error::Result;
use crate::postgres::PgStore;
use crate::postgres::reclaims::Reclaim;
use crate::sqlite::{Hold, Ledger};

/// A GUID belongs to the channel that claimed it (contract §8): a named channel (?3) may
/// re-claim a row of its own or one with no channel (and then writes its name); an anonymous
/// one (?3 NULL) only a row with no channel.
const SQLITE: &str = "\
    UPDATE tx SET state = 'SENT', attempts = attempts + 1, updated_at = datetime('now'), \
        channel = coalesce(channel, ?3) \
    WHERE guid = ?1 AND state = 'FAILED' AND request = ?2 \
    AND (channel IS NULL OR channel = ?3) \
    RETURNING attempts";

/// Re-claims of FAILED rows resent by a channel, batched (`postgres::reclaims`): $1 GUIDs
/// (each once), $2 the requests they must equal byte for byte, $3 channels. Ownership as
/// SQLite's twin: a named channel re-claims its own rows and rows with no channel (writing
/// its name), an anonymous one (NULL) only rows with no channel. The rows returned: the
/// re-claims won, with the attempt each won.
pub(crate) const POSTGRES_BATCH: &str = "\
    UPDATE tx SET state = 'SENT', attempts = tx.attempts + 1, updated_at = now(), \
        channel = coalesce(tx.channel, v.channel) \
    FROM unnest($1::text[], $2::bytea[], $3::text[]) AS v(guid, request, channel) \
    WHERE tx.guid = v.guid AND tx.state = 'FAILED' AND tx.request = v.request \
    AND (tx.channel IS NULL OR tx.channel = v.channel) \
    RETURNING tx.guid, tx.attempts";

pub trait ReclaimFailed {
    /// The relay's re-claim of a `FAILED` row for the very request stored with it, by
    /// `channel`: only a row of its own or one with no channel (which the re-claim then
    /// gives it), the ownership part of the same guarded UPDATE; the attempt the caller now
    /// owns, if that UPDATE changed the row.
    fn reclaim_failed(
        &self,
        guid: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<Option<i64>>;
}

impl Ledger {
    /// The relay's re-claim (the row was read before; this makes the read irrelevant): the
    /// attempt claimed, if the row was ours to claim.
    pub fn reclaim_failed(
        &self,
        guid: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<Option<i64>> {
        self.claim_returning(SQLITE, params![guid, request, channel])
    }
}

impl<H: Hold> ReclaimFailed for H {
    fn reclaim_failed(
        &self,
        guid: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<Option<i64>> {
        let (guid, request) = (guid.to_string(), request.to_vec());
        let channel = channel.map(str::to_string);
        self.write_with(move |l| l.reclaim_failed(&guid, &request, channel.as_deref()))
    }
}

impl ReclaimFailed for PgStore {
    fn reclaim_failed(
        &self,
        guid: &str,
        request: &[u8],
        channel: Option<&str>,
    ) -> Result<Option<i64>> {
        self.reclaim(Reclaim::Resent {
            guid: guid.to_string(),
            request: request.to_vec(),
            channel: channel.map(str::to_string),
        })
    }
}
