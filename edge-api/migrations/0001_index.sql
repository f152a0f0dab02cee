-- The registry index (docs/edge-api.md, "The registry index"): one row per agent, and the
-- indexer's state (its block, the totals of every agent, a sweep's cursor, the last run).
CREATE TABLE agents (
  id INTEGER PRIMARY KEY,
  status INTEGER NOT NULL,
  parent INTEGER NOT NULL,
  registered_at INTEGER NOT NULL,
  last_attestation INTEGER NOT NULL,
  creator TEXT NOT NULL,
  child_count INTEGER NOT NULL DEFAULT 0,
  -- Its /agents item, rendered when indexed.
  item TEXT NOT NULL,
  -- kya_core::index::IndexedAgent as JSON: the record and its revenue sums.
  indexed TEXT NOT NULL
);
CREATE INDEX agents_by_status ON agents (status, id);
CREATE INDEX agents_by_attestation ON agents (last_attestation, id);
CREATE INDEX agents_by_status_attestation ON agents (status, last_attestation);
CREATE INDEX agents_by_registration ON agents (registered_at, id);

CREATE TABLE state (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
