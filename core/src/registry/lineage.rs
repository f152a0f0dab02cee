//! The lineage tree of `/agent/:id/lineage`, with SPEC.md's bounds (15 levels, 50 children per
//! node) and INTERFACE.md's truncation fields.
//!
//! The caller fetches level by level: [`shown_children`] says which children of a node will be in
//! the tree (so which to fetch next), and [`build`] assembles the fetched nodes.

use std::collections::BTreeMap;

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};

use crate::{AgentStatus, Error, Result};

/// Levels in a tree; the root is level 1.
pub const MAX_LINEAGE_DEPTH: u64 = 15;
/// Children shown per node.
pub const MAX_LINEAGE_CHILDREN: usize = 50;

/// What the tree needs to know about one fetched agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeData {
    pub wallet: Address,
    pub generation: u64,
    pub status: AgentStatus,
    /// All direct children, in the registry's order.
    pub children: Vec<u64>,
}

/// A node of the lineage tree. `truncated` and `totalChildren` appear only on nodes whose
/// children were cut (more than 50, or children below the depth limit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineageNode {
    pub agent_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub wallet: Address,
    pub generation: u64,
    pub status: AgentStatus,
    pub children: Vec<LineageNode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_children: Option<u64>,
}

/// The children of a node at `level` (root = 1) that appear in the tree.
pub fn shown_children(children: &[u64], level: u64) -> &[u64] {
    if level >= MAX_LINEAGE_DEPTH { &[] } else { &children[..children.len().min(MAX_LINEAGE_CHILDREN)] }
}

/// The tree under `root` from the fetched `nodes`, which must hold every shown node.
pub fn build(root: u64, nodes: &BTreeMap<u64, NodeData>) -> Result<LineageNode> {
    build_at(root, 1, nodes)
}

fn build_at(agent_id: u64, level: u64, nodes: &BTreeMap<u64, NodeData>) -> Result<LineageNode> {
    let node = nodes
        .get(&agent_id)
        .ok_or_else(|| Error::Decode(format!("lineage node {agent_id} was not fetched")))?;
    let shown = shown_children(&node.children, level);
    let children =
        shown.iter().map(|&child| build_at(child, level + 1, nodes)).collect::<Result<Vec<_>>>()?;
    let cut = shown.len() < node.children.len();
    Ok(LineageNode {
        agent_id,
        wallet: node.wallet,
        generation: node.generation,
        status: node.status,
        children,
        truncated: cut.then_some(true),
        total_children: cut.then(|| u64::try_from(node.children.len()).unwrap_or(u64::MAX)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Nodes 1..=n where node i's parent is `parents[i - 2]` (a smaller id), as the registry makes.
    fn tree(parents: &[u64]) -> BTreeMap<u64, NodeData> {
        let mut nodes = BTreeMap::new();
        nodes.insert(1, node(0));
        for (index, &parent) in parents.iter().enumerate() {
            let id = index as u64 + 2;
            let generation = nodes[&parent].generation + 1;
            nodes.get_mut(&parent).unwrap().children.push(id);
            nodes.insert(id, node(generation));
        }
        nodes
    }

    fn node(generation: u64) -> NodeData {
        NodeData { wallet: Address::ZERO, generation, status: AgentStatus::Active, children: Vec::new() }
    }

    fn depth(node: &LineageNode) -> u64 {
        1 + node.children.iter().map(depth).max().unwrap_or(0)
    }

    fn check(node: &LineageNode, nodes: &BTreeMap<u64, NodeData>, level: u64) -> u64 {
        let all = &nodes[&node.agent_id].children;
        assert!(node.children.len() <= MAX_LINEAGE_CHILDREN);
        let cut = node.children.len() < all.len();
        assert_eq!(node.truncated, cut.then_some(true));
        assert_eq!(node.total_children, cut.then_some(all.len() as u64));
        if level == MAX_LINEAGE_DEPTH {
            assert!(node.children.is_empty());
        }
        1 + node.children.iter().map(|child| check(child, nodes, level + 1)).sum::<u64>()
    }

    #[test]
    fn wide_node_is_cut_at_fifty() {
        let nodes = tree(&[1; 55]);
        let root = build(1, &nodes).unwrap();
        assert_eq!(root.children.len(), 50);
        assert_eq!((root.truncated, root.total_children), (Some(true), Some(55)));
        assert_eq!(root.children[49].agent_id, 51);
        let json = serde_json::to_value(&root.children[0]).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 5, "uncut nodes carry no truncation fields");
        let text = serde_json::to_string(&root).unwrap();
        assert!(text.starts_with(r#"{"agentId":1,"wallet":"0x0000000000000000000000000000000000000000","#));
        assert!(text.ends_with(r#""truncated":true,"totalChildren":55}"#));
        assert_eq!(serde_json::from_str::<LineageNode>(&text).unwrap(), root);
    }

    #[test]
    fn deep_chain_is_cut_at_fifteen_levels() {
        let parents: Vec<u64> = (1..20).collect();
        let root = build(1, &tree(&parents)).unwrap();
        assert_eq!(depth(&root), 15);
        let mut last = &root;
        while let Some(child) = last.children.first() {
            last = child;
        }
        assert_eq!(last.agent_id, 15);
        assert_eq!((last.truncated, last.total_children), (Some(true), Some(1)));
    }

    #[test]
    fn missing_node_is_an_error() {
        assert!(build(9, &tree(&[])).is_err());
    }

    proptest! {
        #[test]
        fn bounds_hold_for_any_tree(choices in proptest::collection::vec(0.0f64..1.0, 0..400)) {
            // Mostly chains and fans: each new node picks a parent among the last few or node 1.
            let parents: Vec<u64> = choices.iter().enumerate().map(|(index, pick)| {
                let newest = index as u64 + 1;
                if *pick < 0.3 { 1 } else { newest.saturating_sub((pick * 3.0) as u64).max(1) }
            }).collect();
            let nodes = tree(&parents);
            let root = build(1, &nodes).unwrap();
            prop_assert!(depth(&root) <= MAX_LINEAGE_DEPTH);
            let shown = check(&root, &nodes, 1);
            prop_assert!(shown <= nodes.len() as u64);
        }
    }
}
