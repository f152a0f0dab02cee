-- A relay whose registry call failed (`call_failed`) ran: its forwarder nonce is used up, as a
-- mined or executed relay's is. It now keeps any other relay of its request out, as those do,
-- on both engines (SQLite's schema.rs makes the same change), rather than leaving that to the
-- forwarder's own nonce check.
DROP INDEX relays_live_request_v3;
CREATE UNIQUE INDEX relays_live_request_v4 ON relays (signer, forwarder_nonce)
    WHERE status IN ('accepted', 'sent', 'replaced', 'cancelling', 'mined', 'call_failed', 'executed');
