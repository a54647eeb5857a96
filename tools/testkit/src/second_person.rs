//! Another person than the one the tests run as, for dual control (contract §12): who makes a
//! settlement request cannot approve it, and who acts is taken from the system, never from a
//! flag. On PostgreSQL the second person is a login role of its own (`session_user`); on
//! SQLite a Unix user (`nobody`, which every Debian system has), the workspace's binary run
//! as that user by `runuser`, the ledger's folder given to it (root, the first person, still
//! writes everything; SQLite run as root gives the files it creates the database's owner).
//!
//! On SQLite this needs root, and a process without a login uid (`/proc/self/loginuid`
//! unset, as in a container or a CI job): a login uid survives `runuser`, so under a login
//! session both runs would be the same person. Where it cannot be had, [`SecondPerson::of`]
//! says why and the test does not run (`REQUIRE_SECOND_PERSON` makes that a failure).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::TempLedger;
use crate::temp_ledger::Backend;

/// The Unix user that is the second person on SQLite.
pub const UNIX_USER: &str = "nobody";

/// Set (to anything) to make a missing second person a failure rather than a skip.
pub const REQUIRE_ENV: &str = "REQUIRE_SECOND_PERSON";

/// Who the second person is and how to run a tool as them.
pub struct SecondPerson {
    /// Their name as the ledger records a maker or a checker.
    pub name: String,
    /// What their `--db` says.
    db: String,
    /// SQLite: the Unix user the tool runs as.
    run_as: Option<&'static str>,
}

impl SecondPerson {
    /// The second person for `ledger`, or why there is none here.
    pub fn of(ledger: &TempLedger) -> Result<SecondPerson, String> {
        match ledger.backend() {
            Backend::Postgres => {
                let (name, db) = postgres_role(ledger.arg());
                Ok(SecondPerson {
                    name,
                    db,
                    run_as: None,
                })
            }
            Backend::Sqlite => {
                unix_user_possible()?;
                give_folder(ledger.dir(), UNIX_USER)?;
                Ok(SecondPerson {
                    name: UNIX_USER.to_string(),
                    db: ledger.arg().to_string(),
                    run_as: Some(UNIX_USER),
                })
            }
        }
    }

    /// What their `--db` says.
    pub fn db_arg(&self) -> &str {
        &self.db
    }

    /// The workspace binary `name` run as the second person (`args` still to add).
    pub fn command(&self, name: &str) -> Command {
        match self.run_as {
            None => Command::new(crate::bin(name)),
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(reachable_bin(name, user));
                cmd
            }
        }
    }
}

/// Whether this process can run a tool as another Unix user that the ledger sees as another
/// person.
fn unix_user_possible() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("a second Unix user needs root (runuser)".into());
    }
    let login = std::fs::read_to_string("/proc/self/loginuid").unwrap_or_default();
    if !matches!(login.trim(), "" | "4294967295") {
        return Err(format!(
            "this process has a login uid ({}), which runuser keeps: a tool run as {UNIX_USER} \
             would still act for the login user",
            login.trim()
        ));
    }
    if ledger::identity::user_name(uid_of(UNIX_USER)?).is_none() {
        return Err(format!("no user {UNIX_USER}"));
    }
    Ok(())
}

fn uid_of(user: &str) -> Result<u32, String> {
    let out = Command::new("id")
        .args(["-u", user])
        .output()
        .map_err(|e| format!("id -u {user}: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|_| format!("no user {user}"))
}

/// Gives `dir` and the files in it to `user`, as an operator's ledger folder is shared.
fn give_folder(dir: &Path, user: &str) -> Result<(), String> {
    let uid = uid_of(user)?;
    let chown = |p: &Path| {
        std::os::unix::fs::chown(p, Some(uid), None)
            .map_err(|e| format!("chown {}: {e}", p.display()))
    };
    chown(dir)?;
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        chown(&path)?;
    }
    Ok(())
}

/// The binary `name` where `user` can run it: where it is, if every folder above it lets
/// others through; else a copy in a folder of the system's temp dir (made once, and again
/// when the binary changes).
fn reachable_bin(name: &str, user: &str) -> PathBuf {
    let bin = crate::bin(name);
    let open_to_others = bin
        .ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    if open_to_others {
        return bin;
    }
    static COPYING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = COPYING.lock().unwrap_or_else(|e| e.into_inner());
    let src = std::fs::metadata(&bin).expect("the binary");
    let dir = std::env::temp_dir().join(format!("txrelay-tests-as-{user}"));
    std::fs::create_dir_all(&dir).expect("a folder for binaries run as another user");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let copy = dir.join(name);
    let fresh =
        std::fs::metadata(&copy).is_ok_and(|m| m.len() == src.len() && m.mtime() >= src.mtime());
    if !fresh {
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        std::fs::copy(&bin, &tmp).expect("copy the binary");
        std::fs::rename(&tmp, &copy).expect("put the copy in place");
    }
    copy
}

/// PostgreSQL: a login role of its own for the schema `url` names (made once; not a
/// superuser), with the rights docs/operations.md gives an operator's role on that schema
/// (no INSERT, UPDATE or DELETE on tx, no UPDATE on settle_request: a decision goes through
/// `txrelay_approve` or `txrelay_reject`); its name and the URL that logs in as it.
pub fn postgres_role(url: &str) -> (String, String) {
    let schema: String = url
        .rsplit("search_path%3D")
        .next()
        .expect("a search_path in the URL")
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let role = format!("person_{schema}");
    let mut c = postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("connecting to the test's PostgreSQL ledger: {e}"));
    c.batch_execute(&format!(
        "DO $$ BEGIN CREATE ROLE {role} LOGIN; \
         EXCEPTION WHEN duplicate_object THEN NULL; END $$; \
         GRANT USAGE ON SCHEMA {schema} TO {role}; \
         GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}; \
         GRANT INSERT ON {schema}.settle_request TO {role}; \
         GRANT DELETE ON {schema}.tx_inquiry TO {role}; \
         GRANT EXECUTE ON FUNCTION {schema}.txrelay_approve(BIGINT, TEXT, TEXT) TO {role}; \
         GRANT EXECUTE ON FUNCTION {schema}.txrelay_reject(BIGINT, TEXT) TO {role}; \
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"
    ))
    .expect("a second role");
    let theirs = url.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    assert_ne!(theirs, url, "the URL names no user to replace: {url}");
    (role, theirs)
}
