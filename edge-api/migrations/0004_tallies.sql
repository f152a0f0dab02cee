-- The totals kept by name in a table of their own (issue 29): revenue reports and their sum per
-- currency (kind 0) and per category (kind 1), keyed by the name's Keccak-256 in hex and holding
-- the name once, and agents per generation (kind 2, keyed by the generation in decimal). They
-- were keys of the state row, which grew with every distinct name a registrant chose; the state
-- row is now fixed-size. An agent's stored row no longer holds its operational scope or its
-- revenue names (no index-served answer shows them), so the rows written before are of the old
-- form: the index is derived from the chain, so it is emptied here and the next runs fill it
-- again.
DELETE FROM agents;
DELETE FROM touches;
DELETE FROM status_buckets;
DELETE FROM state;

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
);
