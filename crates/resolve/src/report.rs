//! What resolve prints of its run: the summary line, its `--json` object, its exit code and
//! its counts for `--metrics-file` (`cli::Report`), of the engine's `ResolveSummary`.

use cli::Report;
use cli::report::{counts, settled_if};
use engine::batch::ResolveSummary;
use serde::Serialize;

/// The engine's summary, as resolve reports it.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Summary(pub ResolveSummary);

impl Report for Summary {
    fn line(&self) -> String {
        format!(
            "resolve: {} examined, {} DONE, {} FAILED, {} left (inquiry error), {} SENT->UNKNOWN, {} skipped, {} changed by another writer, {} need an operator",
            self.0.examined,
            self.0.done,
            self.0.failed,
            self.0.left,
            self.0.sent_to_unknown,
            self.0.skipped,
            self.0.raced,
            self.0.needs_operator.len()
        )
    }

    /// 3 also while any GUID waits for an operator, however long ago resolve gave up on it.
    fn exit_code(&self) -> u8 {
        settled_if(
            self.0.left + self.0.sent_to_unknown + self.0.skipped + self.0.needs_operator.len(),
        )
    }

    fn counts(&self) -> Vec<(&'static str, u64)> {
        counts(&[
            ("examined", self.0.examined),
            ("done", self.0.done),
            ("failed", self.0.failed),
            ("left", self.0.left),
            ("sent_to_unknown", self.0.sent_to_unknown),
            ("skipped", self.0.skipped),
            ("changed_by_another_writer", self.0.raced),
        ])
    }
}
