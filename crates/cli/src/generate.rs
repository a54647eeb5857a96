//! Man pages and shell completions, written from a tool's own clap definition for the
//! package (`scripts/package.sh`). A tool started with `TXRELAY_GENERATE=DIR` in its
//! environment writes `DIR/man/TOOL.1txrelay` (and `TOOL-COMMAND.1txrelay` for each
//! subcommand; `man::SECTION` says why the suffix) and
//! `DIR/completions/{TOOL.bash,_TOOL,TOOL.fish}` (bash, zsh, fish), then exits 0 without
//! running; exit 1 with one line if a file cannot be written. Without the variable it
//! returns at once. Each page has, beside the flags, EXIT STATUS, ENVIRONMENT (every
//! flag's environment twin), FILES (where the package puts the settings and the ledger)
//! and SEE ALSO: what an operator on a machine without the source tree needs.

mod man;
mod package;

use std::fs;
use std::path::Path;
use std::process;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

/// The variable that asks for the files: the directory they go to.
pub const GENERATE_ENV: &str = "TXRELAY_GENERATE";

/// Writes the files and exits if asked; `cli::parse` calls it before parsing the flags.
pub fn generate_if_asked<A: CommandFactory>() {
    let Some(dir) = std::env::var_os(GENERATE_ENV) else {
        return;
    };
    let cmd = A::command();
    let tool = cmd.get_name().to_owned();
    match write_all(cmd, Path::new(&dir)) {
        Ok(()) => process::exit(0),
        Err(e) => {
            crate::stderr_line(&tool, log::Level::Error, &format!("{e:#}"));
            process::exit(i32::from(crate::EXIT_FATAL));
        }
    }
}

/// Writes the man pages and completions of `cmd` under `dir`.
pub fn write_all(mut cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    let (man, completions) = (dir.join("man"), dir.join("completions"));
    for d in [&man, &completions] {
        fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    man::write_pages(cmd.clone(), &man)
        .with_context(|| format!("cannot write the man pages in {}", man.display()))?;
    let name = cmd.get_name().to_owned();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, &name, &completions).with_context(|| {
            format!(
                "cannot write the {shell} completions in {}",
                completions.display()
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_page_per_command_and_three_completions() {
        let cmd = clap::Command::new("tool")
            .about("A tool.")
            .arg(clap::Arg::new("db").long("db").env("TOOL_DB"))
            .subcommand(clap::Command::new("show").about("Shows."));
        let dir = tempfile::tempdir().unwrap();
        write_all(cmd, dir.path()).unwrap();
        let mut names: Vec<String> = ["man", "completions"]
            .iter()
            .flat_map(|d| fs::read_dir(dir.path().join(d)).unwrap())
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "_tool",
                "tool-show.1txrelay",
                "tool.1txrelay",
                "tool.bash",
                "tool.fish"
            ]
        );
        let page = fs::read_to_string(dir.path().join("man/tool.1txrelay")).unwrap();
        assert!(page.contains("TOOL_DB"), "{page}");
    }

    /// The sections an operator looks for, in each page, the subcommands' included; FILES
    /// only where the package installs the tool.
    #[test]
    fn every_page_has_exit_status_environment_and_see_also() {
        let cmd = clap::Command::new("inspect")
            .about("Looks.")
            .arg(
                clap::Arg::new("db")
                    .long("db")
                    .env("INSPECT_DB")
                    .global(true)
                    .help("The ledger."),
            )
            .arg(clap::Arg::new("json").long("json").num_args(0))
            .subcommand(clap::Command::new("list").about("Lists."));
        let pages = man::pages(cmd);
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["inspect-list.1txrelay", "inspect.1txrelay"]);
        for (name, page) in &pages {
            for section in [
                ".SH \"EXIT STATUS\"",
                ".SH ENVIRONMENT",
                ".SH FILES",
                ".SH \"SEE ALSO\"",
            ] {
                assert!(page.contains(section), "{name}: no {section}:\n{page}");
            }
            // The global flag's twin is in the subcommand's page too.
            assert!(
                page.contains(".B INSPECT_DB\nThe twin of \\fB\\-\\-db\\fR. The ledger."),
                "{name}:\n{page}"
            );
            assert!(page.contains(".I /var/lib/txrelay/ledger.db"), "{page}");
            assert!(page.contains("\\fBrelay\\fR(1)"), "{page}");
        }
        // The tool's own page does not list itself; its subcommand's page lists the tool.
        assert!(!pages[1].1.contains("\\fBinspect\\fR(1)"));
        assert!(pages[0].1.contains("\\fBinspect\\fR(1)"));

        let test_tool = man::pages(clap::Command::new("chan"));
        assert!(!test_tool[0].1.contains(".SH FILES"), "{}", test_tool[0].1);
    }

    #[test]
    fn text_is_escaped_for_roff() {
        assert_eq!(man::esc("--db a\\b"), "\\-\\-db a\\eb");
        assert_eq!(man::esc(".x\n'y"), "\\&.x\n\\&'y");
    }
}
