//! `pkigen`: makes throwaway certificates for the scripts (bench, chaos) and for trying mutual
//! TLS by hand, without openssl: a CA, the relay's server certificate and one client
//! certificate per channel, written as PEM files into a directory. Test certificates only:
//! the keys are written unencrypted, the CA's key is not kept.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use testkit::pki::write_certs;

/// Writes DIR/ca.pem, DIR/relay.pem and DIR/relay.key, and DIR/<CN>.pem and DIR/<CN>.key
/// for every --client CN.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Where to write the files (created if missing; files of the same names are replaced).
    dir: PathBuf,
    /// A channel's client certificate with this subject CN (its channel identity); repeat
    /// for more channels.
    #[arg(long = "client", value_name = "CN", value_parser = file_name,
          default_values_t = ["channel-a".to_string(), "channel-b".to_string()])]
    clients: Vec<String>,
    /// A name (host name or IP address) in the relay certificate's SAN; repeat for more.
    #[arg(long = "relay-name", value_name = "NAME",
          default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
    relay_names: Vec<String>,
}

/// A CN that is also a safe file name, and not one of the relay's files.
fn file_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    match s {
        _ if !ok => Err(format!("{s:?} must be 1-64 characters of [0-9A-Za-z._-]")),
        "ca" | "relay" => Err(format!("{s:?} is taken by the CA's or the relay's files")),
        _ => Ok(s.to_string()),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    cli::main("pkigen", || run(&args).map(|()| cli::EXIT_SETTLED))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let names: Vec<&str> = args.relay_names.iter().map(String::as_str).collect();
    let clients: Vec<&str> = args.clients.iter().map(String::as_str).collect();
    write_certs(&args.dir, &names, &clients).map_err(anyhow::Error::msg)?;
    println!("wrote {}", args.dir.display());
    Ok(())
}
