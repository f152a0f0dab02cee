//! HTTPS for the HTTP clients: rustls with ring's cryptography, installed as the process's
//! provider before any client is built.
//!
//! reqwest is built with `rustls-no-provider` (the workspace's `Cargo.toml`: aws-lc-rs builds C
//! with cmake), and then takes rustls' process default as it is: without one, building any
//! client, for an `http://` URL too, panics. Certificates are checked against the system's roots
//! (rustls-platform-verifier; on Linux `SSL_CERT_FILE` names another bundle).

use std::sync::Once;

/// Installs ring as rustls' process-wide provider, once; a provider installed before (by the
/// program or another library) is kept.
pub(crate) fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Err only when a provider is already installed: that one serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
