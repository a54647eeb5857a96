//! Core-banking simulator (contract §6): a core that books anew on every POST and
//! misbehaves on demand, so that the relay's handling of doubt can be tested.

mod http;
mod journal;
mod sim;

use std::io::{self, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

use testkit::tls::{Versions, server_config};

use crate::sim::Core;

#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on; port 0 picks any free port (see the first stdout line).
    #[arg(long, env = "CORESIM_LISTEN", default_value = "127.0.0.1:9201")]
    listen: String,
    /// How long a `SLOW` memo makes the core think before booking, in milliseconds.
    #[arg(long, env = "CORESIM_SLOW_MS", default_value_t = 3000)]
    slow_ms: u64,
    /// How long every inquiry (`GET /v1/transfers/{guid}`) makes the core think before it
    /// answers, in milliseconds: a slow core for resolve's parallel inquiries.
    #[arg(long, env = "CORESIM_INQUIRY_MS", default_value_t = 0)]
    inquiry_ms: u64,
    /// Append every booking to this file (one JSON line each, flushed before the answer)
    /// and load it at start-up, so that bookings survive a restart. Without it the
    /// simulator forgets everything when it stops.
    #[arg(long, env = "CORESIM_JOURNAL")]
    journal: Option<PathBuf>,
    /// Serve HTTPS: this certificate chain (PEM, leaf first)...
    #[arg(long, env = "CORESIM_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// ...and its private key (PEM).
    #[arg(long, env = "CORESIM_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// With TLS: require a client certificate signed by a CA in this file (mutual TLS).
    #[arg(long, env = "CORESIM_CLIENT_CA", requires = "tls_cert")]
    client_ca: Option<PathBuf>,
    /// With TLS: speak TLS 1.2 only (then a refused client certificate is told within the
    /// handshake; under TLS 1.3 only after the client sent its request).
    #[arg(long, requires = "tls_cert")]
    tls12: bool,
}

fn main() -> ExitCode {
    cli::main("coresim", || run().map(|()| cli::EXIT_SETTLED))
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    // The journal is loaded before the port opens: a client never sees a core that has
    // not yet remembered its bookings.
    let slow = Duration::from_millis(args.slow_ms);
    let core = match &args.journal {
        Some(path) => Core::with_journal(slow, path)?,
        None => Core::new(slow),
    };
    let core = Arc::new(core.inquiry_delay(Duration::from_millis(args.inquiry_ms)));
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let versions = if args.tls12 {
                Versions::Tls12
            } else {
                Versions::Both
            };
            let config = server_config(cert, key, args.client_ca.as_deref(), versions)
                .map_err(|e| anyhow::anyhow!("TLS: {e}"))?;
            Some(config)
        }
        _ => None,
    };
    let listener = TcpListener::bind(&args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener
        .local_addr()
        .context("cannot read the listening address")?;

    // Tests and scripts start us on port 0 and learn the real port from this line.
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "listening on {addr}").context("cannot write to stdout")?;
    stdout.flush().context("cannot write to stdout")?;
    drop(stdout);

    http::serve(listener, core, tls).context("the HTTP server stopped")
}
