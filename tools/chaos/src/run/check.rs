//! Phase 4: the evidence. The ledger's rows (read through the ledger library as a batch tool
//! reads them, whichever backend holds them), the core's books (`/_stats` and an inquiry per
//! booked GUID), what every channel was told and what the relays logged their late replies
//! settled go to the checks (`crate::check`); then the core is stopped.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use ledger::Row;
use serde_json::Value;
use testkit::CoreHttp;

use super::Run;
use super::quiesce::Quiesced;
use crate::check::{self, Checks};

/// How long one answer of the core may take (`/_stats` of a long run lists every GUID).
const CORE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the checks found, with what the report shows beside them.
pub(super) struct Verdict {
    pub rows: Vec<Row>,
    /// The core's `/_stats`.
    pub stats: Value,
    pub checks: Checks,
}

impl Run<'_> {
    pub(super) fn check(&mut self, q: &Quiesced) -> anyhow::Result<Verdict> {
        println!(
            "chaos: {:.1} s: settled after {} rounds; checking",
            self.start.elapsed().as_secs_f64(),
            q.settle_rounds
        );
        let rows = self.ledger.all_rows()?;
        let core = CoreHttp::new(&self.core_url(), CORE_TIMEOUT);
        let stats = core.stats().context("core /_stats")?;
        let by_guid: BTreeMap<String, u64> = stats["by_guid"]
            .as_object()
            .context("/_stats without by_guid")?
            .iter()
            .map(|(g, n)| (g.clone(), n.as_u64().unwrap_or(0)))
            .collect();
        let guids: Vec<String> = by_guid.keys().cloned().collect();
        let bookings = check::fetch_bookings(&core, &guids);
        let mut checks = check::run(&q.sents, &rows, &by_guid, &bookings);
        check::late(&mut checks, &q.late_total().settled, &rows, &by_guid);
        self.core.kill();
        println!(
            "chaos: {:.1} s: checked",
            self.start.elapsed().as_secs_f64()
        );
        Ok(Verdict {
            rows,
            stats,
            checks,
        })
    }
}
