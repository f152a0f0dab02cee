-- Webhooks (docs/change-feed.md, "Webhooks"): the events a receiver's sender gave up on, as the
-- dead-letter queue's consumer records them, so an operator can read them
-- (`wrangler d1 execute INDEX --remote --command "SELECT * FROM webhook_dead_letters"`) and
-- replay them from /api/v1/changes. One row per receiver and event: the queue delivers at least
-- once, and a copy changes nothing.
CREATE TABLE webhook_dead_letters (
  receiver TEXT NOT NULL,        -- the receiver's name in WEBHOOKS (never its URL or secret)
  event_id TEXT NOT NULL,        -- the event's id, `<batch>-<index>`
  agent_id INTEGER NOT NULL,
  attempts INTEGER NOT NULL,     -- attempts made (0: the queue never reached the sender)
  last_error TEXT NOT NULL,      -- the last attempt's error (a status, a timeout; no URL)
  event TEXT NOT NULL,           -- the event's JSON, as it would have been delivered
  dead_at INTEGER NOT NULL,      -- Unix seconds it was recorded
  PRIMARY KEY (receiver, event_id)
);
