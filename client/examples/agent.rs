//! An AI agent calling a provider with an ERC-8128 signed request: [`kya_client::RequestSigner`]
//! signs it with the agent's key (method, host, path, query and the body's digest, a 60-second
//! window, a fresh random nonce), and the provider (`examples/provider.rs`) has the KYA API
//! check it. Run the provider first (see its docs), then:
//!
//! ```sh
//! AGENT_PRIVATE_KEY=0x… cargo run -p kya-client --example agent
//! ```
//!
//! Settings: `AGENT_PRIVATE_KEY` (a registered agent's wallet key), `CHAIN_ID` (where it is
//! registered; default 84532, Base Sepolia and the local chain), `PROVIDER_URL` (default
//! `http://127.0.0.1:8080/v1/infer`).

use alloy::signers::local::PrivateKeySigner;
use kya_client::RequestSigner;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let key: PrivateKeySigner = std::env::var("AGENT_PRIVATE_KEY")
        .map_err(|_| "set AGENT_PRIVATE_KEY to the agent wallet's key")?
        .trim()
        .parse()
        .map_err(|_| "AGENT_PRIVATE_KEY is not a hex private key")?;
    let chain_id = match std::env::var("CHAIN_ID") {
        Ok(text) => text.trim().parse()?,
        Err(_) => 84532,
    };
    let url = std::env::var("PROVIDER_URL").unwrap_or_else(|_| "http://127.0.0.1:8080/v1/infer".to_owned());

    // Content-Type is covered too, so that no one on the way can change how the body is read.
    let signer = RequestSigner::new(&key, chain_id).covering(["content-type"]);
    kya_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let mut request = http
        .post(&url)
        .header("content-type", "application/json")
        .body(r#"{"prompt":"Summarise ERC-8128 in one line."}"#)
        .build()?;
    let signature = signer.sign_reqwest(&mut request)?;
    println!("signed as {} (nonce {}, valid until {})", signature.keyid, signature.nonce, signature.expires);

    let response = http.execute(request).await?;
    println!("{}", response.status());
    println!("{}", response.text().await?);
    Ok(())
}
