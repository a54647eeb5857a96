//! The flags naming the core (relay, resolve, reprocess, `inspect settle`): `--core` and its
//! TLS files, and the two timeouts of a call. Each tool has its own environment prefix and
//! says in its own words what a timeout costs it, so the clap structs are made per tool by
//! [`core_flags!`](crate::core_flags); what they hold is handed over as a [`Core`].

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Arg, Command};
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

/// `url` with everything before its last `@` (after the scheme) shown as `***`, if it holds
/// an `@` at all; `None` if it does not. Any `@` counts, not only one in the authority: a
/// password holding `/` or `?` (`http://svc:p/w@core`) ends the authority early, and the
/// URL parser's error would then quote the rest of the password.
pub fn masked_userinfo(url: &str) -> Option<String> {
    let at = url.rfind('@')?;
    let scheme = url
        .find("://")
        .filter(|&i| i < at)
        .map_or("", |i| &url[..i + 3]);
    Some(format!("{scheme}***{}", &url[at..]))
}

/// `--core`'s value parser: the URL as given, unless it holds credentials
/// (`http://svc:pw@core`). ureq would send them as HTTP Basic authentication, and the URL is
/// shown in log lines, start-up errors and the wrappers' lines, so a password there leaks
/// wherever the URL goes. Refused with a usage error naming the flag (or the environment
/// variable that gave the value) that never quotes the password, as clap's own error would:
/// everything before the last `@` is masked.
#[derive(Debug, Clone, Copy, Default)]
pub struct CoreUrl;

impl TypedValueParser for CoreUrl {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        self.parse_ref_(cmd, arg, value, ValueSource::CommandLine)
    }

    fn parse_ref_(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
        source: ValueSource,
    ) -> Result<String, clap::Error> {
        let flag = arg
            .and_then(Arg::get_long)
            .map_or_else(|| "--core".to_string(), |l| format!("--{l}"));
        // Which name the operator has to look for: the variable, when it gave the value.
        let named = match (source, arg.and_then(Arg::get_env)) {
            (ValueSource::EnvVariable, Some(var)) => {
                format!("{} (it stands for {flag})", var.to_string_lossy())
            }
            _ => format!("'{flag}'"),
        };
        let refuse = |message: String| {
            let mut cmd = cmd.clone();
            Err(cmd.error(ErrorKind::ValueValidation, message))
        };
        let Some(url) = value.to_str() else {
            return refuse(format!("invalid value for {named}: not UTF-8"));
        };
        match masked_userinfo(url) {
            None => Ok(url.to_string()),
            Some(shown) => refuse(format!(
                "invalid value '{shown}' for {named}: credentials do not belong in the core's \
                 URL (user:password@ is sent as HTTP Basic authentication and would show \
                 wherever the URL is logged); give the URL without them, and have the core \
                 authenticate the relay by a TLS client certificate (--core-cert and \
                 --core-key, over https://)"
            )),
        }
    }
}

/// Declares, in the calling module, the clap structs of the flags naming the core, their
/// environment twins named with `env` (`"RELAY_"`: `RELAY_CORE`, `RELAY_CORE_CA`, …):
///
/// - `CoreFlags`: `--core` (its help the first doc comment given; a URL with credentials
///   refused by [`CoreUrl`], and its environment twin's value never shown in `--help`, where
///   clap would print it), `--core-ca`,
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
            #[arg(long, env = concat!($prefix, "CORE"), default_value = "http://127.0.0.1:9201",
                  value_parser = $crate::flags::CoreUrl, hide_env_values = true)]
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

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::masked_userinfo;

    crate::core_flags! {
        env = "CORE_URL_TEST_";
        core;
        connect_timeout_ms;
        read_timeout_ms;
    }

    #[derive(Parser, Debug)]
    struct Args {
        #[command(flatten)]
        core: CoreFlags,
        #[command(flatten)]
        timeouts: CoreTimeouts,
    }

    #[test]
    fn a_url_with_credentials_is_masked_up_to_its_last_at() {
        let cases = [
            ("http://svc:Xq9@core:9201/v1", "http://***@core:9201/v1"),
            ("https://Xq9@core", "https://***@core"),
            ("http://svc:Xq9/se@core", "http://***@core"),
            ("http://svc:Xq9@se@core", "http://***@core"),
            ("svc:Xq9@core", "***@core"),
        ];
        for (url, shown) in cases {
            assert_eq!(masked_userinfo(url).as_deref(), Some(shown), "{url}");
        }
        assert_eq!(masked_userinfo("http://127.0.0.1:9201"), None);
    }

    #[test]
    fn credentials_in_core_are_a_usage_error_that_does_not_show_them() {
        for url in [
            "http://svc:Xq9@127.0.0.1:1",
            "http://svc:p/Xq9@core:80/v1",
            "https://Xq9@core",
            "svc:Xq9@core",
        ] {
            let e = crate::try_parse_from::<Args, _, _>(["t", "--core", url]).unwrap_err();
            let text = e.to_string();
            assert_eq!(e.exit_code(), 2, "{text}");
            assert!(!text.contains("Xq9"), "{text}");
            assert!(
                text.contains("for '--core'") && text.contains("--core-cert and --core-key"),
                "{text}"
            );
        }
        let a: Args = crate::try_parse_from(["t", "--core", "https://core:8443/v1"]).unwrap();
        assert_eq!(a.core.with(&a.timeouts).url, "https://core:8443/v1");
        let a: Args = crate::try_parse_from(["t"]).unwrap();
        assert_eq!(a.core.with(&a.timeouts).url, "http://127.0.0.1:9201");
    }

    #[test]
    fn the_environment_twin_s_value_is_never_shown_in_help() {
        let cmd = Args::command();
        let core = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some("core"))
            .expect("--core");
        assert!(core.is_hide_env_values_set());
    }
}
