-- Point answers from the index (issue 63): `/kya/:wallet`, `/kya/batch`, `/kya/:wallet/pass` and
-- `/agent/:id` answer from D1 with no RPC while the index is fresh.
--
-- A wallet's agent, found by the wallet the row's record names (lowercase hex, as the record's
-- JSON holds it); an expression index, so no write statement names a column more.
CREATE INDEX agents_by_wallet ON agents (lower(json_extract(indexed, '$.record.agentWallet')));
-- `/agent/:id`'s children, in the registry's order (ascending id).
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
