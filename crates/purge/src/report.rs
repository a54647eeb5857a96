//! What purge prints of its run: the summary line, its `--json` object, its exit code and
//! its counts for `--metrics-file` (`cli::Report`), of the engine's `PurgeSummary`.

use cli::EXIT_SETTLED;
use cli::Report;
use cli::report::counts;
use engine::batch::PurgeSummary;
use serde::Serialize;

/// The engine's summary, as purge reports it.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Summary(pub PurgeSummary);

impl Report for Summary {
    fn line(&self) -> String {
        let mut line = format!(
            "purge: {} deleted (DONE rows older than {} days)",
            self.0.deleted, self.0.days
        );
        if let Some(h) = self.0.history_days {
            line.push_str(&format!(
                ", {} history rows deleted (older than {h} days)",
                self.0.history_deleted
            ));
        }
        line
    }

    fn exit_code(&self) -> u8 {
        EXIT_SETTLED
    }

    fn counts(&self) -> Vec<(&'static str, u64)> {
        counts(&[("deleted", self.0.deleted)])
    }
}
