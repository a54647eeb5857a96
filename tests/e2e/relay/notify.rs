//! The relay under systemd's `Type=notify` (issue 19.1): the test binds the unix datagram
//! socket systemd would (`NOTIFY_SOCKET`) and reads what the relay tells it: `READY=1` once
//! `listening on` is printed (the listener bound, the ledger checked), nothing when the start
//! fails, `WATCHDOG=1` at half of `WATCHDOG_USEC` only when systemd asked for it
//! (`WATCHDOG_PID` naming the relay), and `STOPPING=1` when SIGTERM starts the shutdown.

use std::fs::File;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;
use testkit::bin;
use testkit::process::signal;

/// The socket systemd would listen on, in a temp dir of its own.
struct NotifySocket {
    sock: UnixDatagram,
    path: String,
    _dir: tempfile::TempDir,
}

impl NotifySocket {
    fn bind() -> NotifySocket {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
        sock.set_read_timeout(Some(WAIT)).expect("read timeout");
        NotifySocket {
            sock,
            path: path.to_str().expect("utf-8 path").to_owned(),
            _dir: dir,
        }
    }

    /// The next datagram, waiting up to `WAIT`.
    fn recv(&self) -> String {
        let mut buf = [0u8; 4096];
        let n = self
            .sock
            .recv(&mut buf)
            .expect("a notification within WAIT");
        String::from_utf8(buf[..n].to_vec()).expect("utf-8 notification")
    }

    /// Whatever has arrived so far, without waiting.
    fn pending(&self) -> Vec<String> {
        self.sock.set_nonblocking(true).expect("nonblocking");
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.sock.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        self.sock.set_nonblocking(false).expect("blocking");
        got
    }
}

#[test]
fn ready_comes_once_listening_on_is_printed_and_stopping_on_sigterm() {
    skip_if_unavailable!();
    let (db, core, notify) = (temp_ledger(), Core::start(&[]), NotifySocket::bind());
    let out_dir = tempfile::tempdir().expect("temp dir");
    let out_path = out_dir.path().join("stdout");
    let mut cmd = relay_command(&db, &core.url(), &[]);
    cmd.env("NOTIFY_SOCKET", &notify.path)
        .env_remove("WATCHDOG_USEC")
        .env_remove("WATCHDOG_PID")
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn the relay");

    assert_eq!(notify.recv(), "READY=1\n");
    // Written and flushed before READY=1 was sent: already in the file.
    let out = std::fs::read_to_string(&out_path).expect("read stdout");
    let addr = out
        .strip_prefix("listening on ")
        .and_then(|s| s.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("`listening on` before READY=1, got {out:?}"));
    let m = msg("G-NOTIFY-1", 1500, "rent");
    assert_done_with(&db, &core, &m, &call(addr, &m));

    signal(child.id(), "-TERM");
    // No watchdog was asked for: the next notification is the shutdown's.
    assert_eq!(notify.recv(), "STOPPING=1\n");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    assert_eq!(notify.pending(), Vec::<String>::new());
}

#[test]
fn a_relay_that_cannot_start_tells_systemd_nothing() {
    skip_if_unavailable!();
    let (db, core, notify) = (temp_ledger(), Core::start(&[]), NotifySocket::bind());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let listen = taken.local_addr().expect("addr").to_string();
    let mut cmd = Command::new(bin("relay"));
    cmd.args(["--db", db.arg(), "--listen", &listen, "--core", &core.url()])
        .env("NOTIFY_SOCKET", &notify.path);
    let r = Run::command(cmd, WAIT);
    r.expect_code(EXIT_FATAL);
    assert_eq!(r.stdout(), "", "no `listening on`");
    assert_eq!(notify.pending(), Vec::<String>::new(), "no READY=1");
}

#[test]
fn watchdog_pings_come_at_half_the_interval_when_systemd_asks() {
    skip_if_unavailable!();
    let (db, core, notify) = (temp_ledger(), Core::start(&[]), NotifySocket::bind());
    // systemd names the process the watchdog is for: the shell's pid, kept by `exec`.
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$0" "$@""#)
        .arg(bin("relay"))
        .args(["--db", db.arg(), "--listen", "127.0.0.1:0", "--core"])
        .arg(core.url())
        .env("NOTIFY_SOCKET", &notify.path)
        .env("WATCHDOG_USEC", "400000");
    let relay = Server::start(cmd);

    assert_eq!(notify.recv(), "READY=1\n");
    assert_eq!(notify.recv(), "WATCHDOG=1\n");
    let first = Instant::now();
    assert_eq!(notify.recv(), "WATCHDOG=1\n");
    assert_eq!(notify.recv(), "WATCHDOG=1\n");
    let two = first.elapsed();
    // Every 200 ms (half of 400 ms), as the log line says: two intervals take at least
    // 400 ms less the scheduler's slack (the upper bound is loose: a loaded test machine).
    assert!(
        two >= Duration::from_millis(300) && two < Duration::from_secs(3),
        "two pings took {two:?}"
    );
    assert!(
        relay
            .stderr()
            .contains("systemd watchdog: WATCHDOG=1 every 200 ms"),
        "{}",
        relay.stderr()
    );

    relay.signal("-TERM");
    let deadline = Instant::now() + WAIT;
    loop {
        let got = notify.recv();
        if got == "STOPPING=1\n" {
            break;
        }
        assert_eq!(got, "WATCHDOG=1\n");
        assert!(Instant::now() < deadline, "no STOPPING=1");
    }
}

#[test]
fn no_watchdog_pings_for_another_process() {
    skip_if_unavailable!();
    // WATCHDOG_USEC inherited with a WATCHDOG_PID that is not the relay's (systemd's
    // variables leaking into a child): not meant for it, so no pings.
    let (db, core, notify) = (temp_ledger(), Core::start(&[]), NotifySocket::bind());
    let mut cmd = relay_command(&db, &core.url(), &[]);
    cmd.env("NOTIFY_SOCKET", &notify.path)
        .env("WATCHDOG_USEC", "100000")
        .env("WATCHDOG_PID", "1");
    let relay = Server::start(cmd);
    assert_eq!(notify.recv(), "READY=1\n");
    relay.signal("-TERM");
    assert_eq!(notify.recv(), "STOPPING=1\n", "no WATCHDOG=1 in between");
}
