//! `kya-native-http`: what every native HTTP client of the workspace (the relayer, the local
//! chain's tools, the `kya` client) needs before and after a request, written once.
//!
//! - [`install_crypto_provider`]: HTTPS through rustls with ring's cryptography. reqwest is built
//!   with `rustls-no-provider` (the workspace's `Cargo.toml`: aws-lc-rs builds C with cmake), and
//!   then takes rustls' process default as it is: without one, building any client, for an
//!   `http://` URL too, panics. Certificates are checked against the system's roots
//!   (rustls-platform-verifier; on Linux `SSL_CERT_FILE` names another bundle).
//! - [`error_chain`] and [`root_cause`]: an HTTP client's error with its causes. reqwest's own
//!   text says only that sending failed, while the reason (a refused connection, a certificate
//!   the roots do not vouch for) is in its sources; and it quotes the URL, where hosted nodes and
//!   webhook receivers put keys. Both redact every URL in what they return
//!   ([`kya_core::chain::redact::urls_in`]), so no caller can forget to.

use std::{error::Error, sync::Once};

use kya_core::chain::redact;

/// Installs ring as rustls' process-wide provider, once; a provider installed before (by the
/// program or another library) is kept. Call it before building any HTTP client.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Err only when a provider is already installed: that one serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// `error` and each of its sources, outermost first.
pub fn causes<'a>(error: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&cause| cause.source())
}

/// `error`'s text followed by each of its sources' (`error sending request: client error
/// (Connect): invalid peer certificate: UnknownIssuer`), every URL in it redacted.
pub fn error_chain(error: &(dyn Error + 'static)) -> String {
    let text = causes(error).map(ToString::to_string).collect::<Vec<_>>().join(": ");
    redact::urls_in(&text)
}

/// The innermost of `error`'s sources as told (`Connection refused (os error 111)`), every URL
/// in it redacted; `None` when `error` has no source.
pub fn root_cause(error: &(dyn Error + 'static)) -> Option<String> {
    error.source().and_then(|source| causes(source).last()).map(|cause| redact::urls_in(&cause.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and an optional source, as HTTP clients nest them.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|layer| layer as _)
        }
    }

    fn nested() -> Layer {
        Layer(
            "error sending request for url (https://node.example/v2/PATHKEY?apikey=QUERYKEY)",
            Some(Box::new(Layer(
                "client error (Connect)",
                Some(Box::new(Layer("invalid peer certificate: UnknownIssuer", None))),
            ))),
        )
    }

    #[test]
    fn the_chain_names_every_cause_and_no_key() {
        assert_eq!(
            error_chain(&nested()),
            "error sending request for url (https://node.example/…): client error (Connect): \
             invalid peer certificate: UnknownIssuer"
        );
        assert_eq!(error_chain(&Layer("timed out", None)), "timed out");
    }

    #[test]
    fn the_root_cause_is_the_innermost_source() {
        assert_eq!(root_cause(&nested()).as_deref(), Some("invalid peer certificate: UnknownIssuer"));
        assert_eq!(root_cause(&Layer("alone", None)), None);
        let leaky = Layer("outer", Some(Box::new(Layer("refused by http://user:PW@hooks.example/x", None))));
        assert_eq!(root_cause(&leaky).as_deref(), Some("refused by http://hooks.example/…"));
    }

    #[test]
    fn installing_twice_keeps_the_first_provider() {
        install_crypto_provider();
        install_crypto_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
