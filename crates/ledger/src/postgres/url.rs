//! A `--db` that names a PostgreSQL ledger: a libpq URI (`postgres://` or `postgresql://`).
//!
//! The client library parses most of it; this module takes out what it does not know
//! (`sslmode` beyond disable/prefer/require, `sslrootcert`) and keeps a display form with the
//! password masked, for every log line and error.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// How the connection is protected, as libpq's `sslmode` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, without checking its certificate (libpq's default).
    Prefer,
    /// TLS always; the certificate is not checked unless a CA file is given (then: as
    /// verify-ca).
    Require,
    /// TLS; the certificate must chain to `sslrootcert`.
    VerifyCa,
    /// TLS; the certificate must chain to `sslrootcert` and name the host.
    VerifyFull,
}

/// A parsed PostgreSQL ledger URL.
#[derive(Clone)]
pub struct PgUrl {
    /// What the client library parses (without the options handled here).
    pub config: postgres::Config,
    pub tls: TlsMode,
    pub root_cert: Option<PathBuf>,
    /// The URL with its password replaced by `***`.
    masked: String,
}

impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked)
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({})", self.masked)
    }
}

/// True if `db` names a PostgreSQL ledger rather than a file.
pub fn is_pg_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

pub use crate::error::BadPgUrl;

impl FromStr for PgUrl {
    type Err = BadPgUrl;

    fn from_str(url: &str) -> Result<PgUrl, BadPgUrl> {
        let Parsed {
            parts,
            mut config,
            sslmode,
            root_cert,
        } = Parsed::of(url)?;
        let masked = parts.display(&config);
        let bad = |why: String| BadPgUrl(format!("database URL {masked}: {why}"));
        let mut tls = match sslmode {
            None | Some("allow" | "prefer") => TlsMode::Prefer,
            Some("disable") => TlsMode::Disable,
            Some("require") => TlsMode::Require,
            Some("verify-ca") => TlsMode::VerifyCa,
            Some("verify-full") => TlsMode::VerifyFull,
            Some(other) => return Err(bad(format!("unknown sslmode {other:?}"))),
        };
        if matches!(tls, TlsMode::VerifyCa | TlsMode::VerifyFull) && root_cert.is_none() {
            return Err(bad(
                "sslmode verify-ca and verify-full need sslrootcert=FILE (the CA)".into(),
            ));
        }
        if tls == TlsMode::Require && root_cert.is_some() {
            tls = TlsMode::VerifyCa; // libpq: require with a root certificate verifies it
        }
        config.ssl_mode(match tls {
            TlsMode::Disable => postgres::config::SslMode::Disable,
            TlsMode::Prefer => postgres::config::SslMode::Prefer,
            _ => postgres::config::SslMode::Require,
        });
        if config.get_dbname().is_none() && config.get_user().is_none() {
            return Err(bad("names neither a user nor a database".into()));
        }
        Ok(PgUrl {
            config,
            tls,
            root_cert,
            masked,
        })
    }
}

/// A URL as the client library parsed it, with the TLS options it does not know taken out.
struct Parsed<'a> {
    parts: Parts<'a>,
    config: postgres::Config,
    sslmode: Option<&'a str>,
    root_cert: Option<PathBuf>,
}

impl<'a> Parsed<'a> {
    /// Errors show the URL as `fallback` does: where its password ends is not known yet.
    fn of(url: &'a str) -> Result<Parsed<'a>, BadPgUrl> {
        let bad =
            |why: &dyn fmt::Display| BadPgUrl(format!("database URL {}: {why}", fallback(url)));
        if !is_pg_url(url) {
            return Err(bad(&"must start with postgres:// or postgresql://"));
        }
        let parts = Parts::split(url).map_err(|why| bad(&why))?;
        let mut kept = Vec::new();
        let mut sslmode = None;
        let mut root_cert = None;
        for (pair, k, v) in parts.pairs() {
            match k {
                "sslmode" => sslmode = Some(v),
                "sslrootcert" => root_cert = Some(PathBuf::from(percent_decode(v))),
                _ => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            parts.base.to_string()
        } else {
            format!("{}?{}", parts.base, kept.join("&"))
        };
        let config = rest.parse().map_err(|e: postgres::Error| bad(&e))?;
        Ok(Parsed {
            parts,
            config,
            sslmode,
            root_cert,
        })
    }
}

/// A URL cut where the client library cuts it: the user info ends at the first `@` (so a
/// password may hold `/`, `?`, `:` or `#`, but not a raw `@`), the query starts at the first
/// `?` after it.
struct Parts<'a> {
    /// `postgres` or `postgresql`.
    scheme: &'a str,
    /// Everything before the query.
    base: &'a str,
    query: &'a str,
}

impl<'a> Parts<'a> {
    /// Refuses what the client library would read otherwise than its writer meant: a second
    /// `@` (the password's, which would end up in the host name or the database's name), or
    /// a user name holding `/` or `?` (a `@` in the query taken for the user info's end).
    fn split(url: &'a str) -> Result<Parts<'a>, &'static str> {
        let (scheme, rest) = url.split_once("://").ok_or("not a URL")?;
        let after_creds = match rest.split_once('@') {
            Some((creds, after)) => {
                let user = creds.split(':').next().unwrap_or("");
                if after.contains('@') || user.contains(['/', '?']) {
                    return Err("a '@' in the password (or anywhere else) must be written %40");
                }
                after
            }
            None => rest,
        };
        let cut =
            url.len() - after_creds.len() + after_creds.find('?').unwrap_or(after_creds.len());
        Ok(Parts {
            scheme,
            base: &url[..cut],
            query: url.get(cut + 1..).unwrap_or(""),
        })
    }

    /// The query's parameters: (as written, key, value).
    fn pairs(&self) -> impl Iterator<Item = (&'a str, &'a str, &'a str)> {
        self.query.split('&').filter(|p| !p.is_empty()).map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (pair, k, v)
        })
    }

    /// `scheme://USER:***@HOST:PORT,…/DBNAME?PARAMS`, built from what the client library
    /// parsed (`config`): the user, the hosts with their ports, the database's name; then
    /// the other parameters as written, but for those shown before (`user`, `host`, `port`,
    /// `dbname`) and the password (shown as `***` after the user, however it was given).
    fn display(&self, config: &postgres::Config) -> String {
        use postgres::config::Host;
        let mut out = format!("{}://", self.scheme);
        let password = config.get_password().is_some();
        if config.get_user().is_some() || password {
            out.push_str(&percent_encode(config.get_user().unwrap_or("")));
            if password {
                out.push_str(":***");
            }
            out.push('@');
        }
        let ports = config.get_ports();
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let host = match host {
                    Host::Tcp(h) if h.contains(':') => format!("[{h}]"),
                    Host::Tcp(h) => percent_encode(h),
                    Host::Unix(p) => percent_encode(&p.to_string_lossy()),
                };
                let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
                format!("{host}:{port}")
            })
            .collect();
        out.push_str(&hosts.join(","));
        if let Some(db) = config.get_dbname() {
            out.push('/');
            out.push_str(&percent_encode(db));
        }
        let shown: Vec<&str> = self
            .pairs()
            .filter(|(_, k, _)| !matches!(*k, "password" | "user" | "host" | "port" | "dbname"))
            .map(|(pair, _, _)| pair)
            .collect();
        if !shown.is_empty() {
            out.push('?');
            out.push_str(&shown.join("&"));
        }
        out
    }
}

/// What is shown of a URL that cannot be parsed: its scheme and `***`, nothing else (where
/// its password ends is not known).
fn fallback(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, _)) if scheme.chars().all(|c| c.is_ascii_alphanumeric()) => {
            format!("{scheme}://***")
        }
        _ => "***".to_string(),
    }
}

/// `url` as every log line and error shows it: built from the parsed URL with the password
/// `***` (see `PgUrl`'s `Display`), or only its scheme and `***` if it does not parse.
pub fn mask(url: &str) -> String {
    match Parsed::of(url) {
        Ok(p) => p.parts.display(&p.config),
        Err(_) => fallback(url),
    }
}

/// `s` with every byte outside RFC 3986's unreserved characters percent-encoded.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_wherever_they_are() {
        assert_eq!(
            mask("postgres://relay:s3cret@db:5432/ledger?sslmode=require"),
            "postgres://relay:***@db:5432/ledger?sslmode=require"
        );
        assert_eq!(
            mask("postgresql://relay@db/ledger?password=s3cret&connect_timeout=3"),
            "postgresql://relay:***@db:5432/ledger?connect_timeout=3"
        );
        assert_eq!(mask("postgres://db"), "postgres://db:5432");
        assert_eq!(
            mask("postgres://relay:s3cret@%2Frun%2Fpg,[::1]:5433/ledger"),
            "postgres://relay:***@%2Frun%2Fpg:5432,[::1]:5433/ledger"
        );
        let u: PgUrl = "postgres://relay:s3cret@db/ledger".parse().unwrap();
        assert!(!format!("{u} {u:?}").contains("s3cret"));
        let e = "postgres://relay:s3cret@db/ledger?sslmode=bogus"
            .parse::<PgUrl>()
            .unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    /// Base64 secrets hold `/`, `+` and `=`; others `?`, `#`, `%`, or nothing at all.
    #[test]
    fn passwords_with_any_character_are_masked_and_reach_the_client_library() {
        for (written, meant) in [
            ("Pw/Xq9", "Pw/Xq9"),
            ("Pw?Xq9", "Pw?Xq9"),
            ("Pw#Xq9", "Pw#Xq9"),
            ("Pw%2FXq9", "Pw/Xq9"),
            ("Pw+Xq9=", "Pw+Xq9="),
            ("/?#:Pw", "/?#:Pw"),
            ("", ""),
        ] {
            let url = format!("postgres://relay:{written}@db/ledger?sslmode=require");
            let shown = "postgres://relay:***@db:5432/ledger?sslmode=require";
            assert_eq!(mask(&url), shown, "{url}");
            let u: PgUrl = url.parse().unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(u.to_string(), shown);
            assert_eq!(u.config.get_password(), Some(meant.as_bytes()), "{url}");
            assert_eq!(u.config.get_dbname(), Some("ledger"), "{url}");
            assert_eq!(u.tls, TlsMode::Require, "{url}: the query is the URL's own");
            let e = url
                .replace("require", "bogus")
                .parse::<PgUrl>()
                .unwrap_err();
            if !meant.is_empty() {
                assert!(!e.to_string().contains(meant), "{e}");
                assert!(!e.to_string().contains(written), "{e}");
            }
        }
    }

    /// The client library ends the user info at the first `@`: a raw `@` in a password would
    /// put the password's tail in the host's or the database's name. Such a URL is refused,
    /// and shown as nothing but its scheme.
    #[test]
    fn a_raw_at_sign_is_refused_without_showing_the_password() {
        for url in [
            "postgres://relay:Pw@Xq9@db/ledger",
            "postgres://relay:Pw/Xq9@ss/x@db/ledger",
            "postgres://relay:Xq9@@db/ledger",
            "postgres://db/ledger?password=Pw@Xq9",
            "postgres://db?password=Pw@Xq9",
        ] {
            let e = url.parse::<PgUrl>().unwrap_err().to_string();
            assert!(e.starts_with("database URL postgres://***: "), "{e}");
            assert!(e.contains("%40"), "says what to write: {e}");
            assert!(!e.contains("Xq9"), "{e}");
            assert_eq!(mask(url), "postgres://***");
        }
        let u: PgUrl = "postgres://relay:Pw%40Xq9@db/ledger".parse().unwrap();
        assert_eq!(u.config.get_password(), Some(&b"Pw@Xq9"[..]));
        assert_eq!(u.to_string(), "postgres://relay:***@db:5432/ledger");
    }

    #[test]
    fn a_url_that_does_not_parse_shows_only_its_scheme() {
        for url in [
            "postgres://relay:Xq9@db:notaport/ledger",
            "postgres://relay:Xq9@db/ledger?nosuchoption=1",
            "postgres://relay:Xq9@db/ledger?unterminated",
        ] {
            let e = url.parse::<PgUrl>().unwrap_err().to_string();
            assert!(e.starts_with("database URL postgres://***: "), "{e}");
            assert!(!e.contains("Xq9"), "{e}");
            assert_eq!(mask(url), "postgres://***");
        }
        assert_eq!(mask("relay:Xq9@db"), "***");
        assert_eq!(mask("mysql://relay:Xq9@db"), "mysql://***");
    }

    #[test]
    fn tls_modes_follow_libpq() {
        let tls = |u: &str| u.parse::<PgUrl>().map(|p| (p.tls, p.root_cert));
        assert_eq!(tls("postgres://u@h/d").unwrap().0, TlsMode::Prefer);
        assert_eq!(
            tls("postgres://u@h/d?sslmode=disable").unwrap().0,
            TlsMode::Disable
        );
        assert_eq!(
            tls("postgres://u@h/d?sslmode=require").unwrap().0,
            TlsMode::Require
        );
        assert_eq!(
            tls("postgres://u@h/d?sslmode=require&sslrootcert=/ca.pem").unwrap(),
            (TlsMode::VerifyCa, Some(PathBuf::from("/ca.pem")))
        );
        assert_eq!(
            tls("postgres://u@h/d?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem").unwrap(),
            (TlsMode::VerifyFull, Some(PathBuf::from("/etc/ca.pem")))
        );
        assert!(tls("postgres://u@h/d?sslmode=verify-full").is_err());
        assert!(tls("mysql://u@h/d").is_err());
    }

    #[test]
    fn other_parameters_reach_the_client_library() {
        let u: PgUrl =
            "postgres://u@127.0.0.1:5433/d?connect_timeout=3&options=-c%20search_path%3Dt1"
                .parse()
                .unwrap();
        assert_eq!(u.config.get_dbname(), Some("d"));
        assert_eq!(u.config.get_options(), Some("-c search_path=t1"));
    }
}
