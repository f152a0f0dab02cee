-- The key pool: each relay records the key (nonce lane) that sends it, as SQLite's `lane`
-- column. Earlier rows stay NULL until a daemon starts and gives them its first key, the one
-- key there was (`Store::adopt_unlaned`).

ALTER TABLE relays ADD COLUMN lane TEXT;
-- A new relay's lane is the one with the fewest open relays: counted per lane and status.
CREATE INDEX relays_by_lane ON relays (lane, status);
