//! The flags naming the core (relay, resolve, reprocess, `inspect settle`): `--core` and its
//! TLS files, and the two timeouts of a call. Each tool has its own environment prefix and
//! says in its own words what a timeout costs it, so the clap structs are made per tool by
//! [`core_flags!`](crate::core_flags); what they hold is handed over as a [`Core`].

use std::path::PathBuf;
use std::time::Duration;

use core_client::tls::TlsFiles;
use core_client::{BadCoreUrl, CoreClient};

/// The core as a tool's flags name it: its base URL, the TLS files, and the timeouts.
#[derive(Debug, Clone)]
pub struct Core {
    /// `--core`.
    pub url: String,
    /// `--core-ca`, `--core-cert`, `--core-key`.
    pub tls: TlsFiles,
    /// `--connect-timeout-ms`.
    pub connect_timeout: Duration,
    /// `--read-timeout-ms`.
    pub read_timeout: Duration,
}

impl Core {
    /// The flags' values as [`core_flags!`](crate::core_flags) reads them.
    pub fn from_flags(
        url: String,
        [ca, cert, key]: [Option<PathBuf>; 3],
        connect_timeout_ms: u64,
        read_timeout_ms: u64,
    ) -> Core {
        Core {
            url,
            tls: TlsFiles { ca, cert, key },
            connect_timeout: Duration::from_millis(connect_timeout_ms),
            read_timeout: Duration::from_millis(read_timeout_ms),
        }
    }

    /// A client for this core (its URL and TLS files checked).
    pub fn client(&self) -> Result<CoreClient, BadCoreUrl> {
        CoreClient::with_tls(
            &self.url,
            self.connect_timeout,
            self.read_timeout,
            &self.tls,
        )
    }
}

/// Declares, in the calling module, the clap structs of the flags naming the core, their
/// environment twins named with `env` (`"RELAY_"`: `RELAY_CORE`, `RELAY_CORE_CA`, …):
///
/// - `CoreFlags`: `--core` (its help the first doc comment given), `--core-ca`,
///   `--core-cert` and `--core-key` (each of the last two requires the other);
/// - `CoreTimeouts`: `--connect-timeout-ms` (default 1000) and `--read-timeout-ms` (default
///   5000), each at least 1, their help the doc comments given.
///
/// Two structs, so that a tool may list the timeouts where its help always had them.
/// `CoreFlags::with(self, &CoreTimeouts)` gives the [`Core`].
///
/// ```ignore
/// cli::core_flags! {
///     env = "RESOLVE_";
///     /// Base URL of the core banking system.
///     core;
///     /// Time allowed to connect to the core.
///     connect_timeout_ms;
///     /// Time allowed for each later phase of an inquiry.
///     read_timeout_ms;
/// }
/// ```
#[macro_export]
macro_rules! core_flags {
    (
        env = $prefix:literal;
        $(#[$core:meta])* core;
        $(#[$connect:meta])* connect_timeout_ms;
        $(#[$read:meta])* read_timeout_ms;
    ) => {
        /// Where the core is, and how to trust it over https://.
        #[derive(clap::Args, Debug)]
        struct CoreFlags {
            $(#[$core])*
            #[arg(long, env = concat!($prefix, "CORE"), default_value = "http://127.0.0.1:9201")]
            core: String,
            /// For an https:// core: trust the certificates in this PEM file instead of the
            /// system's root certificates.
            #[arg(long, env = concat!($prefix, "CORE_CA"))]
            core_ca: Option<std::path::PathBuf>,
            /// For an https:// core: show this client certificate (PEM, leaf first) for mutual
            /// TLS; with --core-key.
            #[arg(long, env = concat!($prefix, "CORE_CERT"), requires = "core_key")]
            core_cert: Option<std::path::PathBuf>,
            /// The private key (PEM) of --core-cert.
            #[arg(long, env = concat!($prefix, "CORE_KEY"), requires = "core_cert")]
            core_key: Option<std::path::PathBuf>,
        }

        /// How long a call to the core may take.
        #[derive(clap::Args, Debug)]
        struct CoreTimeouts {
            $(#[$connect])*
            #[arg(long, env = concat!($prefix, "CONNECT_TIMEOUT_MS"), default_value_t = 1000,
                  value_parser = clap::value_parser!(u64).range(1..))]
            connect_timeout_ms: u64,
            $(#[$read])*
            #[arg(long, env = concat!($prefix, "READ_TIMEOUT_MS"), default_value_t = 5000,
                  value_parser = clap::value_parser!(u64).range(1..))]
            read_timeout_ms: u64,
        }

        impl CoreFlags {
            /// The core these flags and `timeouts` name.
            fn with(self, timeouts: &CoreTimeouts) -> $crate::Core {
                $crate::Core::from_flags(
                    self.core,
                    [self.core_ca, self.core_cert, self.core_key],
                    timeouts.connect_timeout_ms,
                    timeouts.read_timeout_ms,
                )
            }
        }
    };
}
