//! Man pages and shell completions, written from a tool's own clap definition for the
//! package (`scripts/package.sh`). A tool started with `TXRELAY_GENERATE=DIR` in its
//! environment writes `DIR/man/TOOL.1` (and `TOOL-COMMAND.1` for each subcommand) and
//! `DIR/completions/{TOOL.bash,_TOOL,TOOL.fish}` (bash, zsh, fish), then exits 0 without
//! running; exit 1 with one line if a file cannot be written. Without the variable it
//! returns at once.

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
    clap_mangen::generate_to(cmd.clone(), &man)
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
            ["_tool", "tool-show.1", "tool.1", "tool.bash", "tool.fish"]
        );
        let page = fs::read_to_string(dir.path().join("man/tool.1")).unwrap();
        assert!(page.contains("TOOL_DB"), "{page}");
    }
}
