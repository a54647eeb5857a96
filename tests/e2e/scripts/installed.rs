//! What the package gives an operator on a machine without the source tree (issue 40,
//! items 1, 3 and 5), as far as it can be tested without installing it:
//! `scripts/package_check.sh` checks the rest on the installed package, as root.
//!
//! - The man pages the tools write (`TXRELAY_GENERATE`), as the package installs them
//!   (`TOOL.1txrelay`), have EXIT STATUS, ENVIRONMENT, FILES and SEE ALSO.
//! - A wrapper laid out as the package lays it out (`scripts/` beside `bin/`) finds its tool
//!   in that `bin/`; it reads the settings file that TXRELAY_ENV_FILE names, the environment
//!   winning over it; installed (in /opt/txrelay/scripts), it reads /etc/txrelay/batch.env
//!   and has its unit's defaults (the ledger, and LOCK_DIR for a PostgreSQL ledger); a lock
//!   file made by root belongs to its directory's owner.
//! - `postinst` sets the environment files' owner and mode on the first install only.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use super::postinst::{mode, run_postinst};
use crate::util::Run;

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts");

/// The tools the package installs.
const TOOLS: &[&str] = &[
    "relay",
    "resolve",
    "reprocess",
    "purge",
    "inspect",
    "migrate",
    "backup",
    "restore",
    "reconcile",
];

#[test]
fn each_tools_man_page_has_exit_status_environment_files_and_see_also() {
    let dir = tempfile::tempdir().unwrap();
    for tool in TOOLS {
        let run = Run::with_env(
            tool,
            &[],
            &[("TXRELAY_GENERATE", dir.path().to_str().unwrap())],
        );
        run.expect_code(0);
        let page = fs::read_to_string(dir.path().join(format!("man/{tool}.1txrelay")))
            .unwrap_or_else(|e| panic!("{tool}: no man/{tool}.1txrelay: {e}"));
        for section in [
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH FILES",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(page.contains(section), "{tool}: no {section}:\n{page}");
        }
        assert!(
            page.contains("/var/lib/txrelay/ledger.db"),
            "{tool}: FILES does not name the ledger:\n{page}"
        );
        // Every other packaged tool is in SEE ALSO, and each exit code is explained.
        for other in TOOLS.iter().filter(|t| *t != tool) {
            assert!(
                page.contains(&format!("\\fB{other}\\fR(1)")),
                "{tool}: {other}"
            );
        }
        assert!(page.contains(".TP\n.B 2\n"), "{tool}: exit 2:\n{page}");
    }
    let relay = fs::read_to_string(dir.path().join("man/relay.1txrelay")).unwrap();
    for text in ["/etc/txrelay/relay.env", ".B RELAY_DB\n", ".B RELAY_CORE\n"] {
        assert!(
            relay.contains(text),
            "relay's page lacks {text:?}:\n{relay}"
        );
    }
    let resolve = fs::read_to_string(dir.path().join("man/resolve.1txrelay")).unwrap();
    for text in [
        "/etc/txrelay/batch.env",
        "/opt/txrelay/scripts/resolve.sh",
        ".B RESOLVE_MIN_AGE\n",
        ".B 3\n",
    ] {
        assert!(resolve.contains(text), "resolve's page lacks {text:?}");
    }
    // inspect's commands have pages of their own, with the global flags' twins.
    let list = fs::read_to_string(dir.path().join("man/inspect-list.1txrelay")).unwrap();
    assert!(list.contains(".B INSPECT_DB\n"), "{list}");
}

/// `dir/scripts/{NAME,lib.sh,installed.sh}` copied from the source tree, and `dir/bin/TOOL`
/// a stub that prints what it was given: the package's layout, with /opt/txrelay at `dir`.
fn lay_out(dir: &Path, name: &str, tool: &str) -> PathBuf {
    fs::create_dir_all(dir.join("scripts")).unwrap();
    for f in [name, "lib.sh", "installed.sh"] {
        fs::copy(Path::new(SCRIPTS).join(f), dir.join("scripts").join(f)).unwrap();
    }
    stub(&dir.join("bin"), tool);
    dir.join("scripts").join(name)
}

/// An executable `dir/tool` that prints its path and the variables the wrappers hand on.
fn stub(dir: &Path, tool: &str) {
    fs::create_dir_all(dir).unwrap();
    let path = dir.join(tool);
    fs::write(
        &path,
        "#!/bin/sh\necho \"stub $0 db=${RESOLVE_DB:-} core=${RESOLVE_CORE:-} \
         min-age=${RESOLVE_MIN_AGE:-} ca=${RESOLVE_CORE_CA:-}\"\n",
    )
    .unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// `bash SCRIPT ARGS` with nothing of the test's environment but PATH, plus `env`.
fn bash(script: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied());
    Run::command(cmd, Duration::from_secs(60))
}

#[test]
fn a_wrapper_finds_its_tool_in_the_bin_dir_beside_its_scripts_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let opt = tmp.path().join("opt");
    let script = lay_out(&opt, "resolve.sh", "resolve");
    let ledger = tmp.path().join("ledger.db");
    let run = bash(
        &script,
        &[],
        &[
            ("LEDGER_DB", ledger.to_str().unwrap()),
            ("TXRELAY_ENV_FILE", ""),
        ],
    );
    run.expect_code(0);
    let bin = opt.join("bin/resolve");
    assert!(
        run.stdout().starts_with(&format!("stub {}", bin.display())),
        "{}\n{}",
        run.stdout(),
        run.stderr()
    );
    assert!(
        run.stderr()
            .contains(&format!("resolve.sh: running {} (", bin.display())),
        "{}",
        run.stderr()
    );
}

#[test]
fn a_wrapper_reads_the_settings_file_and_what_its_environment_gives_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    stub(&bin, "resolve");
    let file = tmp.path().join("batch.env");
    let from_file = tmp.path().join("from-file.db");
    // As systemd reads an EnvironmentFile=: comments, quotes taken off, no `$` expanded.
    fs::write(
        &file,
        format!(
            "# the timers' settings\nLEDGER_DB={}\n  CORE_URL = \"http://127.0.0.1:1\"\n\
             RESOLVE_MIN_AGE=77\nRESOLVE_CORE_CA='/k/$HOME/ca.pem'\n",
            from_file.display()
        ),
    )
    .unwrap();
    let script = Path::new(SCRIPTS).join("resolve.sh");
    let env = [
        ("TXRELAY_ENV_FILE", file.to_str().unwrap()),
        ("RELAY_BIN_DIR", bin.to_str().unwrap()),
    ];
    let run = bash(&script, &[], &env);
    run.expect_code(0);
    let want = format!(
        "db={} core=http://127.0.0.1:1 min-age=77 ca=/k/$HOME/ca.pem",
        from_file.display()
    );
    assert!(run.stdout().contains(&want), "{}", run.stdout());

    // A variable given in the environment wins over the file's.
    let given = tmp.path().join("given.db");
    let mut env = env.to_vec();
    env.push(("LEDGER_DB", given.to_str().unwrap()));
    env.push(("RESOLVE_MIN_AGE", "900"));
    let run = bash(&script, &[], &env);
    run.expect_code(0);
    let want = format!("db={} core=http://127.0.0.1:1 min-age=900", given.display());
    assert!(run.stdout().contains(&want), "{}", run.stdout());

    // A file named that cannot be read is a setting gone wrong, not a run without it.
    let missing = tmp.path().join("missing.env");
    let run = bash(
        &script,
        &[],
        &[
            ("TXRELAY_ENV_FILE", missing.to_str().unwrap()),
            ("RELAY_BIN_DIR", bin.to_str().unwrap()),
        ],
    );
    run.expect_code(2);
    assert!(run.stderr().contains("missing.env"), "{}", run.stderr());
}

/// `bash -c SNIPPET` with lib.sh sourced as the wrapper in `script_dir` would source it, and
/// nothing of the test's environment but PATH, plus `env`.
fn lib_sh(script_dir: &str, snippet: &str, env: &[(&str, &str)]) -> Output {
    let code = format!(
        "set -euo pipefail; SELF=resolve.sh SCRIPT_DIR={script_dir}; \
         source {SCRIPTS}/lib.sh; {snippet}"
    );
    Command::new("bash")
        .args(["-c", &code])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .expect("run bash")
}

#[test]
fn installed_a_wrapper_has_its_units_settings_file_ledger_and_lock_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("batch.env");
    fs::write(&file, "CORE_URL=http://core.example:9201\n").unwrap();
    let snippet = format!(
        "read_settings {}; batch_settings resolve; \
         echo \"core=${{CORE_URL:-}} db=$DB lock=$LOCK_FILE\"",
        file.display()
    );
    let out = lib_sh("/opt/txrelay/scripts", &snippet, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout.trim(),
        "core=http://core.example:9201 db=/var/lib/txrelay/ledger.db \
         lock=/var/lib/txrelay/ledger.db.resolve.lock"
    );
    // A PostgreSQL ledger's lock goes to the package's state directory, not a refusal.
    let pg = [("LEDGER_DB", "postgres://relay:secret@db.example/ledger")];
    let out = lib_sh(
        "/opt/txrelay/scripts",
        "batch_settings resolve; echo \"$LOCK_FILE\"",
        &pg,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.starts_with("/var/lib/txrelay/postgres___relay_") && !stdout.contains("secret"),
        "{stdout}"
    );

    // In a source tree none of it: no settings file read, LEDGER_DB and (for PostgreSQL)
    // LOCK_DIR required, as before.
    let out = lib_sh(SCRIPTS, &snippet, &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("LEDGER_DB is not set"));
    let out = lib_sh(SCRIPTS, "batch_settings resolve", &pg);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("LOCK_DIR must be set"));
}

#[test]
fn a_lock_file_made_by_root_belongs_to_its_directorys_owner() {
    let tmp = tempfile::tempdir().unwrap();
    if fs::metadata(tmp.path()).unwrap().uid() != 0 {
        eprintln!("not root: a lock file made by root cannot be tried; skipped");
        return;
    }
    // The ledger's directory is another user's, as /var/lib/txrelay is txrelay's.
    let ledger_dir = tmp.path().join("state");
    fs::create_dir(&ledger_dir).unwrap();
    std::os::unix::fs::chown(&ledger_dir, Some(65534), Some(65534)).unwrap();
    let bin = tmp.path().join("bin");
    stub(&bin, "resolve");
    let ledger = ledger_dir.join("ledger.db");
    let run = bash(
        &Path::new(SCRIPTS).join("resolve.sh"),
        &[],
        &[
            ("LEDGER_DB", ledger.to_str().unwrap()),
            ("RELAY_BIN_DIR", bin.to_str().unwrap()),
        ],
    );
    run.expect_code(0);
    let lock = fs::metadata(ledger_dir.join("ledger.db.resolve.lock")).unwrap();
    assert_eq!((lock.uid(), lock.gid()), (65534, 65534));
}

#[test]
fn postinst_sets_the_env_files_owner_and_mode_on_the_first_install_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let etc = dir.join("etc");
    fs::create_dir_all(&etc).unwrap();
    for f in ["relay.env", "batch.env"] {
        fs::write(etc.join(f), "").unwrap();
        fs::set_permissions(etc.join(f), fs::Permissions::from_mode(0o600)).unwrap();
    }

    // An upgrade (configure with the version configured before): the operator's 0600 stays.
    let out = run_postinst(dir, Some("0.1.0-1"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mode(&etc.join("relay.env")), 0o600);
    assert_eq!(mode(&etc.join("batch.env")), 0o600);
    let calls = fs::read_to_string(dir.join("calls")).unwrap_or_default();
    assert!(!calls.contains(".env"), "an upgrade chowned: {calls}");

    // The first install (no version before): root:txrelay 0640.
    let out = run_postinst(dir, None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mode(&etc.join("relay.env")), 0o640);
    assert_eq!(mode(&etc.join("batch.env")), 0o640);
    let calls = fs::read_to_string(dir.join("calls")).unwrap();
    assert!(
        calls.contains(&format!(
            "chown root:txrelay {}/etc/relay.env",
            dir.display()
        )),
        "{calls}"
    );
}
