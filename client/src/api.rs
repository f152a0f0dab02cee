//! The KYA read API (the edge Worker, SPEC.md section 4): every endpoint a client needs, its
//! answer read back into the very `kya-core` type the Worker serialises it from.

use alloy::primitives::Address;
use kya_core::{
    AgentStatus, KyaBatch, KyaResult,
    api::{
        pagination::Page,
        view::{AgentDetails, AgentListItem},
    },
    feed::{ChangesAnswer, ChangesQuery, Cursor},
    pass::Jwks,
    registry::lineage::LineageNode,
    snapshot::stats::DetailedStats,
};

use crate::{
    Result,
    erc8128::{ReceivedRequest, Verdict},
    http::Service,
    stream::ChangeStream,
};

/// Largest page `/agents` serves (SPEC.md section 8): paging through everything uses it.
pub const MAX_PAGE_SIZE: u32 = 100;

/// A client of the read API at one base URL (`http://127.0.0.1:3000`).
#[derive(Debug, Clone)]
pub struct ApiClient {
    service: Service,
}

impl ApiClient {
    /// A client of the API at `base_url`.
    pub fn new(base_url: &str) -> Result<Self> {
        crate::install_crypto_provider();
        Self::with_http(base_url, crate::http::default_http())
    }

    /// A client sharing an existing `reqwest` client (its pool, timeouts and proxy settings).
    /// Building a `reqwest` client needs rustls' process provider: [`crate::install_crypto_provider`].
    pub fn with_http(base_url: &str, http: reqwest::Client) -> Result<Self> {
        Ok(Self { service: Service::new("API", base_url, http)? })
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        self.service.base()
    }

    /// `GET /api/v1/kya/:wallet`.
    pub async fn kya(&self, wallet: Address) -> Result<KyaResult> {
        self.service.get(&format!("/api/v1/kya/{wallet}")).await
    }

    /// `GET /api/v1/agent/:id`.
    pub async fn agent(&self, agent_id: u64) -> Result<AgentDetails> {
        self.service.get(&format!("/api/v1/agent/{agent_id}")).await
    }

    /// `GET /api/v1/agent/:id/lineage`.
    pub async fn lineage(&self, agent_id: u64) -> Result<LineageNode> {
        self.service.get(&format!("/api/v1/agent/{agent_id}/lineage")).await
    }

    /// One page of `GET /api/v1/agents` (pages count from 1).
    pub async fn agents_page(
        &self,
        page: u64,
        limit: u32,
        status: Option<AgentStatus>,
    ) -> Result<Page<AgentListItem>> {
        let filter = status.map(|status| format!("&status={status}")).unwrap_or_default();
        self.service.get(&format!("/api/v1/agents?page={page}&limit={limit}{filter}")).await
    }

    /// Every agent (with `status`, if given), following the pages in the largest size the API
    /// serves. Pages are read one after another: agents registered meanwhile may shift them, so
    /// duplicates are dropped by id.
    pub async fn all_agents(&self, status: Option<AgentStatus>) -> Result<Vec<AgentListItem>> {
        let mut agents: Vec<AgentListItem> = Vec::new();
        let mut page = 1;
        loop {
            let answer = self.agents_page(page, MAX_PAGE_SIZE, status).await?;
            let last = answer.data.is_empty() || page >= answer.total_pages;
            for item in answer.data {
                if agents.last().is_none_or(|previous| previous.agent_id < item.agent_id) {
                    agents.push(item);
                }
            }
            if last {
                return Ok(agents);
            }
            page += 1;
        }
    }

    /// `POST /api/v1/kya/verify`: is `request`'s ERC-8128 signature good, and who signed it
    /// (with their KYA standing)? `authority` is the host the provider serves (`host[:port]`),
    /// which the signature must name: required, never read from the request's own `Host`;
    /// [`crate::Verifier`] holds it for a provider. Each nonce passes once.
    pub async fn verify(&self, request: &ReceivedRequest<'_>, authority: &str) -> Result<Verdict> {
        let answer = self.service.post("/api/v1/kya/verify", &request.to_json(authority)).await?;
        Verdict::from_answer(answer.body)
    }

    /// `GET /api/v1/kya/:wallet/pass`: the wallet's KYA pass, a compact JWS an agent sends as
    /// `KYA-Pass` ([`crate::PassVerifier`] checks one offline).
    pub async fn pass(&self, wallet: Address) -> Result<String> {
        let (_, text) = self.service.get_text(&format!("/api/v1/kya/{wallet}/pass")).await?;
        Ok(text.trim().to_owned())
    }

    /// `GET /.well-known/jwks.json`: the keys that verify the API's passes, and its
    /// `Cache-Control` (the values joined), which says how long they may be kept
    /// ([`kya_core::pass::KeyCachePolicy::lifetime_ms`] reads it).
    pub async fn jwks(&self) -> Result<(Jwks, Option<String>)> {
        let (headers, text) = self.service.get_text(kya_core::pass::JWKS_PATH).await?;
        let jwks = Jwks::from_json(&text)
            .map_err(|reason| crate::Error::Unexpected { service: self.service.name, reason })?;
        let values: Vec<&str> = headers
            .get_all(reqwest::header::CACHE_CONTROL)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        Ok((jwks, (!values.is_empty()).then(|| values.join(", "))))
    }

    /// `POST /api/v1/kya/batch`: the KYA results of up to 100 wallets, in order, at one block
    /// (counted as one request per 10 wallets against the rate limit).
    pub async fn kya_batch(&self, wallets: &[Address]) -> Result<KyaBatch> {
        let body = serde_json::json!({ "wallets": wallets });
        Ok(self.service.post("/api/v1/kya/batch", &body).await?.body)
    }

    /// One page of `GET /api/v1/changes`, the change feed ([`crate::ChangeFollower`] follows it).
    pub async fn changes(&self, query: &ChangesQuery) -> Result<ChangesAnswer> {
        self.service.get(&format!("/api/v1/changes?{}", query.to_query_string())).await
    }

    /// `GET /api/v1/changes/stream`: the events `query`'s filters select as they come, after
    /// `last` (sent as `Last-Event-ID`; none: from the next event the index adds).
    /// [`crate::ChangeFollower`] reconnects it when it ends.
    pub async fn change_stream(&self, query: &ChangesQuery, last: Option<Cursor>) -> Result<ChangeStream> {
        let filters = ChangesQuery { after: None, ..query.clone() };
        let headers: Vec<(&str, String)> =
            last.map(|last| ("last-event-id", last.to_string())).into_iter().collect();
        let response = self
            .service
            .open(&format!("/api/v1/changes/stream?{}", filters.to_query_string()), &headers)
            .await?;
        Ok(ChangeStream::new(response, self.service.name))
    }

    /// `GET /api/v1/stats/detailed`.
    pub async fn stats(&self) -> Result<DetailedStats> {
        self.service.get("/api/v1/stats/detailed").await
    }
}
