-- The change feed (docs/change-feed.md): the registry index's changes as events, appended by its
-- runs in numbered batches, a row each (a run writes one or a few, whatever it changed).
-- `GET /api/v1/changes` seeks its first batch by the key, so a page costs the same however far
-- back its cursor is; retention deletes old batches but never the newest.
CREATE TABLE feed_batches (
  batch INTEGER PRIMARY KEY,   -- from 1; only grows
  created_at INTEGER NOT NULL, -- Unix seconds, for retention
  events TEXT NOT NULL         -- a JSON array of kya_core::feed::Event, in feed order
);
