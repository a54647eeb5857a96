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

/// Why a URL was refused; its text never holds the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPgUrl(pub String);

impl fmt::Display for BadPgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadPgUrl {}

impl FromStr for PgUrl {
    type Err = BadPgUrl;

    fn from_str(url: &str) -> Result<PgUrl, BadPgUrl> {
        let masked = mask(url);
        let bad = |why: String| BadPgUrl(format!("database URL {masked}: {why}"));
        if !is_pg_url(url) {
            return Err(bad("must start with postgres:// or postgresql://".into()));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let mut tls = TlsMode::Prefer;
        let mut root_cert = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "sslmode" => {
                    tls = match v {
                        "disable" => TlsMode::Disable,
                        "allow" | "prefer" => TlsMode::Prefer,
                        "require" => TlsMode::Require,
                        "verify-ca" => TlsMode::VerifyCa,
                        "verify-full" => TlsMode::VerifyFull,
                        other => return Err(bad(format!("unknown sslmode {other:?}"))),
                    }
                }
                "sslrootcert" => root_cert = Some(PathBuf::from(percent_decode(v))),
                _ => kept.push(pair),
            }
        }
        if matches!(tls, TlsMode::VerifyCa | TlsMode::VerifyFull) && root_cert.is_none() {
            return Err(bad(
                "sslmode verify-ca and verify-full need sslrootcert=FILE (the CA)".into(),
            ));
        }
        if tls == TlsMode::Require && root_cert.is_some() {
            tls = TlsMode::VerifyCa; // libpq: require with a root certificate verifies it
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let mut config: postgres::Config = rest
            .parse()
            .map_err(|e: postgres::Error| bad(format!("{e}")))?;
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

/// `url` with the password (in the user info, or a `password=` parameter) replaced by `***`.
pub fn mask(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority_end, tail) = match rest.find(['/', '?']) {
        Some(i) => (i, &rest[i..]),
        None => (rest.len(), ""),
    };
    let authority = &rest[..authority_end];
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some(("password", _)) => "password=***".to_string(),
                    _ => p.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
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
            mask("postgresql://relay@db/ledger?password=s3cret&x=1"),
            "postgresql://relay@db/ledger?password=***&x=1"
        );
        assert_eq!(mask("postgres://db"), "postgres://db");
        let u: PgUrl = "postgres://relay:s3cret@db/ledger".parse().unwrap();
        assert!(!format!("{u} {u:?}").contains("s3cret"));
        let e = "postgres://relay:s3cret@db/ledger?sslmode=bogus"
            .parse::<PgUrl>()
            .unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
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
