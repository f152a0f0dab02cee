-- How many agents of each status each bucket of 256 ids holds (kya_core::index::BucketMoves),
-- versioned by index block like `agents`: a `?status=` page sums these counts to find the bucket
-- holding its first agent, then skips fewer than 256 agents, instead of skipping every agent
-- before it (`OFFSET`, whose reads grew with the page's depth: docs/edge-api.md, "Deep pages").
CREATE TABLE status_buckets (
  status INTEGER NOT NULL,
  bucket INTEGER NOT NULL,
  since INTEGER NOT NULL,
  until INTEGER,
  superseded_at INTEGER,
  agents INTEGER NOT NULL,
  PRIMARY KEY (status, bucket, since)
);
CREATE INDEX status_buckets_superseded ON status_buckets (superseded_at) WHERE superseded_at IS NOT NULL;

-- An index built before this table: its current rows counted, holding from block 0 (every answer
-- reads the current rows' block or a later one).
INSERT INTO status_buckets (status, bucket, since, until, superseded_at, agents)
SELECT status, id / 256, 0, NULL, NULL, count(*) FROM agents WHERE until IS NULL GROUP BY status, id / 256;
