-- Point answers from the index (issue 63): `/kya/:wallet`, `/kya/batch`, `/kya/:wallet/pass` and
-- `/agent/:id` answer from D1 with no RPC while the index is fresh.
--
-- A wallet's agent: the record's wallet as lowercase hex, in a column of its own, written with
-- the row and set again only when it moves (a reorganisation gave the id to another wallet), so
-- its index entry costs a write at registration only. Rows already indexed take it from their
-- record.
ALTER TABLE agents ADD COLUMN wallet TEXT;
UPDATE agents SET wallet = lower(json_extract(indexed, '$.record.agentWallet'));
CREATE INDEX agents_by_wallet ON agents (wallet);
-- `/agent/:id`'s children, in the registry's order (ascending id); `parent` is set again only
-- when it moves, as `wallet`.
CREATE INDEX agents_by_parent ON agents (parent, id);

-- Each agent's operational scope, which the rows leave out (no registry-wide answer shows it):
-- written once, when the index first holds the agent's registration (the registry never changes
-- a scope). NULL for one longer than the index keeps: that agent's point answers read the chain.
-- An index filled before this table holds no scope for its agents: their point answers read the
-- chain until the sweep reads them again and writes it.
CREATE TABLE agent_scopes (
  id INTEGER PRIMARY KEY,
  scope TEXT
);
