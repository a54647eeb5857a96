//! What the package (`txrelay`, docs/deployment.md, "Installing the package") puts around
//! each tool, for its man page: the files an operator needs (FILES), what each exit code
//! means (EXIT STATUS) and the other tools (SEE ALSO). The flags and their environment
//! twins come from the tool's clap definition itself; these facts cannot, since the tools
//! know nothing of the package's paths, so they are kept here, beside the generator, in one
//! table per tool.

use crate::{EXIT_FATAL, EXIT_LEFT, EXIT_SETTLED, EXIT_USAGE};

/// The tools the package installs in /opt/txrelay/bin, in the order SEE ALSO lists them.
pub const TOOLS: &[&str] = &[
    "relay",
    "resolve",
    "reprocess",
    "purge",
    "reconcile",
    "inspect",
    "backup",
    "restore",
    "migrate",
];

/// The batch tools the timers run through an operator wrapper (/opt/txrelay/scripts/TOOL.sh).
const WRAPPED: &[&str] = &["resolve", "reprocess", "purge", "reconcile"];

/// The ledger where the package's units put it.
const LEDGER: &str = "/var/lib/txrelay/ledger.db";

/// One FILES entry: a path and a sentence saying what it is to this tool.
pub type File = (String, String);

/// The FILES entries of `tool`; none for a tool the package does not install (a test
/// tool), whose page then has no FILES section.
pub fn files(tool: &str) -> Vec<File> {
    let f = |path: &str, what: &str| (path.to_owned(), what.to_owned());
    if WRAPPED.contains(&tool) {
        return wrapped_files(tool);
    }
    match tool {
        "relay" => vec![
            f(
                "/etc/txrelay/relay.env",
                "The relay's settings, one RELAY_* variable a line (see ENVIRONMENT), each commented with its default: txrelay-relay.service reads it (EnvironmentFile=), and so does /opt/txrelay/scripts/relay.sh run by hand; the relay itself reads only its flags and environment. Mode 0640, root:txrelay: it may name key files and a PostgreSQL password.",
            ),
            f(
                LEDGER,
                "The ledger txrelay-relay.service gives the relay (RELAY_DB; a value in relay.env wins), with its -wal and -shm files, created at the first start in the txrelay user's state directory. Never copy it with cp(1): its newest claims are in the -wal file; use backup(1).",
            ),
            f(
                "/usr/lib/systemd/system/txrelay-relay.service",
                "The unit that runs the relay as the txrelay user (Type=notify, a watchdog, restarted on failure); its log is journalctl -u txrelay-relay.",
            ),
            f(
                "/usr/share/txrelay/openapi.yaml",
                "The HTTP channel API of --http-listen, as OpenAPI 3.1.",
            ),
            f(
                "/usr/share/txrelay/alerts/",
                "The Prometheus alert rules (txrelay.rules.yml, with their promtool test) and the Grafana dashboard (grafana-dashboard.json) for the metrics that --admin serves.",
            ),
        ],
        "inspect" => vec![
            f(
                LEDGER,
                "The relay's ledger where the package puts it; give it with --db or INSPECT_DB.",
            ),
            f(
                "/etc/txrelay/relay.env",
                "Where RELAY_DB names the relay's ledger if it is elsewhere, and RELAY_MAX_INQUIRIES and RELAY_MAX_ATTEMPTS, which --max-inquiries and --max-attempts should match.",
            ),
        ],
        "backup" => vec![
            f(
                "/etc/txrelay/batch.env",
                "The backup timer's settings (the BACKUP_* variables), read by txrelay-backup.service (EnvironmentFile=).",
            ),
            f(
                LEDGER,
                "The ledger the timer backs up (--db, BACKUP_DB), read while the relay runs.",
            ),
            f(
                "/var/lib/txrelay/backups/",
                "Where txrelay-backup.service writes its copies, ledger-YYYYMMDD-HHMM.db (UTC).",
            ),
            f(
                "/usr/lib/systemd/system/txrelay-backup.service, txrelay-backup.timer",
                "The timer (when) and the service (how, as the txrelay user) of the hourly backup; not enabled by the package.",
            ),
        ],
        "restore" => vec![
            f(
                LEDGER,
                "The ledger where the package puts it (--db): stop txrelay-relay.service and the timers first, since a ledger in use is refused.",
            ),
            f(
                "/var/lib/txrelay/backups/",
                "The copies txrelay-backup.service writes, one of which --from names.",
            ),
            f(
                "/var/lib/txrelay/ledger.db.before-restore-YYYYMMDDThhmmssZ",
                "The ledger the restore replaced, kept beside it, its WAL folded in.",
            ),
        ],
        "migrate" => vec![
            f(
                LEDGER,
                "The SQLite ledger where the package puts it (--from): locked for the copy, then sealed, after which every tool refuses it, naming where it went.",
            ),
            f(
                "/etc/txrelay/relay.env, /etc/txrelay/batch.env",
                "Where the new postgres:// URL goes after the copy: RELAY_DB for the relay, LEDGER_DB for the timers' wrappers (whose locks then go to /var/lib/txrelay).",
            ),
        ],
        _ => Vec::new(),
    }
}

/// FILES of a batch tool that its timer runs through a wrapper.
fn wrapped_files(tool: &str) -> Vec<File> {
    let mut files = vec![
        (
            "/etc/txrelay/batch.env".to_owned(),
            format!(
                "The timers' settings: LEDGER_DB, CORE_URL and the {up}_* variables (see ENVIRONMENT), each commented with its default. txrelay-{tool}.service reads it (EnvironmentFile=), and so does /opt/txrelay/scripts/{tool}.sh run by hand (a variable given in its environment wins); {tool} itself reads only its flags and environment. Mode 0640, root:txrelay.",
                up = tool.to_uppercase()
            ),
        ),
        (
            format!("/opt/txrelay/scripts/{tool}.sh"),
            format!(
                "The operator wrapper that txrelay-{tool}.service runs: the settings checked, the ledger defaulting to {LEDGER}, a lock so that no two runs on one ledger overlap, every stderr line timestamped. Run by hand (as the txrelay user, as the timer runs it) it does the timer's run; {tool}.sh --help lists its variables."
            ),
        ),
        (
            LEDGER.to_owned(),
            "The ledger the timer's run opens (LEDGER_DB, or --db).".to_owned(),
        ),
        (
            format!("/var/lib/txrelay/ledger.db.{tool}.lock"),
            "The wrapper's lock beside an SQLite ledger. For a PostgreSQL ledger the wrapper keeps it in /var/lib/txrelay too (LOCK_DIR), named after the URL with its password masked.".to_owned(),
        ),
    ];
    if tool == "reconcile" {
        files.push((
            "/var/lib/txrelay/reconcile-DAY.txt".to_owned(),
            "The report of the day reconciled (RECONCILE_REPORT_DIR), kept by reconcile.sh when the run gives a verdict.".to_owned(),
        ));
    }
    files.push((
        format!("/usr/lib/systemd/system/txrelay-{tool}.service, txrelay-{tool}.timer"),
        "The timer (when) and the service (how, as the txrelay user); not enabled by the package."
            .to_owned(),
    ));
    files
}

/// The exit codes of `tool`, each with what it means; a tool the package does not install
/// gets the codes every tool shares.
pub fn exits(tool: &str) -> Vec<(u8, &'static str)> {
    let usage = (
        EXIT_USAGE,
        "A bad flag, or a bad or empty environment variable: clap's message names it.",
    );
    let mut codes = match tool {
        "relay" => vec![
            (
                EXIT_SETTLED,
                "Stopped by SIGTERM or SIGINT after finishing the transfers in flight.",
            ),
            (
                EXIT_FATAL,
                "Fatal, one line on stderr: the ledger cannot be opened or written, an address is in use, a TLS file cannot be used.",
            ),
            usage,
        ],
        "resolve" => vec![
            (
                EXIT_SETTLED,
                "Every selected row settled (or nothing to do, or --dry-run).",
            ),
            (
                EXIT_FATAL,
                "Fatal, one line on stderr: the ledger cannot be opened, a core URL that cannot be used, or a core answering 404 for a transfer the ledger knows it booked (a wrong --core); no row was changed.",
            ),
            usage,
            (
                EXIT_LEFT,
                "Rows left for a later run: the core did not answer, a stale SENT row moved to UNKNOWN, a row skipped, the canary inquiry failed, or a GUID needs an operator.",
            ),
        ],
        "reprocess" => vec![
            (
                EXIT_SETTLED,
                "Every selected row resent and settled (or nothing to do, or --dry-run).",
            ),
            (
                EXIT_FATAL,
                "Fatal, one line on stderr: the ledger cannot be opened, a core URL that cannot be used, or a core answering 404 for the ledger's own booking (a wrong --core); no row was claimed.",
            ),
            usage,
            (
                EXIT_LEFT,
                "Rows left for a later run: the core unreachable (no row claimed), a resend that came back FAILED or UNKNOWN, rows not tried.",
            ),
        ],
        "purge" => vec![
            (EXIT_SETTLED, "Done (or --dry-run)."),
            (
                EXIT_FATAL,
                "Fatal, one line on stderr: the ledger cannot be opened or written.",
            ),
            (
                EXIT_USAGE,
                "A bad flag or environment variable (clap's message names it), --days 0 without --force included.",
            ),
        ],
        "reconcile" => vec![
            (EXIT_SETTLED, "No break."),
            (
                EXIT_FATAL,
                "At least one break (double, ghost, mismatch, missing): see the report.",
            ),
            (
                EXIT_USAGE,
                "A bad flag or variable, --from not before --to, a bound without its offset, an empty journal without both bounds.",
            ),
            (
                EXIT_LEFT,
                "The journal or the ledger cannot be read (one line naming it); no verdict.",
            ),
        ],
        "inspect" => vec![
            (
                EXIT_SETTLED,
                "Done: read, settled, a dry run that would settle, recovery begun or ended (or nothing to end), a journal entered with nothing left.",
            ),
            (
                EXIT_FATAL,
                "Refused, or the ledger cannot be read or written: show of an unknown GUID, settle writing nothing, recovery --journal on a ledger that is not recovering or with a bad journal.",
            ),
            usage,
            (
                EXIT_LEFT,
                "recovery --journal left some GUIDs (each named, with why).",
            ),
        ],
        "backup" => vec![
            (EXIT_SETTLED, "The backup written, checked and synced."),
            (
                EXIT_FATAL,
                "Fatal, one line on stderr: the ledger missing, --to there already without --force, a copy that failed (no file is left behind).",
            ),
            (
                EXIT_USAGE,
                "A bad flag or variable (clap's message names it), a postgres:// --db included: back PostgreSQL up with its own tools.",
            ),
        ],
        "restore" => vec![
            (
                EXIT_SETTLED,
                "The backup put in place, the ledger marked recovering, the journal entered.",
            ),
            (
                EXIT_FATAL,
                "Refused or failed, one line on stderr, nothing changed: the ledger in use, a backup or journal that cannot be used.",
            ),
            (
                EXIT_USAGE,
                "A bad flag or variable (clap's message names it), a postgres:// --db included: restore PostgreSQL with its own tools, then inspect recovery --begin.",
            ),
        ],
        "migrate" => vec![
            (
                EXIT_SETTLED,
                "Every row copied or already there; the SQLite ledger sealed.",
            ),
            (
                EXIT_FATAL,
                "Fatal, one line on stderr: the SQLite ledger in use or unreadable, the PostgreSQL ledger unreachable.",
            ),
            usage,
            (
                EXIT_LEFT,
                "Some GUIDs refused, already in the PostgreSQL ledger with other content (listed); the SQLite ledger stays as it was, and a later run copies what is missing.",
            ),
        ],
        _ => vec![
            (EXIT_SETTLED, "Done."),
            (EXIT_FATAL, "Fatal, one line on stderr."),
            usage,
        ],
    };
    codes.sort_by_key(|&(code, _)| code);
    codes
}

/// Whether the timers run `tool` through a wrapper that reads /etc/txrelay/batch.env.
pub fn wrapped(tool: &str) -> bool {
    WRAPPED.contains(&tool)
}
