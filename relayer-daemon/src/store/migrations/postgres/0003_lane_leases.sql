-- Lane leases (several daemons on one database): each key is leased to one daemon at a time.
-- `fence` rises at every change of holder; a transaction is recorded only under the current
-- fence with time left on the lease (`store/leases.rs`).
CREATE TABLE lanes (
    address TEXT PRIMARY KEY,
    holder TEXT,
    fence BIGINT NOT NULL DEFAULT 0,
    lease_until BIGINT NOT NULL DEFAULT 0
);
-- The daemons alive (heard from within a lease): each takes its share of the keys.
CREATE TABLE relayer_daemons (
    id TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);
