"""KeyCache and NonceMemory: kya-core's rules, as the npm package's tests check them."""

from __future__ import annotations

from typing import Any, Dict

import pytest

import kya


def test_key_cache_one_fetch_at_a_time_throttled_and_bounded(fixture: Dict[str, Any]) -> None:
    jwks = fixture["jwks"]
    cache = kya.KeyCache(refetch_interval_ms=10_000)
    assert cache.jwks(0) is None
    assert cache.begin_fetch("stale", 1_000) is True
    # While it runs, and then within the interval, nothing else starts: 200 made-up kids, 0 fetches.
    assert not any(cache.begin_fetch("unknown_key", 1_001 + i) for i in range(200))
    cache.fetched(jwks, "public, max-age=60", 1_200)
    held = cache.jwks(1_200)
    assert held is not None and held.kids == [key["kid"] for key in jwks["keys"]]
    assert cache.jwks(1_201) is held, "the same keys object, read once"
    assert cache.begin_fetch("unknown_key", 10_999) is False
    assert cache.begin_fetch("unknown_key", 11_000) is True
    cache.failed()
    assert cache.begin_fetch("unknown_key", 20_999) is False, "a failure counts as an attempt"
    assert cache.attempts == 2
    assert cache.is_stale(61_199) is False and cache.is_stale(61_200) is True
    assert cache.trusted_until_ms == 121_200
    assert cache.jwks(121_199) is held and cache.jwks(121_200) is None
    assert cache.begin_fetch("stale", 130_000) is True
    with pytest.raises(kya.InvalidInput, match="keys"):
        cache.fetched({"keys": 5}, None, 130_000)
    assert cache.in_flight is False
    with pytest.raises(kya.KyaError, match="no fetch was begun"):
        cache.failed()
    with pytest.raises(kya.InvalidInput, match="'stale' or 'unknown_key'"):
        cache.begin_fetch("whenever", 0)  # type: ignore[arg-type]


def test_key_cache_honours_no_store_and_clamps_a_huge_max_age(fixture: Dict[str, Any]) -> None:
    cache = kya.KeyCache()
    cache.begin_fetch("stale", 0)
    cache.fetched(fixture["jwks"], "no-store", 0)
    assert cache.is_stale(0) is True
    assert cache.jwks(9_999) is not None and cache.jwks(10_000) is None
    cache.begin_fetch("stale", 10_000)
    cache.fetched(fixture["jwks"], "max-age=18446744073709551615", 10_000)
    assert cache.is_stale(10_000 + 86_400_000 - 1) is False
    assert cache.is_stale(10_000 + 86_400_000) is True


def test_nonce_memory_claims_once_until_the_signature_can_no_longer_pass() -> None:
    nonces = kya.NonceMemory()
    assert nonces.claim("erc8128:1:0xab:n-1", 100, 50) is True
    assert nonces.claim("erc8128:1:0xab:n-1", 100, 100) is False
    assert nonces.claim("erc8128:1:0xab:n-2", 90, 60) is True
    assert len(nonces) == 2
    assert nonces.claim("erc8128:1:0xab:n-1", 200, 101) is True, "forgotten after its last second"
    assert len(nonces) == 1
    with pytest.raises(OverflowError):
        nonces.claim("k", -1, 0)
