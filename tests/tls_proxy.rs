//! A TLS terminator on loopback in front of a plain HTTP server (anvil, the Worker, a relayer),
//! as a hosted provider's `https://` endpoint is: its certificate, for `localhost` and
//! `127.0.0.1`, is issued at start by a test CA made then too (rcgen), whose certificate is
//! written to a file for the process under test's `SSL_CERT_FILE`. Bytes pass through unchanged.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        ServerConfig,
        crypto::ring,
        pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer},
    },
};

/// A running terminator; it stops when this drops.
#[derive(Debug)]
pub struct TlsProxy {
    /// `https://localhost:<port>`.
    pub url: String,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    ca: tempfile::NamedTempFile,
    task: tokio::task::JoinHandle<()>,
}

impl TlsProxy {
    /// The test CA's certificate (PEM): the one root that vouches for this server.
    pub fn ca_file(&self) -> &Path {
        self.ca.path()
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a terminator on a free loopback port forwarding each connection to `upstream`
/// (`http://host:port`).
pub async fn start(upstream: &str) -> TlsProxy {
    let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let (config, ca_pem) = server_config();
    let mut ca = tempfile::NamedTempFile::new().expect("a temporary file");
    std::io::Write::write_all(&mut ca, ca_pem.as_bytes()).expect("the CA certificate is written");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let port = listener.local_addr().expect("bound").port();
    let task = tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to forward.
                let Ok(mut tls) = acceptor.accept(socket).await else { return };
                let Ok(mut plain) = tokio::net::TcpStream::connect(&upstream).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    TlsProxy { url: format!("https://localhost:{port}"), port, ca, task }
}

/// A server configuration with a certificate for `localhost` and `127.0.0.1` issued by a fresh
/// CA, and that CA's certificate as PEM. Each CA has a name of its own, so another terminator's
/// CA is an unknown issuer, as a private CA is to the system's roots.
fn server_config() -> (ServerConfig, String) {
    static CAS: AtomicU64 = AtomicU64::new(0);
    let n = CAS.fetch_add(1, Ordering::Relaxed);
    let mut ca_params = CertificateParams::new(Vec::new()).expect("CA parameters");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, format!("kya-tests loopback CA {n}"));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("a CA key"))
        .expect("the CA certificate");
    let key = KeyPair::generate().expect("a server key");
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("server parameters");
    params.distinguished_name.push(DnType::CommonName, "localhost");
    let cert = params.signed_by(&key, &ca).expect("the server certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS 1.2 and 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone(), ca.der().clone()], key)
        .expect("the certificate and its key");
    (config, ca.pem())
}
