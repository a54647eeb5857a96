//! Phase 4: the evidence. The ledger's rows (read through the ledger library as a batch tool
//! reads them, whichever backend holds them), the core's books (`/_stats` and an inquiry per
//! booked GUID), what every channel was told and what the relays logged their late replies
//! settled go to the checks (`crate::check`); then `reconcile` reads the ledger against the
//! core's booking journal over the whole run (check `(i)`), and the core is stopped.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use ledger::Row;
use serde_json::Value;
use testkit::CoreHttp;

use super::Run;
use super::quiesce::Quiesced;
use crate::check::{self, Checks, Reconciled};
use crate::procs;
use crate::tools::TOOL_LIMIT;

/// How long one answer of the core may take (`/_stats` of a long run lists every GUID).
const CORE_TIMEOUT: Duration = Duration::from_secs(10);

/// How far the reconciliation window reaches beyond the run on each side.
const WINDOW_MARGIN: Duration = Duration::from_secs(60);

/// What the checks found, with what the report shows beside them.
pub(super) struct Verdict {
    pub rows: Vec<Row>,
    /// The core's `/_stats`.
    pub stats: Value,
    pub checks: Checks,
    /// What `reconcile` said (or why it said nothing).
    pub reconciled: Result<Reconciled, String>,
}

impl Run<'_> {
    pub(super) fn check(&mut self, q: &Quiesced) -> anyhow::Result<Verdict> {
        let settled = match q.leftovers {
            0 => format!("settled after {} rounds", q.settle_rounds),
            n => format!(
                "settling ended after {} rounds, {n} rows unsettled",
                q.settle_rounds
            ),
        };
        println!(
            "chaos: {:.1} s: {settled}; checking",
            self.start.elapsed().as_secs_f64()
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
        let reconciled = self.reconcile();
        check::reconciled(&mut checks, &reconciled);
        self.core.kill();
        println!(
            "chaos: {:.1} s: checked",
            self.start.elapsed().as_secs_f64()
        );
        Ok(Verdict {
            rows,
            stats,
            checks,
            reconciled,
        })
    }

    /// `reconcile --db … --journal … --from … --to … --json` over a window that holds the
    /// whole run (from a minute before the core's first start to a minute after now).
    fn reconcile(&self) -> Result<Reconciled, String> {
        let now = SystemTime::now();
        let began = now - self.start.elapsed();
        let args = vec![
            "--db".to_string(),
            self.ledger.arg(),
            "--journal".into(),
            super::path_arg(&self.work.journal),
            "--from".into(),
            rfc3339(began - WINDOW_MARGIN),
            "--to".into(),
            rfc3339(now + WINDOW_MARGIN),
            "--json".into(),
        ];
        let run = procs::run_tool(
            &self.bins.reconcile,
            &args,
            &self.work.tools_dir,
            "reconcile",
            TOOL_LIMIT,
            self.interrupted,
        )
        .map_err(|e| format!("{e:#}"))?;
        match run.code() {
            Some(0 | 1) => check::parse_reconcile(&run.stdout),
            code => Err(format!(
                "{} exited {code:?}{}: {}",
                args.join(" "),
                if run.timed_out { " (timed out)" } else { "" },
                run.stderr.trim()
            )),
        }
    }
}

/// `YYYY-MM-DDThh:mm:ssZ`, as `--from`/`--to` take it.
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    time::OffsetDateTime::from_unix_timestamp(secs as i64)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".into())
}
