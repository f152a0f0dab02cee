//! JSON-RPC over `fetch`: one HTTP POST per batch body that `kya_core::rpc` plans.

use futures::future::try_join_all;
use kya_core::{
    BlockRef, redact,
    rpc::{CallPlan, Outcome, decode_pinned_block, pin_block_request},
};
use wasm_bindgen::JsValue;
use worker::{Fetch, Headers, Method, Request, RequestInit};

use crate::{Error, Result};

/// A JSON-RPC endpoint and how many calls go in one batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rpc<'a> {
    pub(crate) url: &'a str,
    pub(crate) batch_size: usize,
}

impl Rpc<'_> {
    /// Number and timestamp of the latest block: every later call of the response reads it.
    pub(crate) async fn pin(&self) -> Result<BlockRef> {
        let answer = self.post(pin_block_request()).await?;
        Ok(decode_pinned_block(&answer)?)
    }

    /// Runs every call of `plan`, its batches concurrently, and returns the outcomes in order.
    pub(crate) async fn run(&self, plan: &CallPlan) -> Result<Vec<Outcome>> {
        if plan.is_empty() {
            return Ok(Vec::new());
        }
        let answers =
            try_join_all(plan.bodies(self.batch_size).into_iter().map(|body| self.post(body))).await?;
        Ok(plan.decode(&answers)?)
    }

    async fn post(&self, body: String) -> Result<String> {
        let headers = Headers::new();
        headers.set("content-type", "application/json")?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_headers(headers).with_body(Some(JsValue::from_str(&body)));
        // Messages name the endpoint without the API key a hosted node's URL may carry.
        let (shown, redact) =
            (redact::url(self.url), |error: worker::Error| redact::urls_in(&error.to_string()));
        let request = Request::new_with_init(self.url, &init).map_err(|error| {
            Error::BadConfig(format!("RPC_URL is not usable ({shown}): {}", redact(error)))
        })?;
        let mut response = Fetch::Request(request)
            .send()
            .await
            .map_err(|error| Error::RpcUnreachable(format!("{shown}: {}", redact(error))))?;
        let status = response.status_code();
        let text = response.text().await.map_err(|error| Error::RpcUnreachable(redact(error)))?;
        if !(200..300).contains(&status) {
            let excerpt: String = text.chars().take(120).collect();
            return Err(Error::RpcUnreachable(format!("{shown} answered HTTP {status}: {excerpt}")));
        }
        Ok(text)
    }
}
