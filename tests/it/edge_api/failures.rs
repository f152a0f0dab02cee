//! SPEC.md section 7, row 500, and `/health` degraded: an unreachable RPC endpoint, a registry
//! address without the registry's code behind it, and a missing `REGISTRY_ADDRESS`.

use std::{net::TcpListener, sync::Arc};

use kya_tests::{
    TestChain,
    edge_fixture::{EdgeWorker, chain_vars},
    rpc_proxy::{self, RpcAction},
};
use serde_json::{Value, json};

const API_PATHS: [&str; 9] = [
    "/api/v1/stats",
    "/api/v1/stats/detailed",
    "/api/v1/agent/1",
    "/api/v1/agents",
    "/api/v1/agents/compliance",
    "/api/v1/agent/1/lineage",
    "/api/v1/agent/1/revenue",
    "/api/v1/revenue/aggregate",
    "/api/v1/kya/0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
];

fn error_text(body: &Value) -> &str {
    body["error"].as_str().unwrap_or_else(|| panic!("an error message in {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_failures_and_missing_configuration_are_clean_errors() {
    let chain = TestChain::start().await;

    // A port nobody listens on: the RPC endpoint is unreachable. Its URL carries API keys, as a
    // hosted node's does: no answer may show them.
    let dead_port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dead = format!("http://127.0.0.1:{dead_port}/v2/SECRETPATHKEY?apikey=SECRETQUERYKEY");
    {
        let worker = EdgeWorker::start(&chain_vars(&dead, chain.registry())).await;
        let api = worker.client();
        let health = api.get("/health").await;
        assert_eq!(health.status, 503);
        assert_eq!(health.body["status"], "degraded");
        assert_eq!(health.body["rpc"], format!("http://127.0.0.1:{dead_port}/…"));
        assert!(!health.text.contains("SECRET"), "{}", health.text);
        assert_eq!(health.body["registry"], chain.registry().to_checksum(None));
        for path in API_PATHS {
            for _ in 0..2 {
                let answer = api.get(path).await;
                assert_eq!(answer.status, 500, "{path}: {}", answer.body);
                assert!(
                    error_text(&answer.body).starts_with("RPC endpoint unreachable"),
                    "{path}: {}",
                    answer.body
                );
                assert_eq!(answer.header("cache-control"), Some("no-store"), "{path}");
                assert_eq!(answer.remaining(), 59, "{path}");
                assert!(!answer.text.contains("SECRET"), "{path}: {}", answer.text);
            }
        }
    }

    // A working node behind a keyed URL: `/health`'s `rpc` and `/stats`' `chain` name it
    // without the keys.
    {
        let node = rpc_proxy::start(
            Some(chain.rpc_url()),
            Arc::new(|request: &str| RpcAction::Forward(request.to_owned())),
        )
        .await;
        let keyed = format!("{node}/v3/SECRETPATHKEY?apikey=SECRETQUERYKEY");
        let worker = EdgeWorker::start(&chain_vars(&keyed, chain.registry())).await;
        let api = worker.client();
        let shown = format!("{node}/…");
        let health = api.get("/health").await;
        assert_eq!((health.status, &health.body["rpc"]), (200, &json!(shown)));
        let stats = api.get("/api/v1/stats").await;
        assert_eq!(
            (stats.status, &stats.body),
            (
                200,
                &json!({"totalAgents": 0, "registryAddress": chain.registry().to_checksum(None), "chain": shown})
            )
        );
        for path in [
            "/api/v1/stats/detailed",
            "/api/v1/agent/1",
            "/api/v1/kya/0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        ] {
            let answer = api.get(path).await;
            assert!(!answer.text.contains("SECRET"), "{path}: {}", answer.text);
        }
    }

    // The forwarder's address: a contract, but not the registry, so every call reverts.
    {
        let worker = EdgeWorker::start(&chain_vars(&chain.rpc_url(), chain.forwarder())).await;
        let api = worker.client();
        let health = api.get("/health").await;
        assert_eq!((health.status, &health.body["status"]), (200, &json!("ok")));
        assert_eq!(health.body["registry"], chain.forwarder().to_checksum(None));
        for path in API_PATHS {
            let answer = api.get(path).await;
            assert_eq!(answer.status, 500, "{path}: {}", answer.body);
            assert!(
                error_text(&answer.body).starts_with("contract call reverted"),
                "{path}: {}",
                answer.body
            );
        }
    }

    // A node that answers, but with a JSON-RPC error, or with something that is not JSON-RPC.
    let failing = rpc_proxy::start(
        None,
        Arc::new(|_: &str| {
            RpcAction::Raw(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"down"}}"#.into())
        }),
    )
    .await;
    let garbage = rpc_proxy::start(None, Arc::new(|_: &str| RpcAction::Garbage)).await;
    for (rpc, message) in [
        (failing, "RPC error: down (code -32000)"),
        (
            garbage,
            "RPC error: not a JSON-RPC answer (expected value at line 1 column 1): <html>not JSON-RPC</html>",
        ),
    ] {
        let worker = EdgeWorker::start(&chain_vars(&rpc, chain.registry())).await;
        let api = worker.client();
        let health = api.get("/health").await;
        assert_eq!((health.status, &health.body["status"]), (503, &json!("degraded")));
        assert_eq!(health.body["error"], message);
        for path in API_PATHS {
            let answer = api.get(path).await;
            assert_eq!((answer.status, &answer.body), (500, &json!({ "error": message })), "{path}");
            assert_eq!(answer.header("cache-control"), Some("no-store"), "{path}");
        }
    }

    // No REGISTRY_ADDRESS (wrangler.toml leaves it empty): /health still answers.
    {
        let worker = EdgeWorker::start(&[("RPC_URL", chain.rpc_url())]).await;
        let api = worker.client();
        let health = api.get("/health").await;
        assert_eq!(
            (health.status, &health.body["status"], &health.body["registry"]),
            (200, &json!("ok"), &Value::Null)
        );
        for path in API_PATHS {
            let answer = api.get(path).await;
            assert_eq!(
                (answer.status, &answer.body),
                (500, &json!({"error": "REGISTRY_ADDRESS is not configured"})),
                "{path}"
            );
        }
    }
}
