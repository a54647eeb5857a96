//! What reprocess prints of its run: the summary line, its `--json` object, its exit code and
//! its counts for `--metrics-file` (`cli::Report`), of the engine's `ReprocessSummary`.

use cli::Report;
use cli::report::{counts, settled_if};
use engine::batch::ReprocessSummary;
use serde::Serialize;

/// The engine's summary, as reprocess reports it.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Summary(pub ReprocessSummary);

impl Report for Summary {
    fn line(&self) -> String {
        let mut line = format!(
            "reprocess: {} examined, {} sent, {} DONE, {} FAILED, {} UNKNOWN, {} not tried (core unreachable), {} skipped, {} changed by another writer",
            self.0.examined,
            self.0.sent,
            self.0.done,
            self.0.failed,
            self.0.unknown,
            self.0.not_tried,
            self.0.skipped,
            self.0.raced
        );
        // Only a run on a recovering ledger (contract §11) has these: the line stays as it
        // was for every other run.
        if self.0.recovered + self.0.recovery_left > 0 {
            line.push_str(&format!(
                "; recovering: {} settled DONE from the core's booking (not sent), {} left \
                 (the core's answer was no proof either way)",
                self.0.recovered, self.0.recovery_left
            ));
        }
        line
    }

    fn exit_code(&self) -> u8 {
        settled_if(self.0.failed + self.0.unknown + self.0.not_tried + self.0.skipped)
    }

    fn counts(&self) -> Vec<(&'static str, u64)> {
        counts(&[
            ("examined", self.0.examined),
            ("sent", self.0.sent),
            ("done", self.0.done),
            ("failed", self.0.failed),
            ("unknown", self.0.unknown),
            ("not_tried", self.0.not_tried),
            ("skipped", self.0.skipped),
            ("changed_by_another_writer", self.0.raced),
            ("recovered", self.0.recovered),
            ("recovery_left", self.0.recovery_left),
        ])
    }
}
