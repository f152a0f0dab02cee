//! A provider's HTTP server (warp) that serves `POST /v1/infer` to AI agents that sign their
//! requests with ERC-8128 and carry a KYA pass (`KYA-Pass`), deciding every request offline:
//! [`kya_client::PassGate`] checks the signature and remembers its nonce here, and checks the
//! pass against the API's keys, fetched once. It follows the change feed, so a pass issued before
//! its agent lost compliance is refused at once. No call to the KYA API per request.
//!
//! - 200: a valid signature, and the signer's pass says it is a compliant agent;
//! - 401: no valid signature, or no pass (`{"error": <reason>, "message"}`);
//! - 403: a pass that does not admit the signer (`not_the_signer`, `not_compliant`, `expired`,
//!   `revoked`, …).
//!
//! ```sh
//! scripts/up.sh                                             # the local chain and the API on :3000
//! cargo run -p kya-client --example pass_provider           # listens on 127.0.0.1:8081
//! kya fetch -d '{"prompt":"hi"}' http://127.0.0.1:8081/v1/infer   # sends the signer's pass
//! ```
//!
//! Settings: `KYA_API_URL` (default `http://127.0.0.1:3000`, also the passes' issuer),
//! `CHAIN_ID` and `REGISTRY_ADDRESS` (the chain and registry whose standing it trusts; `.devchain/env`
//! has both), `PROVIDER_LISTEN` (default `127.0.0.1:8081`) and `PROVIDER_ORIGIN`, the origin agents
//! sign for (default `http://<PROVIDER_LISTEN>`).

use std::{net::SocketAddr, sync::Arc};

use kya_client::{
    ApiClient, ChangeFollower, PassGate, PassVerifier, ReceivedRequest,
    kya_core::{
        feed::{CHANGES_MAX_LIMIT, ChangesQuery, EventType},
        pass::PassTrust,
    },
};
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
    let api_url = env_or("KYA_API_URL", "http://127.0.0.1:3000");
    let listen: SocketAddr = env_or("PROVIDER_LISTEN", "127.0.0.1:8081").parse()?;
    let origin = env_or("PROVIDER_ORIGIN", &format!("http://{listen}"));
    let api = ApiClient::new(&api_url)?;
    let trust = PassTrust {
        issuer: api.base_url().to_owned(),
        chain_id: env_or("CHAIN_ID", "84532").parse()?,
        registry: std::env::var("REGISTRY_ADDRESS")?.trim().parse()?,
    };
    let gate = Arc::new(PassGate::new(PassVerifier::new(api.clone(), trust).await?, &origin)?);

    // Revocations: every loss of compliance the feed reports, from the oldest event it keeps
    // (older passes have expired anyway), then as they happen.
    let query = ChangesQuery {
        types: [EventType::ComplianceChanged].into(),
        limit: CHANGES_MAX_LIMIT,
        ..ChangesQuery::default()
    };
    let follower = ChangeFollower::streaming(api, query);
    let following = Arc::clone(&gate);
    tokio::spawn(async move {
        if let Err(error) = following.passes().follow(follower).await {
            eprintln!(
                "provider: the change feed stopped ({error}); passes are still checked, without revocations"
            );
        }
    });

    let infer = warp::path!("v1" / "infer")
        .and(warp::post())
        .and(warp::path::full())
        .and(warp::query::raw().or(warp::any().map(String::new)).unify())
        .and(warp::header::headers_cloned())
        .and(warp::body::content_length_limit(MAX_BODY_BYTES))
        .and(warp::body::bytes())
        .then(move |path: FullPath, query: String, headers: HeaderMap, body: Bytes| {
            let gate = Arc::clone(&gate);
            async move { infer(&gate, &path, &query, &headers, &body).await }
        });

    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("provider: POST {origin}/v1/infer, for agents with a KYA pass (issuer {api_url})");
    warp::serve(infer).incoming(listener).run().await;
    Ok(())
}

/// `POST /v1/infer`: admitted first, then served.
async fn infer(gate: &PassGate, path: &FullPath, query: &str, headers: &HeaderMap, body: &[u8]) -> Response {
    let path_and_query = match query {
        "" => path.as_str().to_owned(),
        query => format!("{}?{query}", path.as_str()),
    };
    let url = gate.url_for(&path_and_query);
    let received = ReceivedRequest::new("POST", &url).headers(headers).body(body);
    match gate.admit(&received).await {
        Ok(Ok(admitted)) => {
            // The provider's own work would go here; the pass says which agent asked.
            let prompt: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let claims = &admitted.pass.claims;
            answer(
                StatusCode::OK,
                json!({
                    "agentId": claims.kya.agent_id,
                    "signer": admitted.signer.to_checksum(None),
                    "passBlock": claims.block.number,
                    "echo": prompt,
                }),
            )
        }
        Ok(Err(turned)) => answer(
            StatusCode::from_u16(turned.status).unwrap_or(StatusCode::FORBIDDEN),
            json!({ "error": turned.reason, "message": turned.message }),
        ),
        Err(error) => {
            answer(StatusCode::BAD_GATEWAY, json!({ "error": format!("the issuer's keys: {error}") }))
        }
    }
}

fn answer(status: StatusCode, body: Value) -> Response {
    warp::reply::with_status(warp::reply::json(&body), status).into_response()
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty()).unwrap_or_else(|| default.to_owned())
}
