//! A run's summary as the tools print it: one line, or one JSON object with `--json`.

use ledger::migrate::MigrateSummary;
use ledger::{Row, State};
use serde::Serialize;

use crate::{EXIT_LEFT, EXIT_SETTLED};

/// What a tool prints: one summary line, or one JSON object.
pub trait Report: Serialize {
    fn line(&self) -> String;
    fn exit_code(&self) -> u8;
    /// The summary's row counts by outcome, for `--metrics-file`.
    fn counts(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Prints a report: the text, or with `json` one JSON object carrying the tool's name and
/// exit code. Returns the exit code, also when stdout's reader has gone (`outln!`).
pub fn print_report<R: Report>(tool: &str, report: &R, json: bool) -> u8 {
    let code = report.exit_code();
    if json {
        let mut v = serde_json::to_value(report).expect("plain struct serialises");
        if let Some(obj) = v.as_object_mut() {
            obj.insert("tool".into(), tool.into());
            obj.insert("exit_code".into(), code.into());
        }
        crate::outln!("{v}");
    } else {
        crate::outln!("{}", report.line());
    }
    code
}

pub fn counts(named: &[(&'static str, usize)]) -> Vec<(&'static str, u64)> {
    named.iter().map(|&(k, n)| (k, n as u64)).collect()
}

/// 0 when nothing is left for a later run, else 3.
pub fn settled_if(left: usize) -> u8 {
    if left == 0 { EXIT_SETTLED } else { EXIT_LEFT }
}

impl Report for MigrateSummary {
    fn line(&self) -> String {
        format!(
            "migrate: {} rows read, {} copied, {} already present, {} refused",
            self.read, self.copied, self.present, self.refused
        )
    }

    fn exit_code(&self) -> u8 {
        settled_if(self.refused)
    }
}

/// A row as listed by `--dry-run` and `inspect`.
#[derive(Debug, Serialize)]
pub struct Listed {
    pub guid: String,
    pub state: State,
    pub rsp_code: Option<String>,
    pub attempts: Option<i64>,
    pub updated_at: String,
}

impl Listed {
    pub fn of(row: &Row) -> Listed {
        Listed {
            guid: row.guid.clone(),
            state: row.state,
            rsp_code: row.rsp_code.clone(),
            attempts: row.attempts,
            updated_at: row.updated_at.clone(),
        }
    }

    /// The header of `line`'s columns.
    pub const HEADER: &str = "guid\tstate\trsp_code\tattempts\tupdated_at";

    /// Tab-separated, `-` for NULL.
    pub fn line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}",
            self.guid,
            self.state,
            self.rsp_code.as_deref().unwrap_or("-"),
            self.attempts.map_or("-".to_string(), |a| a.to_string()),
            self.updated_at
        )
    }
}

/// What `--dry-run` prints: the rows, then a line saying nothing was done.
#[derive(Debug, Serialize)]
pub struct DryRun {
    pub tool: &'static str,
    pub dry_run: bool,
    pub count: usize,
    pub rows: Vec<Listed>,
}

impl DryRun {
    pub fn new(tool: &'static str, rows: &[Row]) -> DryRun {
        DryRun {
            tool,
            dry_run: true,
            count: rows.len(),
            rows: rows.iter().map(Listed::of).collect(),
        }
    }
}

impl Report for DryRun {
    fn line(&self) -> String {
        let mut out = format!("{}\n", Listed::HEADER);
        for r in &self.rows {
            out.push_str(&r.line());
            out.push('\n');
        }
        out.push_str(&format!(
            "{}: dry run, {} rows selected, nothing sent or written",
            self.tool, self.count
        ));
        out
    }

    fn exit_code(&self) -> u8 {
        EXIT_SETTLED
    }
}
