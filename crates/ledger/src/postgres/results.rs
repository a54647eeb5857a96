//! Results (guarded transitions, `writes::transition`), batched: `UPDATE tx … FROM unnest(…) AS v(…) WHERE tx.guid
//! = v.guid AND tx.state = v.from_state AND …attempt and age as SQLite's… RETURNING
//! tx.guid`, one commit for every change a writer found waiting. Each row still moves only
//! from the state (and attempt) its change names; the rows returned are the changes made.
//!
//! A statement carries one GUID at most once (an UPDATE … FROM that joins a row twice
//! changes it once, by either) and one actor (who and why, read by the history trigger once
//! per statement), so a batch is cut into rounds, run in order in one transaction: a
//! GUID's second change in a batch runs after its first, as it would have alone.

use std::collections::HashSet;
use std::sync::Arc;

use super::attempts;
use super::batch::{Waiting, all_failed, deadline_of};
use super::pool::{PgConn, Pool};
use super::sql::{ACTOR, LOCK_ROWS};
use crate::error::Result;
use crate::state::Change;
use crate::writes::transition::POSTGRES_BATCH as TRANSITION_BATCH;
use postgres::types::ToSql;

/// One statement's changes, all with the same actor and each GUID once.
#[derive(Default)]
struct Round {
    who: Option<String>,
    reason: Option<String>,
    guids: Vec<String>,
    from: Vec<String>,
    to: Vec<String>,
    codes: Vec<String>,
    responses: Vec<Vec<u8>>,
    attempts: Vec<Option<i32>>,
    min_ages: Vec<Option<f64>>,
}

impl Round {
    fn push(&mut self, c: &Change) {
        self.guids.push(c.guid.clone());
        self.from.push(c.from.as_str().to_string());
        self.to.push(c.to.as_str().to_string());
        self.codes.push(c.code_str().to_string());
        self.responses.push(c.response.clone());
        self.attempts.push(c.attempt.map(attempts));
        self.min_ages.push(c.min_age_secs.map(|s| s as f64));
    }

    fn has(&self, guid: &str) -> bool {
        self.guids.iter().any(|g| g == guid)
    }

    /// The round's statement's parameters.
    fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.guids,
            &self.from,
            &self.to,
            &self.codes,
            &self.responses,
            &self.attempts,
            &self.min_ages,
        ]
    }

    /// Whether the round can run as one autocommitted statement: no actor of its own.
    fn is_plain(&self) -> bool {
        self.who.is_none() && self.reason.is_none()
    }
}

/// `batch` cut into rounds: each change goes to the first round after its GUID's last one
/// that has its actor. With each change's round. The changes are placed in GUID order (a
/// stable sort keeps a GUID's changes in their own order), so each round's statement takes
/// its rows in the order every other batch takes them: two relays' batches of the same GUIDs
/// cannot deadlock (seen under the chaos run: PostgreSQL's deadlock detector aborting one
/// batch after a second).
fn rounds(batch: &[Waiting<Change, bool>]) -> (Vec<Round>, Vec<usize>) {
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by(|&a, &b| batch[a].item.guid.cmp(&batch[b].item.guid));
    let mut rounds: Vec<Round> = Vec::new();
    let mut placed = vec![0; batch.len()];
    for at in order {
        let c = &batch[at].item;
        let after = rounds
            .iter()
            .rposition(|r| r.has(&c.guid))
            .map_or(0, |i| i + 1);
        let fits = |r: &Round| r.who == c.who && r.reason == c.reason;
        let i = match rounds[after..].iter().position(fits) {
            Some(i) => after + i,
            None => {
                rounds.push(Round {
                    who: c.who.clone(),
                    reason: c.reason.clone(),
                    ..Round::default()
                });
                rounds.len() - 1
            }
        };
        rounds[i].push(c);
        placed[at] = i;
    }
    (rounds, placed)
}

/// Runs the rounds, in one transaction unless there is one plain round; the GUIDs each
/// changed.
fn run_rounds(
    c: &mut PgConn,
    rounds: &[Round],
) -> std::result::Result<Vec<HashSet<String>>, postgres::Error> {
    let st = c.prepared(TRANSITION_BATCH)?;
    let changed = |rows: Vec<postgres::Row>| -> std::result::Result<HashSet<String>, _> {
        rows.iter().map(|r| r.try_get(0)).collect()
    };
    if let [only] = rounds
        && only.is_plain()
    {
        return Ok(vec![changed(c.client.query(&st, &only.params())?)?]);
    }
    let actor = c.prepared(ACTOR)?;
    let lock = c.prepared(LOCK_ROWS)?;
    let session_who = c.who.clone();
    let mut t = c.client.transaction()?;
    // Rounds lock rows one after another, each in GUID order; two transactions whose rounds
    // took them in another order could still deadlock: every row first, in one order.
    let mut all: Vec<&String> = rounds.iter().flat_map(|r| &r.guids).collect();
    all.sort();
    all.dedup();
    t.query(&lock, &[&all])?;
    let mut made = Vec::with_capacity(rounds.len());
    for r in rounds {
        let who = r.who.as_ref().unwrap_or(&session_who);
        t.execute(&actor, &[who, &r.reason])?;
        made.push(changed(t.query(&st, &r.params())?)?);
    }
    t.commit()?;
    Ok(made)
}

/// Runs `batch` under the pool's deadline; each change's result in its order: made or not.
pub(super) fn run(pool: &Pool, batch: &[Waiting<Change, bool>]) -> Vec<Result<bool>> {
    let (rounds, placed) = rounds(batch);
    let rounds = Arc::new(rounds);
    let ran = pool.run_by("recording a result", deadline_of(batch), move |c| {
        run_rounds(c, &rounds)
    });
    match ran {
        Ok(made) => batch
            .iter()
            .zip(placed)
            .map(|(w, round)| Ok(made[round].contains(&w.item.guid)))
            .collect(),
        Err(e) => all_failed(batch.len(), &e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::batch::waiting;
    use crate::state::State;

    fn change(guid: &str, from: State, reason: Option<&str>) -> Waiting<Change, bool> {
        let c = Change::new(guid, from, Some(1), State::Done, *b"0000", Vec::new());
        waiting(match reason {
            Some(r) => c.because(r),
            None => c,
        })
    }

    /// Each round has one actor and each GUID once; a GUID's later change runs in a later
    /// round than its earlier one.
    #[test]
    fn a_batch_is_cut_into_rounds_of_one_actor_and_unique_guids_in_order() {
        let batch = vec![
            change("a", State::Sent, None),
            change("b", State::Sent, Some("read timeout")),
            change("c", State::Sent, None),
            change("a", State::Unknown, None),
            change("d", State::Sent, Some("read timeout")),
            change("a", State::Failed, Some("read timeout")),
        ];
        let (rounds, placed) = rounds(&batch);
        assert_eq!(placed, vec![0, 2, 0, 1, 2, 2]);
        let guids: Vec<Vec<&str>> = rounds
            .iter()
            .map(|r| r.guids.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(guids, vec![vec!["a", "c"], vec!["a"], vec!["a", "b", "d"]]);
        assert_eq!(rounds[0].from, vec!["SENT", "SENT"]);
        assert_eq!(rounds[1].from, vec!["UNKNOWN"]);
        assert_eq!(rounds[2].from, vec!["FAILED", "SENT", "SENT"]);
        assert!(rounds[0].is_plain() && rounds[1].is_plain() && !rounds[2].is_plain());
        assert_eq!(rounds[2].reason.as_deref(), Some("read timeout"));
    }

    /// Whatever order the changes arrive in, each round takes its rows in GUID order.
    #[test]
    fn every_round_is_in_guid_order() {
        let batch: Vec<_> = ["m", "c", "x", "a", "c", "b", "m"]
            .iter()
            .enumerate()
            .map(|(i, g)| change(g, State::Sent, (i % 2 == 0).then_some("late")))
            .collect();
        let (rounds, _) = rounds(&batch);
        for r in &rounds {
            assert!(r.guids.is_sorted(), "{:?}", r.guids);
        }
    }
}
