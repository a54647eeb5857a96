//! What the binaries say they are: every tool's `--version` names the version and the
//! commit it was built from (`txrelay_build_info` carries the same, `metrics`).

use std::process::Command;

use crate::util::*;

/// The commit the build script finds: `TXRELAY_COMMIT` if set, else `git rev-parse --short
/// HEAD` of this checkout (cargo rebuilt the binaries when HEAD moved), else `unknown`.
pub(crate) fn expected_commit() -> String {
    if let Some(c) = std::env::var("TXRELAY_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        return c;
    }
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

sqlite_only! {
    "no ledger is opened: once is enough",
    fn every_tool_prints_its_version_and_the_commit() {
        let commit = expected_commit();
        for tool in [
            "relay",
            "resolve",
            "reprocess",
            "purge",
            "inspect",
            "migrate",
            "backup",
            "restore",
        ] {
            let run = Run::new(tool, &["--version"]);
            run.expect_code(0);
            assert_eq!(
                run.stdout(),
                format!("{tool} {} (commit {commit})\n", env!("CARGO_PKG_VERSION")),
                "{tool}"
            );
        }
    }
}
