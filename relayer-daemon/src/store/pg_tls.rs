//! TLS to PostgreSQL, as libpq reads `sslmode` and `sslrootcert` from the URL, through rustls
//! with ring (the HTTP clients' provider, `crate::tls`) and `tokio-postgres-rustls`.
//!
//! - none: TLS unless the server is on loopback: every address the connection goes to, each
//!   `hostaddr` when given (the host names then only name the server), else each host. A server
//!   elsewhere must take TLS (any certificate, as `require`), or the daemon refuses to start. Plain
//!   text is chosen by writing `sslmode=disable`. A loopback server is tried as `prefer`. libpq's
//!   default is `prefer`, which falls back to plain text without a word: a network then carries
//!   the relayer's books in clear.
//! - `disable`, `allow`: no TLS.
//! - `prefer`: TLS first, as libpq does: plain text only if the server refuses TLS.
//! - `require`: encrypted, the certificate not checked (libpq's meaning), unless `sslrootcert`
//!   is given: then as `verify-ca`, as libpq does.
//! - `verify-ca`: the certificate must chain to a trusted root; any host name.
//! - `verify-full`: that, and it must name the host of the URL.
//!
//! The roots are `sslrootcert`'s (a PEM file), or the system's (its bundle, or `SSL_CERT_FILE`)
//! when it is absent or `system`. The driver itself knows only `disable`, `prefer` and
//! `require`, so both settings are taken out of the URL here before it reads the rest.

use std::sync::Arc;

use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::{
        WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    crypto::CryptoProvider,
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};

use crate::error::{Error, Result};

/// What the URL asks of TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TlsMode {
    /// No TLS (`disable`, `allow`).
    Off,
    /// No `sslmode`: [`TlsMode::Prefer`] for a loopback server, else [`TlsMode::Encrypt`]
    /// ([`TlsMode::for_server`]).
    Unset,
    /// TLS if the server takes it, any certificate; else plain text (`prefer`).
    Prefer,
    /// Encrypted, any certificate (`require` without `sslrootcert`).
    Encrypt,
    /// The certificate chains to a trusted root (`verify-ca`, or `require` with `sslrootcert`).
    VerifyCa,
    /// That, and it names the host (`verify-full`).
    VerifyFull,
}

impl TlsMode {
    /// The mode for the server `config` connects to: [`TlsMode::Unset`] is `prefer` when every
    /// address the driver will connect to is on loopback (or a Unix socket), else `require`.
    pub(super) fn for_server(self, config: &postgres::Config) -> Self {
        match self {
            Self::Unset if connects_only_to_loopback(config) => Self::Prefer,
            Self::Unset => Self::Encrypt,
            mode => mode,
        }
    }
}

/// Whether every address `config` connects to is on loopback. The addresses are read as the
/// driver picks them: the i-th `hostaddr` when there is one, else the i-th host. A `hostaddr`
/// is where the bytes go, whatever the host's name says (the name then only names the server to
/// TLS), so `localhost` with `hostaddr=10.0.0.5` is a server elsewhere: reading the names alone
/// let such a URL speak plain text across a network.
fn connects_only_to_loopback(config: &postgres::Config) -> bool {
    use std::net::IpAddr;

    use postgres::config::Host;
    let (hosts, addresses) = (config.get_hosts(), config.get_hostaddrs());
    let named_loopback = |host: &Host| match host {
        Host::Unix(_) => true,
        Host::Tcp(name) => {
            name.eq_ignore_ascii_case("localhost")
                || name.trim_matches(['[', ']']).parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
    };
    let targets = hosts.len().max(addresses.len());
    targets > 0
        && (0..targets).all(|i| match (addresses.get(i), hosts.get(i)) {
            (Some(address), _) => address.is_loopback(),
            (None, Some(host)) => named_loopback(host),
            (None, None) => false,
        })
}

/// `sslmode` and `sslrootcert`, taken out of a URL's query.
#[derive(Debug)]
pub(super) struct TlsSettings {
    pub(super) mode: TlsMode,
    /// `sslrootcert`, decoded; `None` or `system`: the system's roots.
    pub(super) root_cert: Option<String>,
}

/// Splits `sslmode` and `sslrootcert` off `url`: the URL without them (for the driver), and
/// them. Errors name the setting, never the URL's other parts.
pub(super) fn split(url: &str) -> Result<(String, TlsSettings)> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
    let (mut mode, mut root_cert) = (None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => mode = Some(decode(value)),
            "sslrootcert" => root_cert = Some(decode(value)),
            "sslcert" | "sslkey" | "sslpassword" | "sslcrl" | "sslcrldir" => {
                return Err(Error::Config(format!(
                    "DATABASE_URL: {key} is not supported (no client certificates): authenticate with a password"
                )));
            }
            _ => kept.push(pair),
        }
    }
    let mode = match mode.as_deref() {
        None => TlsMode::Unset,
        Some("disable" | "allow") => TlsMode::Off,
        Some("prefer") => TlsMode::Prefer,
        Some("require") if root_cert.is_some() => TlsMode::VerifyCa,
        Some("require") => TlsMode::Encrypt,
        Some("verify-ca") => TlsMode::VerifyCa,
        Some("verify-full") => TlsMode::VerifyFull,
        Some(other) => {
            return Err(Error::Config(format!(
                "DATABASE_URL: sslmode={other} is not one of disable, allow, prefer, require, verify-ca, verify-full"
            )));
        }
    };
    let url = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    Ok((url, TlsSettings { mode, root_cert }))
}

/// A query value with its `+` (a space in a query) and `%XX` escapes decoded.
fn decode(value: &str) -> String {
    super::pg_url::decode(&value.replace('+', " "))
}

/// The rustls configuration for `settings` (`None`: no TLS). Reads the roots now, so a missing or
/// empty `sslrootcert` fails the start with its name.
pub(super) fn client_config(settings: &TlsSettings) -> Result<Option<ClientConfig>> {
    if matches!(settings.mode, TlsMode::Off | TlsMode::Unset) {
        return Ok(None);
    }
    kya_native_http::install_crypto_provider();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::Config(format!("DATABASE_URL TLS: {error}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match settings.mode {
        TlsMode::Off | TlsMode::Unset => unreachable!("returned above"),
        TlsMode::Prefer | TlsMode::Encrypt => Arc::new(AnyCertificate(provider)),
        TlsMode::VerifyCa | TlsMode::VerifyFull => {
            let full = WebPkiServerVerifier::builder_with_provider(Arc::new(roots(settings)?), provider)
                .build()
                .map_err(|error| Error::Config(format!("DATABASE_URL TLS: {error}")))?;
            if settings.mode == TlsMode::VerifyFull { full } else { Arc::new(AnyName(full)) }
        }
    };
    Ok(Some(builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth()))
}

/// The trusted roots: `sslrootcert`'s certificates, or the system's.
fn roots(settings: &TlsSettings) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match settings.root_cert.as_deref() {
        None | Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
        Some(path) => {
            let certificates = CertificateDer::pem_file_iter(path)
                .and_then(|certificates| certificates.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|error| Error::Config(format!("DATABASE_URL sslrootcert {path}: {error}")))?;
            let (added, _) = roots.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(Error::Config(format!("DATABASE_URL sslrootcert {path}: no certificate in it")));
            }
        }
    }
    if roots.is_empty() {
        return Err(Error::Config(
            "DATABASE_URL: no trusted root certificate found on this system: give sslrootcert".into(),
        ));
    }
    Ok(roots)
}

/// `verify-ca`: the chain is checked as `verify-full` checks it, the name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error::InvalidCertificate};
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require` without a root: any certificate (libpq's meaning: encryption against passive
/// eavesdropping only), the handshake's signatures still checked.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_read_as_libpq_reads_them_and_taken_out() {
        let split = |url: &str| split(url).map(|(url, settings)| (url, settings.mode, settings.root_cert));
        assert_eq!(split("postgres://h/db").unwrap(), ("postgres://h/db".into(), TlsMode::Unset, None));
        assert_eq!(
            split("postgres://h/db?sslmode=prefer&connect_timeout=3").unwrap(),
            ("postgres://h/db?connect_timeout=3".into(), TlsMode::Prefer, None)
        );
        assert_eq!(split("postgres://h/db?sslmode=disable").unwrap().1, TlsMode::Off);
        assert_eq!(split("postgres://h/db?sslmode=require").unwrap().1, TlsMode::Encrypt);
        assert_eq!(
            split("postgres://h/db?sslmode=require&sslrootcert=certs%2Fca%20file.pem").unwrap(),
            ("postgres://h/db".into(), TlsMode::VerifyCa, Some("certs/ca file.pem".into()))
        );
        assert_eq!(split("postgres://h/db?sslmode=verify-ca").unwrap().1, TlsMode::VerifyCa);
        assert_eq!(
            split("postgres://h/db?application_name=x&sslmode=verify-full&sslrootcert=system").unwrap(),
            ("postgres://h/db?application_name=x".into(), TlsMode::VerifyFull, Some("system".into()))
        );
        assert!(split("postgres://h/db?sslmode=verify").unwrap_err().to_string().contains("sslmode=verify "));
        assert!(
            split("postgres://h/db?sslkey=/k").unwrap_err().to_string().contains("sslkey is not supported")
        );
    }

    #[test]
    fn a_root_file_that_is_missing_or_holds_no_certificate_is_named() {
        let settings = |path: &str| TlsSettings { mode: TlsMode::VerifyFull, root_cert: Some(path.into()) };
        let missing = client_config(&settings("no-such-ca.pem")).unwrap_err().to_string();
        assert!(missing.contains("sslrootcert no-such-ca.pem"), "{missing}");
        let empty = tempfile::NamedTempFile::new().unwrap();
        let path = empty.path().to_str().unwrap();
        let error = client_config(&settings(path)).unwrap_err().to_string();
        assert!(error.contains("no certificate in it"), "{error}");
        assert!(client_config(&TlsSettings { mode: TlsMode::Encrypt, root_cert: None }).unwrap().is_some());
        assert!(client_config(&TlsSettings { mode: TlsMode::Off, root_cert: None }).unwrap().is_none());
    }
}
