//! A PostgreSQL URL's password never shows in a wrapper's output: its own log lines show the
//! ledger (and any URL among the arguments passed through) masked exactly as the tools
//! mask it (`mask_url` in `scripts/lib.sh`, `ledger::postgres::url::mask`), its lock file
//! is named after that masked form, and a URL it cannot read shows only its scheme.

use std::process::Command;

use super::wrappers::*;
use crate::util::*;

/// What every test password holds; its showing anywhere is a leak.
const TOKEN: &str = "Xq9";

/// Passwords as written in a URL: what base64 and generated secrets hold.
const PASSWORDS: [&str; 6] = [
    "Xq9plain",
    "Xq9/se/cret",
    "Xq9?se",
    "Xq9#se",
    "Xq9%2Fse",
    "Xq9+se/==",
];

/// The wrappers and the variable that names their ledger.
const WRAPPERS: [(&str, &str); 4] = [
    ("relay.sh", "RELAY_DB"),
    ("resolve.sh", "RESOLVE_DB"),
    ("reprocess.sh", "REPROCESS_DB"),
    ("purge.sh", "PURGE_DB"),
];

/// `mask_url URL` as `scripts/lib.sh` prints it.
fn mask_url_sh(url: &str) -> String {
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/lib.sh");
    let out = Command::new("bash")
        .args([
            "-c",
            "SELF=test SCRIPT_DIR=. && source \"$1\" && mask_url \"$2\"",
            "bash",
            lib,
            url,
        ])
        .output()
        .expect("run bash");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .trim_end()
        .to_string()
}

#[test]
fn the_wrappers_mask_a_url_as_the_tools_do() {
    let mut urls: Vec<String> = PASSWORDS
        .iter()
        .map(|pw| format!("postgres://relay:{pw}@db.internal/ledger?sslmode=require"))
        .collect();
    urls.extend(
        [
            "postgres://relay:Xq9@db:5433/ledger",
            "postgresql://relay:@db/ledger",
            "postgres://relay@db/ledger?password=Xq9&connect_timeout=3",
            "postgres://relay:Xq9@h1,h2:5433/ledger?options=-c%20search_path%3Dt1",
            "postgres://relay:Xq9@[::1]/ledger",
            "postgres://db",
        ]
        .map(String::from),
    );
    for url in &urls {
        let tools = ledger::postgres::url::mask(url);
        assert!(!tools.contains(TOKEN), "{tools}");
        assert_eq!(mask_url_sh(url), tools, "{url}");
    }
    // What the tools refuse, the wrappers show as nothing but the scheme.
    for url in [
        "postgres://relay:Xq9@se@db/ledger",
        "postgres://db/ledger?password=Xq9@se",
        "postgres://relay@db/ledger?password=Xq9&se",
        "postgres://relay@db/ledger?password=Xq9&se=1",
    ] {
        assert_eq!(ledger::postgres::url::mask(url), "postgres://***", "{url}");
        assert_eq!(mask_url_sh(url), "postgres://***", "{url}");
    }
    assert_eq!(
        mask_url_sh("/var/lib/txrelay/ledger.db"),
        "/var/lib/txrelay/ledger.db"
    );
}

/// Each wrapper on a ledger URL with a password, at a closed port, named by its variable or
/// by `--db`: the tool fails (exit 1), and nothing shows the password; the wrapper's line
/// names the ledger as the tool's does.
#[test]
fn a_ledger_url_s_password_appears_nowhere_in_a_wrapper_s_output() {
    let port = dead_port();
    let locks = tempfile::tempdir().expect("temp dir");
    let locks = locks.path().to_str().unwrap();
    let shown = format!("relay:***@127.0.0.1:{port}/ledger");
    for pw in PASSWORDS {
        let url = format!("postgres://relay:{pw}@127.0.0.1:{port}/ledger");
        for (wrapper, var) in WRAPPERS {
            let by_arg = ["--db", url.as_str()];
            for (args, env) in [
                (&[][..], vec![(var, url.as_str()), ("LOCK_DIR", locks)]),
                (
                    &by_arg[..],
                    vec![("LEDGER_DB", "/nowhere.db"), ("LOCK_DIR", locks)],
                ),
            ] {
                let run = run_script(wrapper, args, &env);
                run.expect_code(EXIT_FATAL);
                let err = run.stderr();
                assert!(!err.contains(TOKEN), "{wrapper}: {err}");
                assert!(!run.stdout().contains(TOKEN), "{wrapper}: {}", run.stdout());
                let first = err.lines().next().unwrap_or_default();
                assert!(
                    first.contains(&format!("{wrapper}: ")) && first.contains(&shown),
                    "{wrapper}'s own line names the ledger masked: {err}"
                );
                let tool = wrapper.trim_end_matches(".sh");
                let tools_line = err
                    .lines()
                    .skip(1)
                    .find(|l| l.contains(&format!("{tool}: ")))
                    .unwrap_or_else(|| panic!("{wrapper}: no line of {tool}: {err}"));
                assert!(tools_line.contains(&shown), "{tools_line}");
            }
        }
    }
}

/// A batch wrapper's lock for a URL ledger: LOCK_DIR is required (there is no ledger
/// directory), and the lock file is named after the masked URL.
#[test]
fn a_url_ledger_s_lock_is_named_without_the_password() {
    let port = dead_port();
    let url = format!("postgres://relay:Xq9/se?cret@127.0.0.1:{port}/ledger");
    for (wrapper, var) in &WRAPPERS[1..] {
        let run = run_script(wrapper, &[], &[(var, &url)]);
        run.expect_code(EXIT_USAGE);
        assert!(run.stderr().contains("LOCK_DIR"), "{}", run.stderr());
        assert!(!run.stderr().contains(TOKEN), "{}", run.stderr());

        let locks = tempfile::tempdir().expect("temp dir");
        let run = run_script(
            wrapper,
            &[],
            &[(var, &url), ("LOCK_DIR", locks.path().to_str().unwrap())],
        );
        run.expect_code(EXIT_FATAL);
        let tool = wrapper.trim_end_matches(".sh");
        let names: Vec<String> = std::fs::read_dir(locks.path())
            .expect("read LOCK_DIR")
            .map(|e| e.expect("entry").file_name().into_string().expect("UTF-8"))
            .collect();
        assert_eq!(
            names,
            [format!(
                "postgres___relay_____127.0.0.1_{port}_ledger.{tool}.lock"
            )],
            "{wrapper}"
        );
    }
}
