-- The webhooks' dead letters counted per receiver (docs/change-feed.md, "Webhooks"), for
-- /health: one row per receiver that has any, kept by triggers as rows of webhook_dead_letters
-- come and go, so /health reads a row per receiver, never the dead letters themselves (a count
-- over them would read every one kept, and they are kept until an operator deletes them).
CREATE TABLE webhook_dead_letter_counts (
  receiver TEXT PRIMARY KEY,     -- the receiver's name in WEBHOOKS
  events INTEGER NOT NULL,       -- rows of webhook_dead_letters naming it
  newest_at INTEGER NOT NULL     -- the newest dead_at recorded for it (Unix seconds)
);

-- The dead letters recorded before this migration.
INSERT INTO webhook_dead_letter_counts (receiver, events, newest_at)
  SELECT receiver, COUNT(*), MAX(dead_at) FROM webhook_dead_letters GROUP BY receiver;

-- A copy of a row already recorded is not inserted (ON CONFLICT DO NOTHING): no trigger fires.
CREATE TRIGGER webhook_dead_letters_counted AFTER INSERT ON webhook_dead_letters
BEGIN
  INSERT INTO webhook_dead_letter_counts (receiver, events, newest_at)
    VALUES (NEW.receiver, 1, NEW.dead_at)
    ON CONFLICT (receiver) DO UPDATE
      SET events = events + 1, newest_at = MAX(newest_at, excluded.newest_at);
END;

-- An operator deleting replayed dead letters: the count follows; a receiver left with none is
-- no longer listed.
CREATE TRIGGER webhook_dead_letters_uncounted AFTER DELETE ON webhook_dead_letters
BEGIN
  UPDATE webhook_dead_letter_counts SET events = events - 1 WHERE receiver = OLD.receiver;
  DELETE FROM webhook_dead_letter_counts WHERE receiver = OLD.receiver AND events <= 0;
END;
