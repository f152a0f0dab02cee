-- Relays accepted by a daemon that holds no free key (a standby), for the holder of their lane
-- to send (`store/handoffs.rs`): a row per relay until its holder has sent it, or it closed.
CREATE TABLE handoffs (
    relay BIGINT PRIMARY KEY,
    lane TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX handoffs_by_lane ON handoffs (lane);
