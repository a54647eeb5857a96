//! `chan`: plays a bank channel for one transfer, for demos and for operators checking a
//! relay by hand. It sends exactly what it is told, once: resending is the caller's choice.
//! With `--tls-ca` it speaks TLS to the relay, with `--tls-cert`/`--tls-key` as a named
//! channel (mutual TLS, CONTRACT §8).

use std::io::{self, Write};
use std::net::ToSocketAddrs;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use testkit::tls_client::Dialer;
use wire::{self, Transfer};

testkit::tls_client_flags! { env = "CHAN_"; }

/// Sends one transfer request to the relay and prints the decoded reply.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The relay's address.
    #[arg(long, env = "CHAN_RELAY", default_value = "127.0.0.1:9200")]
    relay: String,
    /// The request's GUID (1-36 of [0-9A-Za-z._-]); resend by reusing it.
    #[arg(long)]
    guid: String,
    /// Debit account (up to 14 digits, zero-padded).
    #[arg(long, default_value = "00000000000001")]
    from: String,
    /// Credit account (up to 14 digits, zero-padded).
    #[arg(long, default_value = "00000000000002")]
    to: String,
    /// Amount in minor units.
    #[arg(long)]
    amount: u64,
    /// Memo, at most 40 bytes; the simulator reads SLOW, DROP, FAIL500, REJECT prefixes.
    #[arg(long, default_value = "")]
    memo: String,
    /// How long to wait for the reply.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// Print the reply message's raw bytes (without length prefix) instead of decoding it.
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    tls: TlsFlags,
}

fn main() -> ExitCode {
    let args = Args::parse();
    cli::main("chan", || run(args).map(|()| cli::EXIT_SETTLED))
}

fn run(args: Args) -> anyhow::Result<()> {
    let msg = wire::encode_request(&Transfer {
        guid: args.guid,
        from_account: args.from,
        to_account: args.to,
        amount: args.amount,
        memo: args.memo,
    })
    .context("cannot build the request")?;
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let addr = args
        .relay
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {}", args.relay))?
        .next()
        .with_context(|| format!("no address for {}", args.relay))?;
    let dialer = Dialer::new(args.tls.client(&args.relay).as_ref()).map_err(anyhow::Error::msg)?;
    let mut chan = dialer
        .connect(&addr, timeout, timeout)
        .with_context(|| format!("cannot connect to the relay at {addr}"))?;
    chan.send(&msg).context("cannot send")?;
    let reply = chan.recv().map_err(|e| {
        let what = match e.kind() {
            io::ErrorKind::InvalidData => "bad reply from the relay",
            _ => "no reply from the relay",
        };
        anyhow::Error::new(e).context(what)
    })?;
    let mut out = std::io::stdout().lock();
    if args.raw {
        out.write_all(&reply)?;
        return Ok(out.flush()?);
    }
    let r = wire::parse_reply(&reply).map_err(anyhow::Error::msg)?;
    match r.booking {
        Some(b) => writeln!(
            out,
            "{} {} core_ref={} amount={} booked_at={}",
            r.guid, r.code, b.core_ref, b.amount, b.booked_at
        )?,
        None => writeln!(out, "{} {} {}", r.guid, r.code, describe(&r.code))?,
    }
    Ok(())
}

/// The result codes of the contract, in words.
fn describe(code: &str) -> &'static str {
    match code {
        "E900" => "malformed request",
        "E901" => "outcome unknown",
        "E902" => "not sent: core unreachable",
        "E903" => "in flight, try later",
        "E904" => "GUID already used for another request",
        "E905" => "ledger not writable",
        _ => "rejected by the core",
    }
}
