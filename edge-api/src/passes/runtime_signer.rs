//! A pass's Ed25519 signature made by the runtime's Web Crypto (`crypto.subtle.sign`), native
//! code beside the isolate, instead of by `kya_core`'s Ed25519 compiled to wasm: the same bytes
//! (RFC 8032's signatures are deterministic: one key and one message make one signature), for
//! a fraction of the CPU (docs/bench/point-answers-*.md: the wasm's curve arithmetic and SHA-512
//! were about a third of a pass's Worker CPU). The claims and their encoding stay `kya_core`'s
//! (`pass::jws::Unsigned`); only the signature's arithmetic moves.
//!
//! The key is imported once per isolate, not extractable. A runtime without Ed25519 in Web Crypto
//! (or a key it refuses) leaves the signing to `kya_core`, said once in the log.

use std::cell::RefCell;

use kya_core::pass::SigningKey;
use wasm_bindgen::{JsCast, JsValue, prelude::wasm_bindgen};
use worker::{
    js_sys::{Array, ArrayBuffer, Object, Promise, Reflect, Uint8Array},
    wasm_bindgen_futures::JsFuture,
};

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], js_name = importKey, catch)]
    fn import_key(
        format: &str,
        key: &Object,
        algorithm: &Object,
        extractable: bool,
        usages: &Array,
    ) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], js_name = sign, catch)]
    fn subtle_sign(algorithm: &Object, key: &JsValue, data: &Uint8Array) -> Result<Promise, JsValue>;
}

/// This isolate's imported signing key: by the `kid` it signs for, `None` where the runtime
/// cannot sign with it.
struct Imported {
    kid: String,
    key: Option<JsValue>,
}

thread_local! {
    static IMPORTED: RefCell<Option<Imported>> = const { RefCell::new(None) };
    /// The algorithm object, built once per isolate: every sign passes the same one, two calls
    /// into JavaScript fewer per pass.
    static ALGORITHM: Object = algorithm();
}

/// Web Crypto's name of the algorithm, as an `{name}` object (standard since the Secure Curves
/// draft; workerd has it beside its older `NODE-ED25519`).
fn algorithm() -> Object {
    let algorithm = Object::new();
    let _ = Reflect::set(&algorithm, &"name".into(), &"Ed25519".into());
    algorithm
}

/// The private key as the JWK Web Crypto imports: the members RFC 8037 requires, no more (an
/// `alg` of `EdDSA` is refused by some runtimes' Ed25519).
fn private_jwk(key: &SigningKey) -> Object {
    let full = key.private_jwk();
    let jwk = Object::new();
    for member in ["kty", "crv", "x", "d"] {
        let value = full[member].as_str().unwrap_or_default();
        let _ = Reflect::set(&jwk, &member.into(), &value.into());
    }
    jwk
}

/// `key` imported into the runtime, once per isolate; `None` where it cannot be.
async fn imported(key: &SigningKey) -> Option<JsValue> {
    // Compared in place: only the key's handle is cloned, on every pass.
    let cached = IMPORTED.with(|imported| {
        imported
            .borrow()
            .as_ref()
            .filter(|imported| imported.kid == key.kid())
            .map(|imported| imported.key.clone())
    });
    if let Some(key_in_runtime) = cached {
        return key_in_runtime;
    }
    let usages = Array::of1(&"sign".into());
    let import = async {
        let promise =
            ALGORITHM.with(|algorithm| import_key("jwk", &private_jwk(key), algorithm, false, &usages))?;
        JsFuture::from(promise).await
    };
    let key_in_runtime = match import.await {
        Ok(imported) => Some(imported),
        Err(error) => {
            // Never the key: the runtime's message names the algorithm or the format.
            let message = error.dyn_ref::<worker::js_sys::Error>().map(|error| String::from(error.message()));
            worker::console_warn!(
                "Web Crypto cannot sign with Ed25519 here ({}): passes are signed in wasm",
                message.unwrap_or_else(|| "no reason given".into())
            );
            None
        }
    };
    IMPORTED.with(|imported| {
        *imported.borrow_mut() = Some(Imported { kid: key.kid().to_owned(), key: key_in_runtime.clone() });
    });
    key_in_runtime
}

/// `key`'s Ed25519 signature of `message`, by the runtime where it can, else by `kya_core`.
pub(crate) async fn sign(key: &SigningKey, message: &[u8]) -> [u8; 64] {
    if let Some(imported) = imported(key).await {
        let signed = async {
            let promise =
                ALGORITHM.with(|algorithm| subtle_sign(algorithm, &imported, &Uint8Array::from(message)))?;
            JsFuture::from(promise).await
        };
        match signed.await.map(|buffer| Uint8Array::new(&buffer.unchecked_into::<ArrayBuffer>()).to_vec()) {
            Ok(bytes) => match <[u8; 64]>::try_from(bytes) {
                Ok(signature) => return signature,
                Err(bytes) => worker::console_error!(
                    "Web Crypto's Ed25519 signature was {} bytes: signed in wasm instead",
                    bytes.len()
                ),
            },
            Err(_) => worker::console_error!("Web Crypto's Ed25519 sign failed: signed in wasm instead"),
        }
    }
    key.sign(message)
}
