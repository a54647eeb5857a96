//! `--metrics-file PATH` of the batch tools: the run's summary counts in the Prometheus text
//! format, for node_exporter's textfile collector. Written to a new temporary file of a
//! unique name next to `PATH` (created exclusively: a link planted there is not followed),
//! synced, then renamed over `PATH`, so that a scrape never reads half a file (the collector
//! reads only `*.prom`, so the temporary file is never read).
//!
//! Every tool writes the same families, told apart by the `tool` label, so that one
//! collector directory can hold the files of all three:
//!
//! - `txrelay_batch_rows{tool,outcome}`: the summary's counts (`examined`, `done`, …);
//! - `txrelay_batch_exit_code{tool}`: the run's exit code (0 settled, 1 fatal, 3 rows left);
//! - `txrelay_batch_last_run_timestamp_seconds{tool}`: when the run ended, Unix time;
//! - `txrelay_batch_duration_seconds{tool}`: how long it took;
//! - `txrelay_batch_build_info{tool,version,commit}`: 1, naming what ran (as `--version`).

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::COMMIT;

/// The counts of one run, as the tool's summary gives them.
#[derive(Debug, Default)]
pub struct RunCounts {
    rows: Vec<(&'static str, u64)>,
}

impl RunCounts {
    /// Takes the counts of `report`'s summary.
    pub fn record<R: crate::Report + ?Sized>(&mut self, report: &R) {
        self.rows = report.counts();
    }
}

/// The file's text for a run of `tool` that ended with `exit_code` after `took`: the text
/// exposition format (0.0.4), families by name and series by label value, as the
/// `prometheus` crate writes it (the relay's `/metrics`); written here, in a few lines, so
/// that a batch tool links no metrics library.
pub fn render(tool: &str, counts: &RunCounts, exit_code: u8, took: Duration) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut rows = counts.rows.clone();
    rows.sort_by_key(|(outcome, _)| *outcome);
    let mut out = String::new();
    family(
        &mut out,
        "txrelay_batch_build_info",
        "1, labelled with the version and the commit of the batch tool's last run.",
        &[(
            &[
                ("commit", COMMIT),
                ("tool", tool),
                ("version", env!("CARGO_PKG_VERSION")),
            ],
            1.0,
        )],
    );
    family(
        &mut out,
        "txrelay_batch_duration_seconds",
        "How long the batch tool's last run took.",
        &[(&[("tool", tool)], took.as_secs_f64())],
    );
    family(
        &mut out,
        "txrelay_batch_exit_code",
        "Exit code of the batch tool's last run: 0 all settled, 1 fatal, 3 rows left.",
        &[(&[("tool", tool)], f64::from(exit_code))],
    );
    family(
        &mut out,
        "txrelay_batch_last_run_timestamp_seconds",
        "When the batch tool's last run ended, Unix time.",
        &[(&[("tool", tool)], now.as_secs_f64())],
    );
    let labels: Vec<[(&str, &str); 2]> = rows
        .iter()
        .map(|(outcome, _)| [("outcome", *outcome), ("tool", tool)])
        .collect();
    let series: Vec<(&[(&str, &str)], f64)> = labels
        .iter()
        .zip(&rows)
        .map(|(labels, (_, n))| (&labels[..], *n as f64))
        .collect();
    family(
        &mut out,
        "txrelay_batch_rows",
        "Rows of the batch tool's last run, by outcome (its summary's counts).",
        &series,
    );
    out
}

/// One gauge family: its help, its type, and a line per series (labels in name order); none
/// at all without a series (a fatal run has no counts).
fn family(out: &mut String, name: &str, help: &str, series: &[(&[(&str, &str)], f64)]) {
    use std::fmt::Write as _;
    if series.is_empty() {
        return;
    }
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (labels, value) in series {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect();
        let _ = writeln!(out, "{name}{{{}}} {value}", labels.join(","));
    }
}

/// A label value as the format quotes it: backslash, double quote and newline escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes `text` to `path` atomically: into a new file of a unique name in `path`'s
/// directory (`.NAME.XXXXXX.tmp`, created exclusively, so that a link planted there is
/// never followed; mode 0644), synced, then renamed over `path`, then the directory synced
/// (else a power cut can undo the rename: the power-loss run found the file gone, or the
/// previous run's back, after a run that had written it). On failure the temporary file is
/// removed.
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(path.file_name().unwrap_or_default());
    prefix.push(".");
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("resolve.prom");
        let counts = RunCounts {
            rows: vec![("examined", 5), ("done", 3)],
        };
        write_atomically(
            &path,
            &render("resolve", &counts, 3, Duration::from_millis(1500)),
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("txrelay_batch_rows{outcome=\"examined\",tool=\"resolve\"} 5"),
            "{text}"
        );
        assert!(
            text.contains("txrelay_batch_exit_code{tool=\"resolve\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("txrelay_batch_duration_seconds{tool=\"resolve\"} 1.5"),
            "{text}"
        );
        let build = format!(
            "txrelay_batch_build_info{{commit=\"{}\",tool=\"resolve\",version=\"{}\"}} 1\n",
            COMMIT,
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{build}\n{text}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );

        write_atomically(&path, "x 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x 1\n");
        let bad = dir.path().join("no-such-dir").join("f.prom");
        assert!(write_atomically(&bad, "x 1\n").is_err());
    }

    /// The text is what the `prometheus` crate writes for the same gauges (the relay's
    /// encoder), the run's end time aside; label values and help escaped alike.
    #[test]
    fn the_text_is_what_the_prometheus_encoder_writes() {
        let tool = "re\"so\\lve\n";
        let counts = vec![("examined", 5), ("done", 3), ("left", 0)];
        same_as_the_encoder(tool, RunCounts { rows: counts });
        same_as_the_encoder("purge", RunCounts::default());
    }

    fn same_as_the_encoder(tool: &str, counts: RunCounts) {
        use prometheus::{GaugeVec, Opts, Registry, TextEncoder};
        let ours = render(tool, &counts, 3, Duration::from_millis(1500));
        let r = Registry::new();
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = GaugeVec::new(Opts::new(name, help), labels).unwrap();
            r.register(Box::new(g.clone())).unwrap();
            g
        };
        let rows = gauge(
            "txrelay_batch_rows",
            "Rows of the batch tool's last run, by outcome (its summary's counts).",
            &["tool", "outcome"],
        );
        for (outcome, n) in &counts.rows {
            rows.with_label_values(&[tool, outcome]).set(*n as f64);
        }
        gauge(
            "txrelay_batch_exit_code",
            "Exit code of the batch tool's last run: 0 all settled, 1 fatal, 3 rows left.",
            &["tool"],
        )
        .with_label_values(&[tool])
        .set(3.0);
        gauge(
            "txrelay_batch_last_run_timestamp_seconds",
            "When the batch tool's last run ended, Unix time.",
            &["tool"],
        )
        .with_label_values(&[tool])
        .set(0.0);
        gauge(
            "txrelay_batch_duration_seconds",
            "How long the batch tool's last run took.",
            &["tool"],
        )
        .with_label_values(&[tool])
        .set(1.5);
        gauge(
            "txrelay_batch_build_info",
            "1, labelled with the version and the commit of the batch tool's last run.",
            &["tool", "version", "commit"],
        )
        .with_label_values(&[tool, env!("CARGO_PKG_VERSION"), COMMIT])
        .set(1.0);
        let mut theirs = String::new();
        TextEncoder::new()
            .encode_utf8(&r.gather(), &mut theirs)
            .unwrap();
        let ended = |text: &str| -> String {
            text.lines()
                .map(
                    |l| match l.split_once("txrelay_batch_last_run_timestamp_seconds{") {
                        Some(("", rest)) => rest.rsplit_once(' ').unwrap().0.to_string(),
                        _ => l.to_string(),
                    },
                )
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(ended(&ours), ended(&theirs));
    }

    /// A link planted where a fixed temporary name would be (`PATH.tmp`) is never followed:
    /// its target stays as it was, and no temporary file is left behind.
    #[test]
    fn a_planted_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let path = dir.path().join("purge.prom");
        std::os::unix::fs::symlink(&victim, dir.path().join("purge.prom.tmp")).unwrap();
        write_atomically(&path, "x 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x 1\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o644, 0o644, "readable by the collector: {mode:o}");
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["purge.prom", "purge.prom.tmp", "victim"]);
    }
}
