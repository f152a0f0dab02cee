//! A provider's HTTP server (warp) that serves `POST /v1/infer` only to AI agents that sign their
//! requests with ERC-8128 and are compliant in the KYA registry: one call to
//! [`kya_client::Verifier`] per request, which has the KYA API check the signature, claim its
//! nonce (each signed request is served once) and read the signer's standing.
//!
//! - 200: the signature holds and its signer is a compliant agent;
//! - 401: the signature does not hold (`{"error": <reason>, "message"}`, the API's reason:
//!   `replayed`, `expired`, `digest_mismatch`, `wrong_authority`, …);
//! - 403: it holds, but its signer is not a compliant agent (`"renew attestation"`, or `"deny or
//!   register"` for a wallet with no agent);
//! - 502: the KYA API could not answer.
//!
//! ```sh
//! scripts/up.sh                                           # the local chain and the API on :3000
//! cargo run -p kya-client --example provider              # listens on 127.0.0.1:8080
//! AGENT_PRIVATE_KEY=0x… cargo run -p kya-client --example agent
//! ```
//!
//! Settings: `KYA_API_URL` (default `http://127.0.0.1:3000`), `PROVIDER_LISTEN` (default
//! `127.0.0.1:8080`), and `PROVIDER_ORIGIN`, the origin agents sign for (default
//! `http://<PROVIDER_LISTEN>`). Behind a proxy or a load balancer it is the public origin
//! (`https://api.provider.example`): a signature names the host it was made for, and one made for
//! another host is refused.

use std::{net::SocketAddr, sync::Arc};

use kya_client::{ReceivedRequest, Verdict, Verifier};
use serde_json::{Value, json};
use warp::{
    Filter,
    http::{HeaderMap, StatusCode},
    hyper::body::Bytes,
    path::FullPath,
    reply::{Reply, Response},
};

/// The largest body served: a prompt.
const MAX_BODY_BYTES: u64 = 64 * 1024;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let api = env_or("KYA_API_URL", "http://127.0.0.1:3000");
    let listen: SocketAddr = env_or("PROVIDER_LISTEN", "127.0.0.1:8080").parse()?;
    let origin = env_or("PROVIDER_ORIGIN", &format!("http://{listen}"));
    let verifier = Arc::new(Verifier::new(&api)?.serving(&origin)?);

    let infer = warp::path!("v1" / "infer")
        .and(warp::post())
        .and(warp::path::full())
        .and(warp::query::raw().or(warp::any().map(String::new)).unify())
        .and(warp::header::headers_cloned())
        .and(warp::body::content_length_limit(MAX_BODY_BYTES))
        .and(warp::body::bytes())
        .then(move |path: FullPath, query: String, headers: HeaderMap, body: Bytes| {
            let verifier = Arc::clone(&verifier);
            async move { infer(&verifier, &path, &query, &headers, &body).await }
        });

    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("provider: POST {origin}/v1/infer, for KYA-compliant agents (KYA API {api})");
    warp::serve(infer).incoming(listener).run().await;
    Ok(())
}

/// `POST /v1/infer`: checked first, then served.
async fn infer(
    verifier: &Verifier,
    path: &FullPath,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let path_and_query = match query {
        "" => path.as_str().to_owned(),
        query => format!("{}?{query}", path.as_str()),
    };
    let url = verifier.url_for(&path_and_query);
    let received = ReceivedRequest::new("POST", &url).headers(headers).body(body);
    let verdict = match verifier.verify(&received).await {
        Ok(verdict) => verdict,
        Err(error) => {
            return answer(StatusCode::BAD_GATEWAY, json!({ "error": format!("KYA check failed: {error}") }));
        }
    };
    match &verdict {
        Verdict::Refused(refusal) => {
            answer(StatusCode::UNAUTHORIZED, json!({ "error": refusal.reason, "message": refusal.message }))
        }
        Verdict::Verified(signed) if !verdict.is_allowed() => answer(
            StatusCode::FORBIDDEN,
            json!({ "error": signed.kya.decision(), "signer": signed.signature.signer.to_checksum(None) }),
        ),
        Verdict::Verified(signed) => {
            let agent_id = signed.kya.agent.as_ref().map(|agent| agent.agent_id);
            // The provider's own work would go here; it knows exactly which agent asked.
            let prompt: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            answer(
                StatusCode::OK,
                json!({ "agentId": agent_id, "signer": signed.signature.signer.to_checksum(None), "echo": prompt }),
            )
        }
    }
}

fn answer(status: StatusCode, body: Value) -> Response {
    warp::reply::with_status(warp::reply::json(&body), status).into_response()
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty()).unwrap_or_else(|| default.to_owned())
}
