//! The KYA read API (the edge Worker, SPEC.md section 4): typed answers of every endpoint a
//! client needs, read back into `kya-core`'s types.

use std::collections::BTreeMap;

use alloy::primitives::{Address, B256};
use kya_core::{AgentStatus, Compliance, KyaDecision};
use serde::{Deserialize, Serialize};

use crate::{Result, http::Service};

/// Largest page `/agents` serves (SPEC.md section 8): paging through everything uses it.
pub const MAX_PAGE_SIZE: u32 = 100;

/// A client of the read API at one base URL (`http://127.0.0.1:3000`).
#[derive(Debug, Clone)]
pub struct ApiClient {
    service: Service,
}

/// `/api/v1/kya/:wallet`: is this wallet an agent's, and may it be served?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KyaCheck {
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub wallet: Address,
    pub is_registered: bool,
    pub is_compliant: bool,
    pub agent: Option<KyaAgent>,
    pub checked_at: String,
}

impl KyaCheck {
    /// What a provider does with this answer.
    pub fn decision(&self) -> KyaDecision {
        KyaDecision::of(self.is_registered, self.is_compliant)
    }
}

/// The reduced record in a KYA answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KyaAgent {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub creator: Address,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub haftungsperson: Address,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub agent_wallet: Address,
    pub operational_scope: String,
    pub status: AgentStatus,
    pub registered_at: Option<String>,
    pub last_attestation: Option<String>,
}

/// The full agent record (`agent` of `/api/v1/agent/:id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRecord {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub creator: Address,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub haftungsperson: Address,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub agent_wallet: Address,
    pub constitution_hash: B256,
    pub capability_hash: B256,
    pub operational_scope: String,
    pub parent_agent_id: u64,
    pub generation: u64,
    pub self_modifying: bool,
    pub registered_at: Option<String>,
    pub last_attestation: Option<String>,
    pub last_revenue_report: Option<String>,
    pub status: AgentStatus,
}

/// `/api/v1/agent/:id`: the record, its children's ids and its compliance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentDetails {
    pub agent: AgentRecord,
    pub children: Vec<u64>,
    pub compliance: Compliance,
}

impl AgentDetails {
    /// Compliant: Active with a current attestation (SPEC.md section 2).
    pub fn is_compliant(&self) -> bool {
        self.compliance.is_active && self.compliance.attestation_current
    }
}

/// A node of `/api/v1/agent/:id/lineage`; `truncated` and `total_children` only where the API
/// cut the family (INTERFACE.md section 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineageNode {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub wallet: Address,
    pub generation: u64,
    pub status: AgentStatus,
    pub children: Vec<LineageNode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_children: Option<u64>,
}

/// An item of `/api/v1/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentListItem {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub creator: Address,
    pub status: AgentStatus,
    pub registered_at: Option<String>,
}

/// One page of `/api/v1/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentPage {
    pub total: u64,
    pub page: u64,
    pub limit: u64,
    pub total_pages: u64,
    pub data: Vec<AgentListItem>,
}

/// `/api/v1/stats/detailed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailedStats {
    pub total_agents: u64,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub registry_address: Address,
    pub chain: String,
    pub status_distribution: BTreeMap<String, u64>,
    pub generation_distribution: BTreeMap<String, u64>,
    pub compliance_rate: String,
    pub compliant_count: u64,
    /// Cents per currency; a JSON number (exact up to `u128`, see `docs/edge-api.md`).
    pub total_revenue: BTreeMap<String, serde_json::Number>,
    pub recent_registrations: Vec<RecentRegistration>,
}

/// An item of `recentRegistrations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecentRegistration {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub creator: Address,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub haftungsperson: Address,
    #[serde(serialize_with = "crate::checksum::checksummed")]
    pub agent_wallet: Address,
    pub registered_at: Option<String>,
    pub status: AgentStatus,
}

impl ApiClient {
    /// A client of the API at `base_url`.
    pub fn new(base_url: &str) -> Result<Self> {
        Self::with_http(base_url, reqwest::Client::new())
    }

    /// A client sharing an existing `reqwest` client (its pool, timeouts and proxy settings).
    pub fn with_http(base_url: &str, http: reqwest::Client) -> Result<Self> {
        Ok(Self { service: Service::new("API", base_url, http)? })
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        self.service.base()
    }

    /// `GET /api/v1/kya/:wallet`.
    pub async fn kya(&self, wallet: Address) -> Result<KyaCheck> {
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
    pub async fn agents_page(&self, page: u64, limit: u32, status: Option<AgentStatus>) -> Result<AgentPage> {
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

    /// `GET /api/v1/stats/detailed`.
    pub async fn stats(&self) -> Result<DetailedStats> {
        self.service.get("/api/v1/stats/detailed").await
    }
}
