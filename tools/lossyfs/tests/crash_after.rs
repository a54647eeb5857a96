//! `--crash-after N`: the N-th mutating operation and everything after it fail with EIO, and
//! a drop then keeps only what was durable before it. Swept over every N of a short script.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::{Lossy, fuse_or_skip};

/// The script's mutating steps, in order (each is exactly one mutating FUSE operation).
const STEPS: [&str; 7] = [
    "create", "write", "fsync", "fsyncdir", "write", "rename", "unlink",
];

/// Runs the script on `mnt`; returns the index of the first step that failed, with its error.
fn run_script(mnt: &Path) -> Option<(usize, io::Error)> {
    let mut file: Option<File> = None;
    for (i, step) in STEPS.iter().enumerate() {
        let result = match *step {
            "create" => OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(mnt.join("f"))
                .map(|f| file = Some(f)),
            // Both writes at 0: the second one (step 5) overwrites the first one's synced block.
            "write" => file
                .as_ref()
                .expect("created")
                .write_all_at(&[b'a' + i as u8; 4096], 0),
            "fsync" => file.as_ref().expect("created").sync_all(),
            "fsyncdir" => File::open(mnt).and_then(|d| d.sync_all()),
            "rename" => fs::rename(mnt.join("f"), mnt.join("g")),
            "unlink" => fs::remove_file(mnt.join("g")),
            other => unreachable!("{other}"),
        };
        if let Err(e) = result {
            return Some((i, e));
        }
    }
    None
}

#[test]
fn crash_after_n_fails_the_nth_operation_and_all_after_it() {
    if !fuse_or_skip("crash_after_n_fails_the_nth_operation_and_all_after_it") {
        return;
    }
    for n in 1..=STEPS.len() {
        let mut fs = Lossy::start(&["--crash-after", &n.to_string()]);
        let (failed, error) = run_script(&fs.mnt).expect("a step must fail");
        assert_eq!(
            failed + 1,
            n,
            "crash-after {n}: step {} ({}) failed: {error}",
            failed + 1,
            STEPS[failed]
        );
        assert_eq!(
            error.raw_os_error(),
            Some(libc::EIO),
            "crash-after {n}: {error}"
        );
        // Everything after fails too, reads and lookups included.
        let eio = Some(libc::EIO);
        assert_eq!(
            fs::read_dir(&fs.mnt)
                .map(|_| ())
                .map_err(|e| e.raw_os_error()),
            Err(eio)
        );
        assert_eq!(
            fs::metadata(fs.mnt.join("f"))
                .map(|_| ())
                .map_err(|e| e.raw_os_error()),
            Err(eio)
        );
        assert_eq!(
            fs::write(fs.mnt.join("h"), b"h").map_err(|e| e.raw_os_error()),
            Err(eio)
        );
        let stats = fs.command("stats");
        assert!(
            stats.starts_with(&format!("ops {} ", n - 1)),
            "crash-after {n}: {stats}"
        );
        assert!(stats.ends_with("frozen 1"), "{stats}");

        fs.drop_and_exit("all", 0);
        // The file's entry is durable from the fsyncdir (step 4) on, its first write from the
        // fsync (step 3); the second write, the rename and the unlink never are.
        let f = fs.backing.join("f");
        if n > 4 {
            let content = fs::read(&f).expect("f");
            assert!(
                content == [b'b'; 4096],
                "crash-after {n}: f is not the synced block"
            );
        } else {
            assert!(
                !f.exists(),
                "crash-after {n}: f is there without its fsyncdir"
            );
        }
        assert!(!fs.backing.join("g").exists(), "crash-after {n}");
    }
}
