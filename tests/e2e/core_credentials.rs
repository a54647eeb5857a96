//! Credentials in the core's URL (`http://svc:pw@core`, which ureq would send as HTTP Basic
//! authentication) are refused by every tool that takes `--core` (relay, resolve, reprocess,
//! `inspect settle`), from the flag or its environment twin, with a usage error (exit 2) that
//! names where the URL came from and what to use instead (a TLS client certificate), and
//! never shows the password: not in the error, not in the `--json` failure object, not in
//! `--help` (clap prints an environment twin's value there unless told not to), not in the
//! wrappers' own lines. Before, each of them printed it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::*;

/// What every password here holds; its showing anywhere is a leak.
const SECRET: &str = "Xq9secret";

/// URLs with credentials: a password alone, with a user, holding a `/` (which ends the
/// URL's authority early: a URL parser's error would quote the rest), holding an `@`.
fn urls() -> Vec<String> {
    [
        format!("http://svc:{SECRET}@127.0.0.1:1"),
        format!("https://{SECRET}@127.0.0.1:1/v1"),
        format!("http://svc:{SECRET}/x@127.0.0.1:1"),
        format!("http://svc:{SECRET}@x@127.0.0.1:1"),
    ]
    .to_vec()
}

/// Each tool that takes `--core`, its environment twin, and its other arguments (`--json`
/// where it has one).
fn tools(db: &str) -> Vec<(&'static str, &'static str, Vec<String>)> {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        (
            "relay",
            "RELAY_CORE",
            args(&["--db", db, "--listen", "127.0.0.1:0"]),
        ),
        (
            "resolve",
            "RESOLVE_CORE",
            args(&["--db", db, "--min-age", "300", "--json"]),
        ),
        (
            "reprocess",
            "REPROCESS_CORE",
            args(&["--db", db, "--max-attempts", "3", "--json"]),
        ),
        (
            "inspect",
            "INSPECT_CORE",
            args(&[
                "--db",
                db,
                "--json",
                "settle",
                "G-CC-1",
                "--not-booked",
                "--reason",
                "r",
            ]),
        ),
    ]
}

/// Runs `name` with `args` and `env` (a relay that, wrongly, started is stopped at 15 s).
fn run(name: &str, args: &[String], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(testkit::bin(name));
    cmd.args(args)
        .env("RUST_LOG", "info")
        .envs(env.iter().copied());
    Run::command(cmd, Duration::from_secs(15))
}

#[track_caller]
fn assert_no_secret(r: &Run) {
    assert!(!r.stdout().contains(SECRET), "{:?}: {}", r.argv, r.stdout());
    assert!(!r.stderr().contains(SECRET), "{:?}: {}", r.argv, r.stderr());
}

#[test]
fn every_tool_refuses_credentials_in_core_without_showing_them() {
    let db = TempLedger::new();
    for (name, var, args) in tools(db.arg()) {
        for url in urls() {
            let by_flag = [&args[..], &["--core".into(), url.clone()]].concat();
            let by_equals = [&args[..], &[format!("--core={url}")]].concat();
            for (argv, env, named) in [
                (&by_flag, vec![], "'--core'"),
                (&by_equals, vec![], "'--core'"),
                (&args, vec![(var, url.as_str())], var),
            ] {
                let r = run(name, argv, &env);
                r.expect_code(EXIT_USAGE);
                assert_no_secret(&r);
                let err = r.stderr();
                assert!(
                    err.contains(&format!("for {named}"))
                        && err.contains("credentials do not belong in the core's URL")
                        && err.contains("--core-cert and --core-key")
                        && err.contains("***@"),
                    "{:?}: {err}",
                    r.argv
                );
                if name != "relay" {
                    let v = assert_one_json_object(&r, name, EXIT_USAGE);
                    assert!(
                        v["error"].as_str().is_some_and(|e| e.contains(named)),
                        "{v}"
                    );
                }
            }
        }
    }
    assert!(!db.created(), "refused before the ledger was opened");
}

#[test]
fn help_does_not_show_the_core_s_environment_twin() {
    let url = &urls()[0];
    for (name, var, sub) in [
        ("relay", "RELAY_CORE", &[][..]),
        ("resolve", "RESOLVE_CORE", &[]),
        ("reprocess", "REPROCESS_CORE", &[]),
        ("inspect", "INSPECT_CORE", &["settle"]),
    ] {
        let argv: Vec<String> = sub
            .iter()
            .chain(&["--help"])
            .map(|s| s.to_string())
            .collect();
        let r = run(name, &argv, &[(var, url)]);
        r.expect_code(EXIT_SETTLED);
        assert_no_secret(&r);
        assert!(
            r.stdout().contains(&format!("[env: {var}]")),
            "{name}: {}",
            r.stdout()
        );
    }
}

/// `bash scripts/<name> <args>` with only `env` (and the binaries' directory) set.
fn wrapper(name: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name);
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RELAY_BIN_DIR", testkit::spawn::bin_dir())
        .envs(env.iter().copied());
    Run::command(cmd, Duration::from_secs(15))
}

#[test]
fn the_wrappers_refuse_credentials_in_the_core_s_url_before_showing_it() {
    let db = TempLedger::new();
    let url = &urls()[2];
    let tool_args: [(&str, &str, &[&str]); 3] = [
        ("relay.sh", "RELAY_CORE", &[]),
        ("resolve.sh", "RESOLVE_CORE", &["--min-age", "300"]),
        ("reprocess.sh", "REPROCESS_CORE", &["--max-attempts", "3"]),
    ];
    for (name, var, extra) in tool_args {
        let ledger = [("LEDGER_DB", db.arg()), ("RELAY_DB", db.arg())];
        let equals = format!("--core={url}");
        let by_flag = [extra, &["--core", url]].concat();
        let by_equals = [extra, &[equals.as_str()]].concat();
        let generic = format!("CORE_URL (which {var} falls back to)");
        for (args, env, named) in [
            (by_flag, vec![], "--core"),
            (by_equals, vec![], "--core"),
            (extra.to_vec(), vec![(var, url.as_str())], var),
            (
                extra.to_vec(),
                vec![("CORE_URL", url.as_str())],
                generic.as_str(),
            ),
        ] {
            let r = wrapper(name, &args, &[&ledger[..], &env].concat());
            r.expect_code(EXIT_USAGE);
            assert_no_secret(&r);
            let err = r.stderr();
            assert!(
                err.contains(&format!(
                    "{name}: {named} must not hold credentials (http://***@"
                )) && err.contains(&format!("{var}_CERT")),
                "{:?}: {err}",
                r.argv
            );
            assert!(!err.contains("running ") && !err.contains("exec "), "{err}");
        }
        // Its --help (which shows the tool's) with the variable set.
        let r = wrapper(name, &["--help"], &[(var, url.as_str())]);
        r.expect_code(EXIT_SETTLED);
        assert_no_secret(&r);
        assert!(r.stdout().contains("--core <CORE>"), "{}", r.stdout());
    }
    assert!(!db.created(), "no tool was run");
}

#[test]
fn the_wrappers_show_arguments_with_core_credentials_masked() {
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/lib.sh");
    let out = Command::new("bash")
        .args([
            "-c",
            "SELF=test SCRIPT_DIR=. && source \"$1\" && shift && shown_args \"$@\"",
            "bash",
            lib,
            "--core",
            &format!("http://svc:{SECRET}@core:9201"),
            &format!("--core=https://{SECRET}/x@core"),
            &format!("http://a:{SECRET}@b/c"),
            "--min-age",
            "300",
        ])
        .output()
        .expect("run bash");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "--core http://***@core:9201 --core=https://***@core http://***@b/c --min-age 300\n"
    );
}
