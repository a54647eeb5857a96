//! Core-banking simulator (contract §6): a core that books anew on every POST and
//! misbehaves on demand, so that the relay's handling of doubt can be tested.

mod hangup;
mod journal;
mod sim;

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::Parser;
use log::info;
use tiny_http::{Header, Request, Response, Server};

use crate::sim::{Core, Outcome, Reply};

/// A transfer body is a few hundred bytes; anything far larger is not a transfer.
const MAX_BODY: u64 = 64 * 1024;

#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on; port 0 picks any free port (see the first stdout line).
    #[arg(long, env = "CORESIM_LISTEN", default_value = "127.0.0.1:9201")]
    listen: String,
    /// How long a `SLOW` memo makes the core think before booking, in milliseconds.
    #[arg(long, env = "CORESIM_SLOW_MS", default_value_t = 3000)]
    slow_ms: u64,
    /// Append every booking to this file (one JSON line each, flushed before the answer)
    /// and load it at start-up, so that bookings survive a restart. Without it the
    /// simulator forgets everything when it stops.
    #[arg(long, env = "CORESIM_JOURNAL")]
    journal: Option<PathBuf>,
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("coresim: {e:#}");
            ExitCode::FAILURE
        }
    }
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
    let core = Arc::new(core);
    let server = Server::http(&args.listen)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = server
        .server_addr()
        .to_ip()
        .context("listening address is not an IP address")?;

    // Tests and scripts start us on port 0 and learn the real port from this line.
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "listening on {addr}").context("cannot write to stdout")?;
    stdout.flush().context("cannot write to stdout")?;
    drop(stdout);

    for request in server.incoming_requests() {
        let core = Arc::clone(&core);
        // One thread per request: a SLOW answer must never hold up the others. If no
        // thread can be had, the dropped request answers 500 by itself (tiny_http).
        if let Err(e) = thread::Builder::new().spawn(move || serve(&core, request, addr)) {
            log::error!("cannot start a request thread: {e}");
        }
    }
    bail!("the HTTP server stopped accepting connections")
}

fn serve(core: &Core, mut request: Request, local: SocketAddr) {
    let method = request.method().as_str().to_owned();
    let url = request.url().to_owned();
    let mut body = Vec::new();
    let outcome = match request.as_reader().take(MAX_BODY).read_to_end(&mut body) {
        Ok(_) => core.handle(&method, &url, &body),
        Err(e) => Outcome::bad_request(&format!("cannot read the request body: {e}")),
    };

    let status = match &outcome.reply {
        Reply::Json(status, _) => status.to_string(),
        Reply::Drop => "dropped".to_owned(),
    };
    info!(
        "{method} {url} guid={} status={status} directive={}",
        outcome.guid.as_deref().unwrap_or("-"),
        outcome.directive.name(),
    );

    match outcome.reply {
        // A client that has gone (e.g. timed out on SLOW) is not our problem:
        // the booking stands, exactly as it would in the real core.
        Reply::Json(status, value) => {
            let _ = request.respond(json_response(status, &value));
        }
        Reply::Drop => hangup::hang_up(request, local),
    }
}

fn json_response(status: u16, value: &serde_json::Value) -> Response<io::Cursor<Vec<u8>>> {
    let mut response = Response::from_string(value.to_string()).with_status_code(status);
    if let Ok(header) = Header::from_bytes("Content-Type", "application/json") {
        response.add_header(header);
    }
    response
}
