//! The daily wrapper `scripts/reconcile.sh`: one UTC day under a lock, a dated report, and
//! the look-back over the days before it (`RECONCILE_JOURNAL` with `{DAY}`,
//! `RECONCILE_LOOKBACK_DAYS`). On SQLite only: the script hands `LEDGER_DB` to `reconcile`
//! as it is, whatever the backend.

use super::*;

/// `bash scripts/reconcile.sh ARGS` with only PATH, the binaries' directory and `env`.
fn reconcile_sh(args: &[&str], env: &[(&str, &str)]) -> Run {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/reconcile.sh");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(script).args(args).env_clear();
    cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd.env("RELAY_BIN_DIR", testkit::spawn::bin_dir());
    cmd.envs(env.iter().copied());
    Run::command(cmd, std::time::Duration::from_secs(60))
}

sqlite_only! {
    "the wrapper's report directory defaults to the SQLite ledger's",
    fn the_wrapper_reconciles_a_day_and_keeps_a_dated_report() {
        let db = temp_ledger();
        db.create();
        // 2026-12-02: A (a ghost); B on the 3rd, outside the day.
        let journal = journal_of(
            &db,
            &[&line("A", "C1", 1, T0), &line("B", "C2", 2, "2026-12-03T00:00:00Z")],
        );
        let j = journal.to_str().unwrap();
        let env = [("LEDGER_DB", db.arg()), ("RECONCILE_JOURNAL", j), ("RECONCILE_DAY", "2026-12-02")];
        let r = reconcile_sh(&[], &env);
        r.expect_code(EXIT_FATAL);
        let report = db.dir().join("reconcile-2026-12-02.txt");
        let kept = fs::read_to_string(&report).expect("the dated report");
        assert_eq!(kept, r.stdout());
        assert!(kept.starts_with("ghost A: "), "{kept}");
        assert!(kept.contains("window [2026-12-02T00:00:00Z, 2026-12-03T00:00:00Z): 0 double, 1 ghost"), "{kept}");
        let last = r.stderr().lines().last().unwrap();
        assert!(last.contains("reconcile.sh: reconcile exited 1 (breaks): reconcile: window"), "{}", r.stderr());
        // The 3rd: B alone; --json passes through.
        let env3 = [("LEDGER_DB", db.arg()), ("RECONCILE_JOURNAL", j), ("RECONCILE_DAY", "2026-12-03")];
        let r = reconcile_sh(&["--json"], &env3);
        r.expect_code(EXIT_FATAL);
        assert_eq!(breaks(&r.json()), [("ghost".into(), "B".into())]);
        // A bad journal: exit 3, and no report for the day.
        let bad = journal_of(&db, &["{"]);
        let env4 = [("LEDGER_DB", db.arg()), ("RECONCILE_JOURNAL", bad.to_str().unwrap()), ("RECONCILE_DAY", "2026-12-04")];
        reconcile_sh(&[], &env4).expect_code(3);
        assert!(!db.dir().join("reconcile-2026-12-04.txt").exists());
        // Settings checked before anything runs.
        reconcile_sh(&[], &[("LEDGER_DB", db.arg())]).expect_code(EXIT_USAGE);
        reconcile_sh(&[], &[("LEDGER_DB", db.arg()), ("RECONCILE_JOURNAL", j), ("RECONCILE_DAY", "yesterday")]).expect_code(EXIT_USAGE);
        // Another run holding the lock: 75, nothing done.
        let lock = fs::File::create(format!("{}.reconcile.lock", db.arg())).unwrap();
        lock.lock().unwrap();
        reconcile_sh(&[], &env).expect_code(75);
    }
}

/// One export a day, `bookings-DAY.jsonl`, in `dir`.
fn export(dir: &Path, day: &str, lines: &[&str]) -> PathBuf {
    let path = dir.join(format!("bookings-{day}.jsonl"));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(&path, text).expect("write an export");
    path
}

sqlite_only! {
    "the ledger's backend changes nothing here: once is enough",
    fn the_wrapper_reads_the_exports_of_the_days_before_as_one_journal() {
        let db = temp_ledger();
        // X: booked straight at the core on the 2nd (C1, a channel around the relay), then
        // through the relay on the 3rd (C2, the reply the ledger holds). The 3rd's export alone
        // shows one booking that agrees with the reply: only the day before shows the double.
        done_with_reply(&db, "X", "C2", 1500, "2026-12-03T08:00:00Z");
        let dir = tempfile::tempdir().expect("tempdir").keep();
        let days = [
            export(&dir, "2026-12-01", &[]),
            export(
                &dir,
                "2026-12-02",
                &[&line("X", "C1", 1500, "2026-12-02T23:59:59Z")],
            ),
            export(
                &dir,
                "2026-12-03",
                &[&line("X", "C2", 1500, "2026-12-03T08:00:00Z")],
            ),
        ];
        let reports = dir.join("reports");
        fs::create_dir(&reports).unwrap();
        let pattern = dir.join("bookings-{DAY}.jsonl");
        let (pattern, reports_dir) = (pattern.to_str().unwrap(), reports.to_str().unwrap());
        let run = |args: &[&str], extra: &[(&str, &str)]| {
            let env = [
                ("LEDGER_DB", db.arg()),
                ("LOCK_DIR", dir.to_str().unwrap()),
                ("RECONCILE_REPORT_DIR", reports_dir),
                ("RECONCILE_JOURNAL", pattern),
                ("RECONCILE_DAY", "2026-12-03"),
            ];
            reconcile_sh(args, &[&env[..], extra].concat())
        };

        // The default look-back, 2 days: the 1st, 2nd and 3rd read as one journal.
        let r = run(&["--json"], &[]);
        r.expect_code(EXIT_FATAL);
        let j = r.json();
        assert_eq!(counts(&j), want(&[("double", 1)]));
        assert_eq!(j["breaks"][0]["journal"].as_array().unwrap().len(), 2);
        assert_eq!(
            j["window"],
            json!({"from": "2026-12-03T00:00:00Z", "to": "2026-12-04T00:00:00Z"})
        );
        let shown: Vec<String> = days.iter().map(|d| d.display().to_string()).collect();
        assert!(
            r.stderr()
                .contains(&format!("journal {}, day 2026-12-03", shown.join(" "))),
            "{}",
            r.stderr()
        );
        let report = reports.join("reconcile-2026-12-03.txt");
        assert_eq!(fs::read_to_string(&report).unwrap(), r.stdout());

        // RECONCILE_LOOKBACK_DAYS=0: the 3rd's export alone, and the double goes unseen.
        let r = run(&[], &[("RECONCILE_LOOKBACK_DAYS", "0")]);
        r.expect_code(EXIT_SETTLED);
        assert!(
            r.stdout()
                .contains(" 0 double, 0 ghost, 0 pending, 1 matched,"),
            "{}",
            r.stdout()
        );
        // A --journal argument wins: the pattern is not read.
        let r = run(&["--journal", shown[2].as_str()], &[]);
        r.expect_code(EXIT_SETTLED);

        // A day of the look-back whose export is not there: no verdict, and the report of the
        // last run that gave one is left as it was.
        let kept = fs::read_to_string(&report).unwrap();
        fs::remove_file(&days[0]).unwrap();
        let r = run(&[], &[]);
        r.expect_code(3);
        assert_eq!(r.stdout(), "");
        assert!(
            r.stderr()
                .contains(&format!("journal {}: cannot open", shown[0]))
                && r.stderr().contains("RECONCILE_LOOKBACK_DAYS=2")
                && r.stderr().contains(&format!("{} is not there", shown[0])),
            "{}",
            r.stderr()
        );
        assert_eq!(fs::read_to_string(&report).unwrap(), kept);
        // One day back: the 2nd and the 3rd, the double seen again.
        let r = run(&["--json"], &[("RECONCILE_LOOKBACK_DAYS", "1")]);
        r.expect_code(EXIT_FATAL);
        assert_eq!(counts(&r.json()), want(&[("double", 1)]));

        // A look-back that is not a number of days: refused before anything runs.
        for bad in ["-1", "two", "1.5"] {
            let r = run(&[], &[("RECONCILE_LOOKBACK_DAYS", bad)]);
            r.expect_code(EXIT_USAGE);
            assert!(
                r.stderr()
                    .contains("RECONCILE_LOOKBACK_DAYS must be an integer >= 0"),
                "{}",
                r.stderr()
            );
        }
    }
}
