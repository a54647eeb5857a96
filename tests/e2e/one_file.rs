//! One SQLite ledger file, one relay, under every name (contract §11; issue 38): a second
//! relay reaching the running relay's file through a symlink, a hard link or `dir/..` is
//! refused before `listening on`; `backup --to` a ledger in use is refused even with
//! `--force`, and the ledger stays the relay's; a ledger this user may not read is said to be
//! that ("permission denied", with its owner), never "does not exist".

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use testkit::bin;

use crate::util::*;

/// `relay --db DB` in front of `core`, run to its end (a refused start).
fn relay_on(db: &str, core: &str) -> Run {
    tool(
        "relay",
        &["--db", db, "--listen", "127.0.0.1:0", "--core", core],
    )
}

sqlite_only! {
    "a file reached under several names is SQLite's; PostgreSQL ledgers are shared by design",
    fn a_second_relay_under_another_name_of_the_file_is_refused() {
        let s = Scene::new().core(&[]).relay(&[]).build();
        let m = msg("G-ONE-FILE", 5, "");
        let first = s.call(&m);
        assert_code(&first, "0000");
        let (dir, url) = (s.db.dir(), s.core().url());
        let pid = format!("pid {}", s.relay().pid());

        let link = dir.join("link.db");
        symlink(s.db.path(), &link).expect("symlink");
        std::fs::create_dir(dir.join("sub")).expect("mkdir");
        let dotdot = dir.join("sub/../ledger.db");
        for name in [&link, &dotdot] {
            let name = name.to_str().expect("UTF-8 temp path");
            let r = relay_on(name, &url);
            one_line_refusal(&r, &[name, "already in use by another relay", &pid]);
        }

        // A hard link: a second name the canonical path cannot see. Refused under either
        // name (the running relay checked at its start), and by the tools too.
        let hard = dir.join("hard.db");
        std::fs::hard_link(s.db.path(), &hard).expect("hard link");
        for name in [hard.to_str().unwrap(), s.db.arg()] {
            let r = relay_on(name, &url);
            one_line_refusal(&r, &[name, "has 2 names", "-samefile"]);
        }
        let r = tool("purge", &["--db", hard.to_str().unwrap(), "--days", "30"]);
        r.expect_code(EXIT_FATAL);
        assert!(r.stderr().contains("has 2 names"), "{}", r.stderr());
        std::fs::remove_file(&hard).expect("remove the extra name");

        // The first relay served throughout: the resend is answered from its row.
        assert_eq!(s.call(&m), first);
        assert_eq!(s.core().bookings("G-ONE-FILE"), 1);
    }
}

sqlite_only! {
    "backup is SQLite's",
    fn backup_onto_a_ledger_in_use_is_refused_even_with_force() {
        let mut s = Scene::new().core(&[]).relay(&[]).build();
        let m = msg("G-ONE-BK", 7, "");
        let first = s.call(&m);
        assert_code(&first, "0000");
        // Another ledger to back up, holding another GUID.
        let other = TempLedger::new();
        RowSpec::unknown(&msg("G-ONE-OTHER", 9, "")).insert(&other);
        let pid = format!("in use by a relay (pid {}", s.relay().pid());
        let link = s.db.dir().join("link.db");
        symlink(s.db.path(), &link).expect("symlink");

        for to in [s.db.arg(), link.to_str().unwrap()] {
            let r = tool("backup", &["--db", other.arg(), "--to", to, "--force"]);
            one_line_refusal(&r, &[to, &pid, "even with --force"]);
        }
        let names: Vec<String> = std::fs::read_dir(s.db.dir())
            .expect("read dir")
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains(".tmp-")), "no copy left: {names:?}");
        // Untouched: the relay answers the resend from its row, and the other ledger's GUID
        // is not in it.
        assert_eq!(s.call(&m), first);
        assert_eq!(s.core().bookings("G-ONE-BK"), 1);
        let ro = ledger::Ledger::open_read_only(s.db.path()).expect("open read-only");
        let guids: Vec<String> = ro.all_rows().unwrap().into_iter().map(|r| r.guid).collect();
        assert_eq!(guids, ["G-ONE-BK"]);
        drop(ro);

        // With the relay gone, a tool holding the ledger open read-write keeps it too.
        s.relay_mut().kill();
        let held = ledger::Ledger::open(s.db.path()).expect("open the ledger");
        let r = tool("backup", &["--db", other.arg(), "--to", s.db.arg(), "--force"]);
        one_line_refusal(&r, &["is in use (a batch tool", "even with --force"]);
        drop(held);
    }
}

/// Runs the tool `name` as `user` (through `runuser`: the test runs as root).
fn as_user(user: &str, name: &str, args: &[&str]) -> Run {
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", user, "--"]).arg(bin(name)).args(args);
    Run::command(cmd, Duration::from_secs(60))
}

/// Every tool that opens the ledger at `db`, as `user` (`None`: this process's), must say
/// "permission denied" and `want`, in one line, and never "does not exist".
fn every_tool_says_denied(db: &str, user: Option<&str>, want: &str) {
    let to = format!("{db}.backup");
    let runs: [(&str, Vec<&str>); 4] = [
        ("purge", vec!["--db", db, "--days", "30"]),
        ("inspect", vec!["--db", db]),
        ("backup", vec!["--db", db, "--to", &to]),
        (
            "relay",
            vec![
                "--db",
                db,
                "--listen",
                "127.0.0.1:0",
                "--core",
                "http://127.0.0.1:9",
            ],
        ),
    ];
    for (name, args) in runs {
        let r = match user {
            Some(u) => as_user(u, name, &args),
            None => tool(name, &args),
        };
        let err = r.stderr();
        assert!(
            r.code.is_some_and(|c| c != 0),
            "{name} exited {:?}: {err}",
            r.code
        );
        assert_eq!(r.stdout(), "", "{name}");
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
        assert!(err.contains("permission denied"), "{name}: {err}");
        assert!(err.contains(want), "{name}: {want:?} in {err}");
        assert!(!err.contains("does not exist"), "{name}: {err}");
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

sqlite_only! {
    "file permissions are SQLite's",
    fn a_ledger_this_user_may_not_read_is_permission_denied_not_missing() {
        let db = temp_ledger();
        db.create();
        let root = std::fs::metadata(db.path()).expect("stat").uid() == 0;
        if root {
            if Command::new("runuser").arg("--help").output().is_err() {
                eprintln!("runuser is not installed: the permission test did not run");
                return;
            }
            // The folder open to all, the ledger (and its lock file) root's alone.
            chmod(db.dir(), 0o755);
            chmod(db.path(), 0o600);
            every_tool_says_denied(db.arg(), Some("nobody"), "nobody");
            let file = format!("the ledger {}", db.arg());
            let r = as_user("nobody", "purge", &["--db", db.arg(), "--days", "30"]);
            assert!(r.stderr().contains(&file), "{}", r.stderr());
            assert!(r.stderr().contains("owner root:"), "{}", r.stderr());
            // The folder closed: the file behind it is there all the same.
            chmod(db.dir(), 0o700);
            every_tool_says_denied(db.arg(), Some("nobody"), "the folder");
        } else {
            chmod(db.path(), 0o000);
            if std::fs::File::open(db.path()).is_ok() {
                eprintln!("this user reads a mode 000 file: the permission test did not run");
                return;
            }
            every_tool_says_denied(db.arg(), None, "the ledger");
            chmod(db.path(), 0o600);
        }
    }
}
