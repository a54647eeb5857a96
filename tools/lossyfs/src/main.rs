//! `lossyfs --backing DIR --mount MNT --control SOCK [--crash-after N]`: mounts MNT as a
//! pass-through of DIR that forgets, on `drop`, what was not synced. Prints `mounted MNT` once
//! the mount answers, nothing else (logs on stderr only if RUST_LOG is set).
//!
//! Exit codes: 0 after a drop or a clean unmount (SIGTERM, SIGINT), 1 on an error, 2 on a
//! usage error. A mount left behind by a crash of lossyfs itself: `umount -l MNT`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// A FUSE pass-through that can forget what was not synced (a power cut for tests).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The real folder the mount shows (and that a drop reverts).
    #[arg(long, value_name = "DIR")]
    backing: PathBuf,
    /// Where to mount it (an empty folder).
    #[arg(long, value_name = "MNT")]
    mount: PathBuf,
    /// The control socket (Unix stream): `stats`, `freeze`, `drop all|subset|torn SEED`.
    #[arg(long, value_name = "SOCK")]
    control: PathBuf,
    /// Freeze when the N-th mutating operation (write, truncate, fsync, fsyncdir, create,
    /// mkdir, unlink, rmdir, rename) arrives; that one fails with EIO, as all after it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    crash_after: Option<u64>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if std::env::var_os("RUST_LOG").is_some() {
        env_logger::init();
    }
    let options = lossyfs::Options {
        backing: args.backing,
        mount: args.mount.clone(),
        control: args.control,
        crash_after: args.crash_after,
    };
    let ready = || {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "mounted {}", args.mount.display());
        let _ = stdout.flush();
    };
    match lossyfs::run(&options, ready) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lossyfs: {e}");
            ExitCode::FAILURE
        }
    }
}
