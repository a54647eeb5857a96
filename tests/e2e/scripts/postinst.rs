//! The package's `postinst` run by itself (issue 39, item 7): it makes the environment
//! files root:txrelay 0640, but an env file that is a symbolic link is left alone, with one
//! line saying so, since chown and chmod would follow the link and change its target (a
//! secret kept elsewhere, another service's file). The script runs under `sh` with its
//! paths moved into a temp directory and the commands that need root (`chown`, `install`,
//! `systemd-sysusers`) replaced by stubs that record their arguments; `chmod` is the real
//! one. `scripts/package_check.sh` checks the same on the installed package, as root.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Output};

const POSTINST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/debian/postinst");

/// Runs `postinst configure [OLD]` with /etc/txrelay at `dir/etc`, /var/lib/txrelay at
/// `dir/var` and no systemd (`old_version`: the version upgraded from, `None` for a first
/// install); the stubs' calls are in `dir/calls`.
pub(super) fn run_postinst(dir: &Path, old_version: Option<&str>) -> Output {
    let d = dir.display();
    let script = fs::read_to_string(POSTINST)
        .expect("packaging/debian/postinst")
        .replace("/etc/txrelay", &format!("{d}/etc"))
        .replace("/var/lib/txrelay", &format!("{d}/var"))
        .replace("/run/systemd/system", &format!("{d}/no-systemd"));
    fs::write(dir.join("postinst"), script).unwrap();
    let stubs = dir.join("stubs");
    fs::create_dir_all(&stubs).unwrap();
    for name in ["chown", "install", "systemd-sysusers"] {
        let stub = stubs.join(name);
        fs::write(
            &stub,
            format!("#!/bin/sh\necho \"{name} $*\" >>'{d}/calls'\n"),
        )
        .unwrap();
        fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        stubs.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .arg(dir.join("postinst"))
        .arg("configure")
        .args(old_version)
        .env("PATH", path)
        .output()
        .expect("run sh")
}

pub(super) fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn postinst_leaves_a_symlinked_env_file_alone_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let etc = dir.join("etc");
    fs::create_dir_all(&etc).unwrap();
    // relay.env links to a secret kept elsewhere, 0600; batch.env is the package's file.
    let secret = dir.join("secret.env");
    fs::write(&secret, "RELAY_CORE=http://core\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    symlink(&secret, etc.join("relay.env")).unwrap();
    fs::write(etc.join("batch.env"), "").unwrap();
    fs::set_permissions(etc.join("batch.env"), fs::Permissions::from_mode(0o644)).unwrap();

    let out = run_postinst(dir, None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        mode(&secret),
        0o600,
        "the link's target was changed: {stdout}"
    );
    assert_eq!(mode(&etc.join("batch.env")), 0o640);
    let calls = fs::read_to_string(dir.join("calls")).unwrap_or_default();
    assert!(!calls.contains("relay.env"), "{calls}");
    assert!(
        calls.contains(&format!(
            "chown root:txrelay {}/etc/batch.env",
            dir.display()
        )),
        "{calls}"
    );
    let said: Vec<&str> = stdout.lines().filter(|l| l.contains("relay.env")).collect();
    assert_eq!(said.len(), 1, "{stdout}");
    assert!(
        said[0].contains("relay.env is a symbolic link: left alone"),
        "{stdout}"
    );

    // A dangling link is left alone too, rather than failing the package's configuration.
    fs::remove_file(&secret).unwrap();
    let out = run_postinst(dir, None);
    assert!(out.status.success(), "{out:?}");
}
