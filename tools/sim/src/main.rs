//! `sim`: runs the simulator over seeds. `sim --seeds 2000` (from seed 1), `sim --seed 1234`
//! (one run, replayed), `--no-timing-assumption` (resolve acts while a request of a given-up
//! call may still reach the core: the double booking the assumption prevents),
//! `--refuse-writes N` (the ledger refuses one write in N, as a ledger locked past its busy
//! timeout does), `--operators` (two operators settle GUIDs by hand alongside), `--purge DAYS`
//! (purge alongside with that retention, hours passing between requests, channels resending
//! within a 12-hour horizon; `--purge 0` is the negative control). Exit 1 and the failing
//! seed on the first violation.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut from, mut count, mut timing, mut refuse) = (1u64, 1000u64, true, 0u64);
    let mut operators = false;
    let mut purge_days = None;
    const USAGE: &str = "--seeds N, --from S, --seed S, --no-timing-assumption, \
                         --refuse-writes N, --operators, --purge DAYS";
    while let Some(a) = args.next() {
        let mut num = || args.next().and_then(|v| v.parse::<u64>().ok());
        let parsed = match a.as_str() {
            "--seeds" => num().map(|n| count = n),
            "--from" => num().map(|n| from = n),
            "--seed" => num().map(|n| (from, count) = (n, 1)),
            "--refuse-writes" => num()
                .and_then(|n| u32::try_from(n).ok())
                .map(|n| refuse = n.into()),
            "--no-timing-assumption" => {
                timing = false;
                Some(())
            }
            "--operators" => {
                operators = true;
                Some(())
            }
            "--purge" => num().map(|n| purge_days = Some(n)),
            _ => None,
        };
        if parsed.is_none() {
            eprintln!("sim: {a}: unknown flag or missing number ({USAGE})");
            return ExitCode::from(2);
        }
    }
    sim::quiet_crashes();
    let dir = tempfile::tempdir_in(scratch()).expect("a temporary directory");
    let (mut crashes, mut steps, mut answers, mut refused, mut purged) = (0, 0, 0, 0, 0);
    for seed in from..from + count {
        let mut plan = sim::Plan::new(seed);
        plan.timing = timing;
        plan.refuse_write_one_in = refuse as u32;
        plan.operators = operators;
        plan.purge_days = purge_days;
        let out = sim::run(plan, dir.path());
        crashes += out.crashes;
        refused += out.refused;
        steps += out.steps;
        answers += out.answers;
        purged += out.purged;
        if !out.verdict.passed() {
            let timing = if timing {
                ""
            } else {
                " --no-timing-assumption"
            };
            let refusing = if refuse > 0 {
                format!(" --refuse-writes {refuse}")
            } else {
                String::new()
            };
            let operating = if operators { " --operators" } else { "" };
            let purging = purge_days.map_or(String::new(), |d| format!(" --purge {d}"));
            println!(
                "sim: FAIL seed {seed} (replay: sim --seed {seed}{timing}{refusing}{operating}\
                 {purging})"
            );
            for v in &out.verdict.violations {
                println!("  {v}");
            }
            return ExitCode::from(1);
        }
    }
    println!(
        "sim: PASS {count} seeds from {from}: {answers} answers to channels, {crashes} crashes, \
         {steps} steps, {refused} writes refused, {purged} rows purged"
    );
    ExitCode::SUCCESS
}

/// Where the runs' ledgers go: memory if the system has it (`/dev/shm`), else the temp dir.
fn scratch() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}
