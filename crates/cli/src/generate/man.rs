//! A tool's man pages: what clap_mangen writes from its clap definition (NAME, SYNOPSIS,
//! DESCRIPTION, OPTIONS, the subcommands), then EXIT STATUS, ENVIRONMENT, FILES and SEE
//! ALSO. ENVIRONMENT is written from the definition too, one entry per flag with an
//! environment twin, so that a twin added to a flag is in the page without anyone writing
//! it twice; the rest are the package's facts (`package`).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::Context;
use clap::Command;
use clap_mangen::Man;

use super::package;

/// The section the pages are written for, and the suffix of their file names
/// (`relay.1txrelay`). The tools' names are generic (relay, backup, restore, purge), and
/// another package may one day ship a `restore.1` of its own: a suffix of our own, as
/// openssl's `passwd.1ssl` beside passwd's `passwd.1`, keeps the two packages' files apart
/// while `man restore` and `man 1 restore` (what systemd's `man:restore(1)` runs) still
/// find the page, since man-db takes any page in man1 whose section starts with 1.
pub const SECTION: &str = "1txrelay";

/// Writes one page per command of `cmd` (its own and one per visible subcommand, as
/// `TOOL-COMMAND.1txrelay`) into `dir`.
pub fn write_pages(cmd: Command, dir: &Path) -> anyhow::Result<()> {
    for (name, text) in pages(cmd) {
        let path = dir.join(name);
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Each page's file name and roff text: the subcommands' first, then the tool's.
pub fn pages(cmd: Command) -> Vec<(String, String)> {
    // As clap_mangen's generate_to: no page for the implicit `help` subcommand, and the
    // command built, so that each subcommand has its display name (`inspect-list`) and
    // the global flags (inspect's --db) are in each subcommand's page.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let tool = cmd.get_name().to_owned();
    let mut out = Vec::new();
    collect(&cmd, &tool, &mut out);
    out
}

fn collect(cmd: &Command, tool: &str, out: &mut Vec<(String, String)>) {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, tool, out);
    }
    let man = Man::new(cmd.clone()).section(SECTION);
    out.push((man.get_filename(), page(&man, cmd, tool)));
}

/// One page: clap_mangen's sections in its order, ours after OPTIONS and the subcommands
/// in the order man-pages(7) gives (EXIT STATUS, ENVIRONMENT, FILES, VERSION, SEE ALSO).
fn page(man: &Man, cmd: &Command, tool: &str) -> String {
    let mut roff: Vec<u8> = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = man.render_title(&mut roff);
    let _ = man.render_name_section(&mut roff);
    let _ = man.render_synopsis_section(&mut roff);
    let _ = man.render_description_section(&mut roff);
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        let _ = man.render_options_section(&mut roff);
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        let _ = man.render_subcommands_section(&mut roff);
    }
    if cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some() {
        let _ = man.render_extra_section(&mut roff);
    }
    let mut text = String::from_utf8_lossy(&roff).into_owned();
    exit_status(&mut text, cmd, tool);
    environment(&mut text, cmd, tool);
    files(&mut text, tool);
    if cmd.get_version().is_some() || cmd.get_long_version().is_some() {
        let mut version = Vec::new();
        let _ = man.render_version_section(&mut version);
        text.push_str(&String::from_utf8_lossy(&version));
    }
    see_also(&mut text, cmd, tool);
    text
}

fn exit_status(text: &mut String, cmd: &Command, tool: &str) {
    text.push_str(".SH \"EXIT STATUS\"\n");
    for (code, what) in package::exits(tool) {
        let _ = write!(text, ".TP\n.B {code}\n{}\n", esc(what));
    }
    if has_flag(cmd, "json") {
        text.push_str(&para(
            "With --json a failed run prints one JSON object on stdout too, with its error and exit_code.",
        ));
    }
}

/// One entry per visible flag with an environment twin, as the flag's own help says it;
/// then RUST_LOG, which every tool's logging reads.
fn environment(text: &mut String, cmd: &Command, tool: &str) {
    text.push_str(".SH ENVIRONMENT\n");
    text.push_str(&para(
        "Each variable below is the twin of a flag: the flag, given on the command line, wins. A variable set to nothing is refused (exit 2), as an empty flag is.",
    ));
    if package::wrapped(tool) {
        text.push_str(&para(&format!(
            "The timer's run takes them from /etc/txrelay/batch.env, through /opt/txrelay/scripts/{tool}.sh, which also reads LEDGER_DB and CORE_URL (see FILES)."
        )));
    } else if tool == "relay" {
        text.push_str(&para(
            "txrelay-relay.service takes them from /etc/txrelay/relay.env (see FILES).",
        ));
    }
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(var) = arg.get_env() else { continue };
        let twin = match arg.get_long() {
            Some(long) => format!("--{long}"),
            None => arg.get_id().as_str().to_uppercase(),
        };
        // clap keeps a one-sentence help without its full stop; the page's text has it.
        let mut help = arg
            .get_help()
            .map(|h| {
                h.to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        if !help.is_empty() && !help.ends_with(['.', '!', '?']) {
            help.push('.');
        }
        let _ = write!(
            text,
            ".TP\n.B {}\nThe twin of \\fB{}\\fR. {}\n",
            esc(&var.to_string_lossy()),
            esc(&twin),
            esc(&help)
        );
    }
    let _ = write!(
        text,
        ".TP\n.B RUST_LOG\n{}\n",
        esc(
            "The filter of the log lines on stderr: error, warn, info (the default), debug or trace."
        )
    );
}

fn files(text: &mut String, tool: &str) {
    let files = package::files(tool);
    if files.is_empty() {
        return;
    }
    text.push_str(".SH FILES\n");
    for (path, what) in files {
        let _ = write!(text, ".TP\n.I {}\n{}\n", esc(&path), esc(&what));
    }
}

/// The package's other tools (and, on a subcommand's page, the tool itself), the
/// operator wrappers and the documentation.
fn see_also(text: &mut String, cmd: &Command, tool: &str) {
    let own = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let pages: Vec<String> = package::TOOLS
        .iter()
        .filter(|&&t| t != own)
        .map(|t| format!("\\fB{t}\\fR(1)"))
        .collect();
    text.push_str(".SH \"SEE ALSO\"\n");
    let _ = writeln!(text, "{}", pages.join(",\n"));
    text.push_str(&para(
        "The operator wrappers in /opt/txrelay/scripts (relay.sh, resolve.sh, reprocess.sh, purge.sh, reconcile.sh; each with --help). The documentation in /usr/share/doc/txrelay/docs: tools.md (every flag, output and exit code), operations.md (install, timers, backups, alerts, runbooks), deployment.md.",
    ));
    if package::TOOLS.contains(&tool) {
        text.push_str(&para(
            "The man pages are in section 1 under the suffix 1txrelay (relay.1txrelay): man 1txrelay relay shows this package's page should another package ever have one of the same name.",
        ));
    }
}

fn has_flag(cmd: &Command, long: &str) -> bool {
    cmd.get_arguments().any(|a| a.get_long() == Some(long))
}

/// A paragraph of plain text.
fn para(s: &str) -> String {
    format!(".PP\n{}\n", esc(s))
}

/// Plain text as roff text: a backslash printed as one, `-` as the ASCII hyphen that a flag
/// or path must be to be typed again (a bare `-` may print as a typographic hyphen), and a
/// line that would start with `.` or `'` kept from being read as a request.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for line in s.split_inclusive('\n') {
        if line.starts_with('.') || line.starts_with('\'') {
            out.push_str("\\&");
        }
        for c in line.chars() {
            match c {
                '\\' => out.push_str("\\e"),
                '-' => out.push_str("\\-"),
                c => out.push(c),
            }
        }
    }
    out
}
