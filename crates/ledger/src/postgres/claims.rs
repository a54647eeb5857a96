//! Claims of new GUIDs, batched: one `INSERT … SELECT … FROM unnest(…) ON CONFLICT (guid) DO
//! NOTHING RETURNING guid` and one commit for every claim a writer found waiting. The rows it
//! returns are the claims won; each is still decided by the database, row by row.

use std::collections::HashSet;
use std::sync::Arc;

use super::batch::{Waiting, all_failed, deadline_of};
use super::pool::Pool;
use crate::error::{LedgerError, Result};
use crate::writes::claim_new::POSTGRES_BATCH as CLAIM_BATCH;

/// A claim of a new GUID, as `ClaimNew::claim_new` (`writes::claim_new`) takes it.
pub(crate) struct Claim {
    pub guid: String,
    pub tx_code: String,
    pub request: Vec<u8>,
    pub channel: Option<String>,
}

/// The claims of `batch` that go into the statement: each GUID once, in GUID order (two
/// batches taking the same GUIDs lock them in the same order, so they cannot deadlock); a
/// GUID claimed twice in one batch can be won only by its first claim.
fn once_each_in_guid_order(batch: &[Waiting<Claim, bool>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by(|&a, &b| batch[a].item.guid.cmp(&batch[b].item.guid));
    order.dedup_by(|&mut later, &mut first| batch[later].item.guid == batch[first].item.guid);
    order
}

/// Runs `batch` as one statement; each claim's result in its order: won, lost, or an error
/// (E905 for the caller: not claimed, no core call).
pub(super) fn run(pool: &Pool, batch: &[Waiting<Claim, bool>]) -> Vec<Result<bool>> {
    let order = once_each_in_guid_order(batch);
    let column = |f: &dyn Fn(&Claim) -> Option<String>| -> Vec<Option<String>> {
        order.iter().map(|&i| f(&batch[i].item)).collect()
    };
    let guids = column(&|c| Some(c.guid.clone()));
    let codes = column(&|c| Some(c.tx_code.clone()));
    let channels = column(&|c| c.channel.clone());
    let requests: Vec<Vec<u8>> = order
        .iter()
        .map(|&i| batch[i].item.request.clone())
        .collect();
    let params = Arc::new((guids, codes, requests, channels));
    let ran = pool.run_noting_rerun("claiming", deadline_of(batch), move |c| {
        let st = c.prepared(CLAIM_BATCH)?;
        let (g, t, r, ch) = &*params;
        let rows = c.client.query(&st, &[g, t, r, ch])?;
        rows.iter()
            .map(|r| r.try_get::<_, String>(0))
            .collect::<std::result::Result<HashSet<String>, _>>()
    });
    let (won, reran): (HashSet<String>, bool) = match ran {
        Ok(ran) => ran,
        Err(e) => return all_failed(batch.len(), &e),
    };
    let firsts: HashSet<usize> = order.iter().copied().collect();
    batch
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let first = firsts.contains(&i);
            match (won.contains(&w.item.guid) && first, reran) {
                (true, _) => Ok(true),
                (false, false) => Ok(false),
                // The first run's COMMIT may have been the one that won: nobody can know.
                (false, true) => Err(LedgerError::Unavailable(
                    "claiming: the connection broke while the claim was committed, and its \
                     second run found the row taken: the first may have won; not claimed"
                        .into(),
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::batch::waiting;

    fn claim(guid: &str) -> Waiting<Claim, bool> {
        waiting(Claim {
            guid: guid.into(),
            tx_code: "TRNF".into(),
            request: Vec::new(),
            channel: None,
        })
    }

    #[test]
    fn a_batch_claims_each_guid_once_by_its_first_claim_in_guid_order() {
        let batch: Vec<_> = ["c", "a", "c", "b", "a"].map(claim).into();
        assert_eq!(once_each_in_guid_order(&batch), vec![1, 3, 0]);
    }
}
