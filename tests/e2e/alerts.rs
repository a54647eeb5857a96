//! `docs/alerts`: the Prometheus rules pass `promtool check rules` and their unit tests
//! (`promtool test rules txrelay.rules.test.yml`: each alert firing and not firing); every
//! alert carries a severity and the annotations an operator needs, its runbook a section of
//! docs/operations.md; and the rules and the Grafana dashboard use only metrics that exist:
//! those a relay serves at `/metrics` (on plain TCP after a request, and with TLS on its
//! channel listener) and those the batch tools write with `--metrics-file`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::*;

/// The alerts the rules must have.
const ALERTS: &[&str] = &[
    "TxrelayRelayDown",
    "TxrelayUnknownTransfers",
    "TxrelayOldestUnknownTooOld",
    "TxrelayNeedsOperator",
    "TxrelaySettleRequestExpired",
    "TxrelayFailedAtAttemptCap",
    "TxrelayPossibleDoubleBooking",
    "TxrelayChannelCertificateExpiring",
    "TxrelayClientCrlStale",
    "TxrelayLedgerNotSampled",
    "TxrelayCoreUnreachable",
    "TxrelayBackupFailing",
];

/// The sections of docs/operations.md a runbook annotation may point at.
const RUNBOOKS: &[&str] = &[
    "relay-down",
    "unknown-piling-up",
    "core-down",
    "database-down-or-read-only",
    "disk-full",
    "possible-double-booking",
    "a-settlement-request-expired",
    "certificate-expiring",
    "client-crl-stale",
];

fn alerts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/alerts")
}

fn read(name: &str) -> String {
    let path = alerts_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `promtool ARGS` in docs/alerts. Without promtool: one line and `None` (skipped), or a
/// failure under `REQUIRE_PROMTOOL=1` (CI).
fn promtool(args: &[&str]) -> Option<Output> {
    match Command::new("promtool")
        .args(args)
        .current_dir(alerts_dir())
        .output()
    {
        Ok(out) => Some(out),
        Err(e) => {
            assert!(
                std::env::var("REQUIRE_PROMTOOL").as_deref() != Ok("1"),
                "REQUIRE_PROMTOOL=1 but promtool cannot be run: {e}"
            );
            eprintln!("skipped: promtool {args:?}: promtool not found ({e})");
            None
        }
    }
}

fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_rules_pass_promtool_check_and_their_unit_tests() {
    let Some(check) = promtool(&["check", "rules", "txrelay.rules.yml"]) else {
        return;
    };
    assert_success("promtool check rules", &check);
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        said.contains(&format!("SUCCESS: {} rules found", ALERTS.len())),
        "{said}"
    );
    let test = promtool(&["test", "rules", "txrelay.rules.test.yml"]).expect("promtool");
    assert_success("promtool test rules", &test);
    // Every alert is tested, firing (an `exp_alerts` with labels) and not (`[]`).
    let tests = read("txrelay.rules.test.yml");
    for alert in ALERTS {
        let evals: Vec<&str> = tests
            .split("- eval_time: ")
            .filter(|e| e.contains(&format!("alertname: {alert}\n")))
            .collect();
        assert!(
            evals.iter().any(|e| e.contains("exp_alerts: []")),
            "{alert}: no test that it stays silent"
        );
        assert!(
            evals.iter().any(|e| e.contains("exp_labels:")),
            "{alert}: no test that it fires"
        );
    }
}

#[test]
fn every_alert_has_a_severity_a_summary_a_description_and_a_runbook() {
    let rules = read("txrelay.rules.yml");
    let alerts: Vec<&str> = rules.split("- alert: ").skip(1).collect();
    let names: Vec<&str> = alerts
        .iter()
        .map(|a| a.lines().next().unwrap().trim())
        .collect();
    assert_eq!(names, ALERTS);
    for (name, alert) in names.iter().zip(&alerts) {
        let field = |key: &str| {
            alert
                .lines()
                .find_map(|l| l.trim().strip_prefix(key))
                .map(|v| v.trim().trim_matches('"').to_string())
                .unwrap_or_else(|| panic!("{name}: no {key}"))
        };
        assert!(
            ["warning", "critical"].contains(&field("severity:").as_str()),
            "{name}"
        );
        assert!(!field("summary:").is_empty(), "{name}");
        assert!(field("description:").len() > 40, "{name}");
        let runbook = field("runbook:");
        let anchor = runbook
            .strip_prefix("docs/operations.md#")
            .unwrap_or_else(|| panic!("{name}: {runbook}"));
        assert!(RUNBOOKS.contains(&anchor), "{name}: {runbook}");
    }
    for critical in ["TxrelayRelayDown", "TxrelayPossibleDoubleBooking"] {
        let alert = alerts[names.iter().position(|n| *n == critical).unwrap()];
        assert!(alert.contains("severity: critical"), "{critical}");
    }
}

/// The metric names in a PromQL expression: its identifiers of our families (`txrelay_*`,
/// `process_*`) and `up`.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in expr.chars().chain([' ']) {
        if c == '"' {
            quoted = !quoted;
        }
        if !quoted && (c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            word.push(c);
            continue;
        }
        if word.starts_with("txrelay_") || word.starts_with("process_") || word == "up" {
            names.push(word.clone());
        }
        word.clear();
    }
    names
}

/// The names of `text`'s samples (a histogram's `_bucket`, `_sum`, `_count`).
fn sample_names(text: &str) -> impl Iterator<Item = String> + '_ {
    samples(text)
        .into_keys()
        .map(|k| k.split('{').next().unwrap().to_string())
        .collect::<Vec<_>>()
        .into_iter()
}

/// Every metric a relay and the batch tools export: a relay on plain TCP after one booked
/// request, one with TLS on its channel listener, and purge's `--metrics-file`; and `up`,
/// Prometheus's own.
fn exported_metrics() -> BTreeSet<String> {
    let s = Scene::new().core(&[]).build();
    let mut names: BTreeSet<String> = ["up".to_string()].into();
    let scrape_of = |extra: &[&str], request: bool| {
        let mut cmd = relay_command(&s.db, &s.core().url(), &["--admin", "127.0.0.1:0"]);
        cmd.args(extra).env("RUST_LOG", "info");
        let relay = Server::start(cmd);
        let admin = admin_addr(&relay);
        if request {
            assert_code(&call(&relay.addr, &msg("G-AL-1", 5, "")), "0000");
        }
        let (status, body) = http_get(&admin, "/metrics");
        assert_eq!(status, 200, "{body}");
        body
    };
    names.extend(sample_names(&scrape_of(&[], true)));
    let pki = testkit::pki::Pki::new("alerts CA");
    let server = pki.server(&["127.0.0.1"]);
    let crl = pki.crl(&[]);
    let tls = [
        "--tls-cert",
        server.cert.to_str().unwrap(),
        "--tls-key",
        server.key.to_str().unwrap(),
        "--client-ca",
        pki.ca().to_str().unwrap(),
        "--client-crl",
        crl.to_str().unwrap(),
    ];
    names.extend(sample_names(&scrape_of(&tls, false)));
    let file = s.db.dir().join("purge.prom");
    purge(
        &s.db,
        &["--days", "7", "--metrics-file", file.to_str().unwrap()],
    )
    .expect_code(EXIT_SETTLED);
    names.extend(sample_names(&std::fs::read_to_string(&file).unwrap()));
    names
}

/// Every `expr` of the dashboard's JSON, wherever it is.
fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

#[test]
fn the_rules_and_the_dashboard_use_only_metrics_that_are_exported() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("grafana-dashboard.json")).expect("the dashboard is JSON");
    assert_eq!(dashboard["title"], "txrelay");
    let panels = dashboard["panels"].as_array().expect("panels");
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    let mut dash_exprs = Vec::new();
    exprs(&dashboard, &mut dash_exprs);
    let rules = read("txrelay.rules.yml");
    let rule_exprs: Vec<String> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
        .map(str::to_string)
        .collect();
    assert_eq!(rule_exprs.len(), ALERTS.len());

    let exported = exported_metrics();
    let mut used = BTreeSet::new();
    for expr in dash_exprs.iter().chain(&rule_exprs) {
        for name in metric_names(expr) {
            assert!(
                exported.contains(&name),
                "{name} (in {expr}) is not exported; exported: {exported:?}"
            );
            used.insert(name);
        }
    }
    // What the issue asks to watch is on the dashboard.
    for name in [
        "txrelay_ledger_needs_operator",
        "txrelay_ledger_failed_at_attempt_cap",
        "txrelay_ledger_oldest_failed_age_seconds",
        "txrelay_ledger_oldest_unknown_age_seconds",
        "txrelay_possible_double_bookings_total",
        "txrelay_tls_cert_expiry_seconds",
        "txrelay_build_info",
        "process_resident_memory_bytes",
        "txrelay_batch_exit_code",
    ] {
        assert!(
            dash_exprs
                .iter()
                .any(|e| metric_names(e).iter().any(|n| n == name)),
            "{name} is not on the dashboard"
        );
    }
    assert!(used.len() > 25, "{used:?}");
}

#[test]
fn every_runbook_an_alert_may_point_at_is_a_section_of_operations_md() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md");
    let doc = std::fs::read_to_string(&path).expect("docs/operations.md");
    for anchor in RUNBOOKS {
        assert!(
            doc.contains(&format!("<a id=\"{anchor}\"></a>")),
            "docs/operations.md has no section #{anchor}"
        );
    }
}
