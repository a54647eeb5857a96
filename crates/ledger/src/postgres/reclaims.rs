//! Re-claims of FAILED rows, batched as claims are (`claims`): one guarded `UPDATE tx … FROM
//! unnest(…) … RETURNING tx.guid, tx.attempts` per kind and one commit for every re-claim a
//! writer found waiting. The rows returned are the re-claims won, with the attempt each won.

use std::collections::HashMap;
use std::sync::Arc;

use super::batch::{Waiting, all_failed, deadline_of};
use super::pool::{PgConn, Pool};
use crate::error::{LedgerError, Result};
use crate::writes::reclaim_failed::POSTGRES_BATCH as RECLAIM_FAILED_BATCH;
use crate::writes::reclaim_for_resend::POSTGRES_BATCH as RECLAIM_FOR_RESEND_BATCH;
use postgres::{GenericClient, Statement};

/// A re-claim, as `ReclaimFailed::reclaim_failed` or `ReclaimForResend::reclaim_for_resend`
/// (`writes`) takes it.
pub(crate) enum Reclaim {
    /// A channel's resend of a FAILED GUID, byte for byte, by the channel that owns it.
    Resent {
        guid: String,
        request: Vec<u8>,
        channel: Option<String>,
    },
    /// `reprocess`: a FAILED/E902 row below the attempt cap.
    ForResend { guid: String, max_attempts: i32 },
}

impl Reclaim {
    fn guid(&self) -> &str {
        match self {
            Reclaim::Resent { guid, .. } | Reclaim::ForResend { guid, .. } => guid,
        }
    }
}

/// The two statements' parameters: each GUID once per kind, in GUID order (see `claims`).
#[derive(Default)]
struct Params {
    resent: (Vec<String>, Vec<Vec<u8>>, Vec<Option<String>>),
    for_resend: (Vec<String>, Vec<i32>),
}

/// Which writes of `batch` go into the statements (the first of each GUID and kind; a later
/// one of the same GUID and kind can only lose, as it would have after the first), and their
/// parameters.
fn params(batch: &[Waiting<Reclaim, Option<i64>>]) -> (Vec<bool>, Params) {
    let mut order: Vec<usize> = (0..batch.len()).collect();
    let kind = |i: usize| matches!(batch[i].item, Reclaim::ForResend { .. });
    order.sort_by(|&a, &b| (kind(a), batch[a].item.guid()).cmp(&(kind(b), batch[b].item.guid())));
    order.dedup_by(|&mut later, &mut first| {
        (kind(later), batch[later].item.guid()) == (kind(first), batch[first].item.guid())
    });
    let mut included = vec![false; batch.len()];
    let mut p = Params::default();
    for i in order {
        included[i] = true;
        match &batch[i].item {
            Reclaim::Resent {
                guid,
                request,
                channel,
            } => {
                p.resent.0.push(guid.clone());
                p.resent.1.push(request.clone());
                p.resent.2.push(channel.clone());
            }
            Reclaim::ForResend { guid, max_attempts } => {
                p.for_resend.0.push(guid.clone());
                p.for_resend.1.push(*max_attempts);
            }
        }
    }
    (included, p)
}

/// What each kind's statement won: GUID → attempt.
type Won = (HashMap<String, i64>, HashMap<String, i64>);

/// Runs each kind's statement that has rows, in one transaction if both have.
fn run_statements(c: &mut PgConn, p: &Params) -> std::result::Result<Won, postgres::Error> {
    let sts = (
        c.prepared(RECLAIM_FAILED_BATCH)?,
        c.prepared(RECLAIM_FOR_RESEND_BATCH)?,
    );
    if p.resent.0.is_empty() || p.for_resend.0.is_empty() {
        return statements(&mut c.client, &sts, p);
    }
    let mut t = c.client.transaction()?;
    let won = statements(&mut t, &sts, p)?;
    t.commit()?;
    Ok(won)
}

fn statements(
    c: &mut impl GenericClient,
    (resent, for_resend): &(Statement, Statement),
    p: &Params,
) -> std::result::Result<Won, postgres::Error> {
    let won = |rows: Vec<postgres::Row>| -> std::result::Result<HashMap<String, i64>, _> {
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get::<_, i32>(1)?.into())))
            .collect()
    };
    let mut out = Won::default();
    if !p.resent.0.is_empty() {
        let (g, r, ch) = &p.resent;
        out.0 = won(c.query(resent, &[g, r, ch])?)?;
    }
    if !p.for_resend.0.is_empty() {
        let (g, m) = &p.for_resend;
        out.1 = won(c.query(for_resend, &[g, m])?)?;
    }
    Ok(out)
}

/// Runs `batch`; each re-claim's result in its order: the attempt won, none, or an error
/// (E905 for the caller: not claimed, no core call).
pub(super) fn run(
    pool: &Pool,
    batch: &[Waiting<Reclaim, Option<i64>>],
) -> Vec<Result<Option<i64>>> {
    let (included, p) = params(batch);
    let p = Arc::new(p);
    let ran = pool.run_noting_rerun("re-claiming", deadline_of(batch), move |c| {
        run_statements(c, &p)
    });
    let ((resent, for_resend), reran) = match ran {
        Ok(ran) => ran,
        Err(e) => return all_failed(batch.len(), &e),
    };
    batch
        .iter()
        .zip(included)
        .map(|(w, included)| {
            let won = match &w.item {
                Reclaim::Resent { guid, .. } => resent.get(guid),
                Reclaim::ForResend { guid, .. } => for_resend.get(guid),
            };
            match (won.filter(|_| included), reran) {
                (Some(&attempt), _) => Ok(Some(attempt)),
                (None, false) => Ok(None),
                // As for a claim: the first run's COMMIT may have been the one that won.
                (None, true) => Err(LedgerError::Unavailable(
                    "re-claiming: the connection broke while the re-claim was committed, and \
                     its second run found the row taken: the first may have won; not claimed"
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

    fn resent(guid: &str) -> Waiting<Reclaim, Option<i64>> {
        waiting(Reclaim::Resent {
            guid: guid.into(),
            request: b"r".to_vec(),
            channel: None,
        })
    }

    fn for_resend(guid: &str) -> Waiting<Reclaim, Option<i64>> {
        waiting(Reclaim::ForResend {
            guid: guid.into(),
            max_attempts: 3,
        })
    }

    #[test]
    fn a_batch_reclaims_each_guid_once_per_kind_by_its_first_write() {
        let batch = vec![
            resent("b"),
            for_resend("a"),
            resent("a"),
            resent("b"),
            for_resend("a"),
        ];
        let (included, p) = params(&batch);
        assert_eq!(included, vec![true, true, true, false, false]);
        assert_eq!(p.resent.0, vec!["a", "b"]);
        assert_eq!(p.for_resend.0, vec!["a"]);
    }
}
