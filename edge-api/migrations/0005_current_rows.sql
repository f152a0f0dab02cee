-- Fewer rows written per change (issue 29: at most 6 per changed agent, from 15). D1 bills a
-- row written for every row a statement writes and one more for every index it changes, so:
--
-- - An agent's current row is kept in place (`agents`, keyed by its id: the table is the key)
--   and updated there; a statement's `SET` names an indexed column only for the agents whose
--   value of it changed, so an attestation writes the row and one index entry, a revenue report
--   the row alone. The version a run supersedes is copied to `agent_versions` (no index: its key
--   is the table), where answers still reading an earlier block find it, and deleted some
--   minutes later. Before, each change inserted a new row with its key and four indexes (6),
--   ended the old one (2) and deleted it later (7).
-- - The count of Active agents whose attestation lapses reads `agents_by_attestation` and checks
--   the status, instead of an index of its own.
-- - `touches`, `tallies` and `status_buckets` are keyed tables (WITHOUT ROWID): no separate
--   index of their keys.
--
-- The index is derived from the chain: its tables are emptied and the next runs fill them again.
DROP TABLE IF EXISTS agents;
DROP TABLE IF EXISTS touches;
DROP TABLE IF EXISTS tallies;
DROP TABLE IF EXISTS status_buckets;
DELETE FROM state;

CREATE TABLE agents (
  id INTEGER PRIMARY KEY,
  -- The index block this version holds from: an answer at an earlier block reads the version
  -- before it, in `agent_versions`.
  since INTEGER NOT NULL,
  status INTEGER NOT NULL,
  parent INTEGER NOT NULL,
  registered_at INTEGER NOT NULL,
  last_attestation INTEGER NOT NULL,
  creator TEXT NOT NULL,
  child_count INTEGER NOT NULL,
  -- Its /agents item, rendered when indexed.
  item TEXT NOT NULL,
  -- kya_core::index::IndexedAgent as JSON: the record and its revenue sums.
  indexed TEXT NOT NULL
);
-- /agents?status=: a status's agents by id.
CREATE INDEX agents_by_status ON agents (status, id);
-- /agents/compliance, stalest first; and the count of attestations that lapse as time moves.
CREATE INDEX agents_by_attestation ON agents (last_attestation, id);
-- /stats/detailed's recent registrations.
CREATE INDEX agents_by_registration ON agents (registered_at, id);

-- Versions superseded at index block `until` (wall clock `superseded_at`), each held from
-- `since`: the rows of `agents` as they were, kept for answers still reading an earlier block.
CREATE TABLE agent_versions (
  id INTEGER NOT NULL,
  since INTEGER NOT NULL,
  until INTEGER NOT NULL,
  superseded_at INTEGER NOT NULL,
  status INTEGER NOT NULL,
  parent INTEGER NOT NULL,
  registered_at INTEGER NOT NULL,
  last_attestation INTEGER NOT NULL,
  creator TEXT NOT NULL,
  child_count INTEGER NOT NULL,
  item TEXT NOT NULL,
  indexed TEXT NOT NULL,
  PRIMARY KEY (id, since)
) WITHOUT ROWID;

CREATE TABLE touches (
  block INTEGER NOT NULL,
  agent_id INTEGER NOT NULL,
  PRIMARY KEY (block, agent_id)
) WITHOUT ROWID;

-- As in 0004_tallies.sql, and kind 3: an agent whose revenue history is unreadable (key: its id
-- in decimal), a list the state row held before.
CREATE TABLE tallies (
  kind INTEGER NOT NULL,
  key TEXT NOT NULL,
  -- NULL for a generation, and for a name longer than the index stores.
  name TEXT,
  -- Reports (revenue) or agents (generation).
  count INTEGER NOT NULL,
  -- The reports' sum, exact (512 bits), as 0x-prefixed hex.
  total TEXT NOT NULL,
  PRIMARY KEY (kind, key)
) WITHOUT ROWID;

-- As in 0003_status_buckets.sql, keyed by its key.
CREATE TABLE status_buckets (
  status INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  since INTEGER NOT NULL,
  until INTEGER,
  superseded_at INTEGER,
  agents INTEGER NOT NULL,
  PRIMARY KEY (status, bucket, since)
) WITHOUT ROWID;
CREATE INDEX status_buckets_superseded ON status_buckets (superseded_at) WHERE superseded_at IS NOT NULL;
