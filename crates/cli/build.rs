//! The commit the binaries are built from, as `TXRELAY_COMMIT` for `cli::COMMIT`
//! (`txrelay_build_info` and every tool's `--version`): the environment's `TXRELAY_COMMIT`
//! if set (a packager building from a tarball), else `git rev-parse --short HEAD` where the
//! source is a git checkout (CI builds from a clean clone), else `unknown`.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Builds again when `path` changes; only if it exists (cargo reruns for a missing one always).
fn watch(path: &str) {
    if Path::new(path).exists() {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn from_git() -> Option<String> {
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    // A new commit moves HEAD, the branch it names, or (after a gc) the packed refs.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        watch(&format!("{dir}/HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(&format!("{common}/{branch}"));
        }
        watch(&format!("{common}/packed-refs"));
    }
    Some(commit)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TXRELAY_COMMIT");
    let commit = std::env::var("TXRELAY_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(from_git)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=TXRELAY_COMMIT={commit}");
}
