//! `relay`: channels in (framed TCP), core out (HTTP), one ledger row per GUID in between.

mod systemd;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use anyhow::Context;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use engine::transfer::{MAX_CORE_DEADLINE, STALE_SENT_FLOOR};
use log::{error, info};
use server::{Config, ListenerTls, Relay, TlsReloader};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

cli::db_flag! {
    env = "RELAY_";
    /// The ledger: an SQLite file (created if missing) or a postgres:// URL.
}

cli::core_flags! {
    env = "RELAY_";
    /// Base URL of the core banking system.
    core;
    /// Time allowed to establish the connection to the core; on expiry: E902/FAILED.
    connect_timeout_ms;
    /// Time allowed for each later phase of the core call; on expiry: E901/UNKNOWN.
    read_timeout_ms;
}

cli::log_format_flag! { env = "RELAY_"; }

/// Relays bank transfer requests to the core at most once per GUID.
#[derive(Parser, Debug)]
#[command(version = cli::VERSION, about)]
struct Args {
    #[command(flatten)]
    ledger: DbFlag,
    /// Where channels connect. Port 0 picks a free port.
    #[arg(long, env = "RELAY_LISTEN", default_value = "127.0.0.1:9200")]
    listen: String,
    /// Also serve the HTTP/JSON channel API (POST /v1/transfers with an Idempotency-Key,
    /// GET /v1/transfers/{guid}) here, beside --listen: same ledger, limits and TLS. Port 0
    /// picks a free port. Off unless given.
    #[arg(long, env = "RELAY_HTTP_LISTEN")]
    http_listen: Option<String>,
    #[command(flatten)]
    core: CoreFlags,
    #[command(flatten)]
    timeouts: CoreTimeouts,
    /// Time allowed for a frame from its first byte; on expiry the connection is closed.
    #[arg(long, env = "RELAY_FRAME_TIMEOUT_MS", default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(1..))]
    frame_timeout_ms: u64,
    /// A connection silent between frames this long is closed.
    #[arg(long, env = "RELAY_IDLE_TIMEOUT_SECS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout_secs: u64,
    /// Connections beyond this many are closed at once.
    #[arg(long, env = "RELAY_MAX_CONNECTIONS", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// Connections one source IP may hold; beyond it, its new connections are closed at once.
    #[arg(long, env = "RELAY_MAX_CONNECTIONS_PER_PEER", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_connections_per_peer: u64,
    /// After a read timeout (E901, UNKNOWN), keep listening for the core's answer this long
    /// and settle the row if it is a booking or a rejection; 0 turns it off.
    #[arg(long, env = "RELAY_LATE_REPLY_MS", default_value_t = 30_000)]
    late_reply_ms: u64,
    /// Most calls listened to for a late reply at once; beyond, a timed-out call is dropped.
    #[arg(long, env = "RELAY_MAX_LATE_REPLIES", default_value_t = 256)]
    max_late_replies: u64,
    /// Serve GET /metrics (Prometheus) and GET /healthz on this address, e.g.
    /// 127.0.0.1:9300. Off unless given.
    #[arg(long, env = "RELAY_ADMIN")]
    admin: Option<String>,
    /// For /metrics (txrelay_ledger_needs_operator): a GUID still in doubt with this many
    /// failed inquiries needs an operator; set it as resolve's --max-inquiries is set.
    #[arg(long, env = "RELAY_MAX_INQUIRIES", default_value_t = server::metrics::DEFAULT_MAX_INQUIRIES,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_inquiries: u32,
    /// For /metrics (txrelay_ledger_failed_at_attempt_cap): a FAILED/E902 row with this many
    /// attempts is at reprocess's cap; set it as reprocess's --max-attempts is set.
    #[arg(long, env = "RELAY_MAX_ATTEMPTS", default_value_t = server::metrics::DEFAULT_MAX_ATTEMPTS,
          value_parser = clap::value_parser!(i64).range(1..))]
    max_attempts: i64,
    /// Speak TLS (1.2, 1.3) to the channels with this certificate chain (PEM, leaf first).
    /// Re-read, with the other TLS files, on SIGHUP.
    #[arg(
        long,
        env = "RELAY_TLS_CERT",
        value_name = "PATH",
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(
        long,
        env = "RELAY_TLS_KEY",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
    /// Mutual TLS: every channel must show a client certificate chaining to a CA in this
    /// file (PEM); its subject's CN is the channel's identity.
    #[arg(
        long,
        env = "RELAY_CLIENT_CA",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    client_ca: Option<PathBuf>,
    /// Certificate revocation lists (PEM) for the client certificates.
    #[arg(
        long,
        env = "RELAY_CLIENT_CRL",
        value_name = "PATH",
        requires = "client_ca"
    )]
    client_crl: Option<PathBuf>,
    /// Connections one channel identity (mutual TLS) may hold; beyond it, its new
    /// connections are closed after the handshake. Off unless given.
    #[arg(long, env = "RELAY_MAX_CONNECTIONS_PER_CHANNEL", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    max_connections_per_channel: Option<u64>,
    #[command(flatten)]
    log: LogFormatFlag,
}

impl Args {
    /// The core call as a whole is bounded by connect + read timeout; resolve's stale-sent
    /// floor relies on that bound staying well below it.
    fn check(self) -> Args {
        let (connect_ms, read_ms) = (
            self.timeouts.connect_timeout_ms,
            self.timeouts.read_timeout_ms,
        );
        let call = Duration::from_millis(connect_ms.saturating_add(read_ms));
        if call > MAX_CORE_DEADLINE {
            Args::command()
                .error(
                    ErrorKind::ValueValidation,
                    format!(
                        "--connect-timeout-ms {} + --read-timeout-ms {} exceeds {} ms: a core \
                         call may take at most that long, so that resolve --stale-sent (at \
                         least {} s) never settles a row whose call is still running",
                        connect_ms,
                        read_ms,
                        MAX_CORE_DEADLINE.as_millis(),
                        STALE_SENT_FLOOR.as_secs()
                    ),
                )
                .exit();
        }
        self
    }
}

fn main() -> ExitCode {
    let args = cli::parse::<Args>().check();
    cli::main_logged("relay", args.log.log_format, || run(args))
}

/// SIGHUP: new handshakes use the files as they are now; a bad file keeps the old ones.
fn reload(reloader: Option<&TlsReloader>) {
    match reloader.map(TlsReloader::reload) {
        None => info!("SIGHUP: nothing to reload (the channel listener is plain TCP)"),
        Some(Ok(())) => info!("reloaded TLS certificates"),
        Some(Err(e)) => {
            error!("SIGHUP: cannot reload the TLS certificates, keeping those in use: {e}")
        }
    }
}

fn run(args: Args) -> anyhow::Result<u8> {
    let core = args.core.with(&args.timeouts);
    let config = Config {
        listen: args.listen,
        http_listen: args.http_listen,
        core_url: core.url,
        core_tls: core.tls,
        connect_timeout: core.connect_timeout,
        read_timeout: core.read_timeout,
        frame_timeout: Duration::from_millis(args.frame_timeout_ms),
        idle_timeout: Duration::from_secs(args.idle_timeout_secs),
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        max_connections_per_peer: usize::try_from(args.max_connections_per_peer)
            .unwrap_or(usize::MAX),
        late_reply: Duration::from_millis(args.late_reply_ms),
        max_late_replies: usize::try_from(args.max_late_replies).unwrap_or(usize::MAX),
        tls: args
            .tls_cert
            .zip(args.tls_key)
            .map(|(cert, key)| ListenerTls {
                cert,
                key,
                client_ca: args.client_ca,
                client_crl: args.client_crl,
            }),
        max_connections_per_channel: args
            .max_connections_per_channel
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        admin: args.admin,
        admin_limits: server::metrics::Thresholds {
            max_inquiries: args.max_inquiries,
            max_attempts: args.max_attempts,
        },
        commit: cli::COMMIT,
    };
    let db = cli::db_arg::<Args>(&args.ledger.db);
    let relay = Relay::start(&db, config).context("cannot start")?;
    // What it runs with, then one look at the core: a wrong --core shows in the first lines
    // of the log, not in the codes of the first transfers. Before `listening on`, so that a
    // test or an operator reading the log after it sees the probe's result; it waits at most
    // one core call's deadline and never stops the start (the core may come later).
    relay.log_start(&db);
    relay.probe_core();
    let addr = relay
        .local_addr()
        .context("cannot read the bound address")?;
    let http_addr = relay.http_addr();

    // SIGTERM / SIGINT: stop accepting, finish what is in flight, exit 0. A second signal
    // changes nothing: in-flight requests are bounded by the core timeouts anyway. SIGHUP:
    // re-read the TLS files. Installed before `listening on`, so that a signal sent as soon
    // as that line appears is handled.
    let handle = relay
        .shutdown_handle()
        .context("cannot read the bound address")?;
    let reloader = relay.tls_reloader();
    let mut signals =
        Signals::new([SIGTERM, SIGINT, SIGHUP]).context("cannot install signal handlers")?;
    thread::spawn(move || {
        for sig in signals.forever() {
            if sig == SIGHUP {
                reload(reloader.as_ref());
            } else {
                info!("signal {sig}: shutting down, finishing requests in flight");
                systemd::stopping();
                handle.shutdown();
            }
        }
    });

    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {addr}")
        .and_then(|()| match http_addr {
            Some(http) => writeln!(out, "http listening on {http}"),
            None => Ok(()),
        })
        .and_then(|()| out.flush())
        .context("cannot write to stdout")?;
    drop(out);
    systemd::ready();
    relay.serve();
    // The counts of warnings left out by the rate limit, before the last line.
    log_limit::flush_all();
    info!("shut down cleanly");
    Ok(cli::EXIT_SETTLED)
}
