//! The control commands, one line each.

use crate::model::Mode;

/// One command of the control socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `stats`
    Stats,
    /// `freeze`
    Freeze,
    /// `drop MODE SEED`
    Drop { mode: Mode, seed: u64 },
}

impl Command {
    /// Parses one line (without its newline).
    pub fn parse(line: &str) -> Result<Self, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["stats"] => Ok(Command::Stats),
            ["freeze"] => Ok(Command::Freeze),
            ["drop", mode, seed] => {
                let mode = mode.parse()?;
                let seed = seed
                    .parse()
                    .map_err(|_| format!("seed {seed:?} is not a number"))?;
                Ok(Command::Drop { mode, seed })
            }
            _ => Err(format!(
                "unknown command {line:?} (stats, freeze, drop all|subset|torn SEED)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_commands() {
        assert_eq!(Command::parse("stats"), Ok(Command::Stats));
        assert_eq!(Command::parse(" freeze \r"), Ok(Command::Freeze));
        assert_eq!(
            Command::parse("drop subset 42"),
            Ok(Command::Drop {
                mode: Mode::Subset,
                seed: 42
            })
        );
        assert!(Command::parse("drop some 1").is_err());
        assert!(Command::parse("drop all x").is_err());
        assert!(Command::parse("drop all").is_err());
        assert!(Command::parse("").is_err());
    }
}
