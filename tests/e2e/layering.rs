//! The layering docs/layout.md's table states, checked against the dependency graph cargo
//! resolves for each package (`cargo tree -e normal`: what its binary links): a tool links
//! only what it uses. The table is what a reviewer reads; this is what keeps it true.

use std::collections::BTreeSet;
use std::process::Command;

/// Every package `root` links (normal dependencies only, features as for `root` alone):
/// `cargo tree -e normal -p ROOT`, itself excluded.
fn links(root: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree", "--locked", "-e", "normal", "--prefix", "none", "-p", root,
        ])
        .args(["--format", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut linked: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    linked.remove(root);
    linked
}

fn refuses(root: &str, banned: &[&str]) {
    let linked = links(root);
    let found: Vec<&&str> = banned.iter().filter(|b| linked.contains(**b)).collect();
    assert!(found.is_empty(), "{root} links {found:?}");
}

/// The relay's process (its server, its metrics library, its certificate parser), and the
/// core's HTTP client.
const SERVER: &[&str] = &["server", "prometheus", "x509-parser"];
const CORE_CLIENT: &[&str] = &["core_client", "ureq"];

#[test]
fn the_ledger_tools_link_neither_the_relay_process_nor_the_core_client() {
    for tool in ["backup", "reconcile", "restore", "migrate"] {
        refuses(tool, SERVER);
        refuses(tool, CORE_CLIENT);
        refuses(tool, &["engine"]);
    }
    // purge decides (which rows are finished) but calls no core.
    refuses("purge", SERVER);
    refuses("purge", CORE_CLIENT);
}

#[test]
fn the_decisions_link_no_server_and_the_batch_tools_no_relay_process() {
    refuses("engine", SERVER);
    refuses("engine", CORE_CLIENT);
    refuses("cli", &["engine", "server", "prometheus"]);
    for tool in ["resolve", "reprocess", "purge", "inspect"] {
        refuses(tool, SERVER);
    }
    assert!(links("relay").contains("server"), "the check sees links");
}

#[test]
fn the_lower_layers_stay_below() {
    refuses(
        "wire",
        &["ledger", "core_client", "engine", "server", "cli"],
    );
    refuses("ledger", &["core_client", "engine", "server", "cli"]);
    refuses("core_client", &["ledger", "engine", "server", "cli"]);
    refuses(
        "log_limit",
        &["ledger", "core_client", "engine", "server", "cli"],
    );
    let above = ["ledger", "core_client", "engine", "server", "cli", "ureq"];
    refuses("core_api", &above);
    // The test tools that need only the codec and the client link no ledger.
    for tool in ["chan", "loadgen", "coresim"] {
        refuses(
            tool,
            &["ledger", "engine", "server", "rusqlite", "postgres"],
        );
    }
}
