-- The registry index, versioned (docs/edge-api.md, "The registry index"). The index is derived
-- from the chain, so this layout replaces the first one's tables, and the next run fills them
-- again.
--
-- An agent's row holds from the index block `since` until the block `until` that superseded it
-- (NULL: current). An answer reads the rows that held at the block its state names, so a body
-- read in several queries (the streamed /agents/compliance) is one block's, whatever runs commit
-- meanwhile. Superseded rows are deleted some minutes later (`superseded_at`, wall clock).
DROP TABLE IF EXISTS agents;
DROP TABLE IF EXISTS state;

CREATE TABLE agents (
  id INTEGER NOT NULL,
  since INTEGER NOT NULL,
  until INTEGER,
  superseded_at INTEGER,
  status INTEGER NOT NULL,
  parent INTEGER NOT NULL,
  registered_at INTEGER NOT NULL,
  last_attestation INTEGER NOT NULL,
  creator TEXT NOT NULL,
  child_count INTEGER NOT NULL,
  -- Its /agents item, rendered when indexed.
  item TEXT NOT NULL,
  -- kya_core::index::IndexedAgent as JSON: the record and its revenue sums.
  indexed TEXT NOT NULL,
  PRIMARY KEY (id, since)
);
-- /agents?status=: a status's agents by id.
CREATE INDEX agents_by_status ON agents (status, id);
-- /agents/compliance, stalest first; and the count of attestations that lapse as time moves.
CREATE INDEX agents_by_attestation ON agents (last_attestation, id);
CREATE INDEX agents_by_status_attestation ON agents (status, last_attestation);
-- /stats/detailed's recent registrations.
CREATE INDEX agents_by_registration ON agents (registered_at, id);
CREATE INDEX agents_superseded ON agents (superseded_at) WHERE superseded_at IS NOT NULL;

-- The agents each recent block's logs touched, kept for the re-scanned window: a reorganisation
-- that takes a write away leaves no log to say so, so the agents the old blocks touched are read
-- again.
CREATE TABLE touches (
  block INTEGER NOT NULL,
  agent_id INTEGER NOT NULL,
  PRIMARY KEY (block, agent_id)
);

CREATE TABLE state (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
