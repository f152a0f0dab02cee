"""A provider's gate: admits requests signed by compliant agents carrying their pass, offline
(``verify_agent_request``), with the issuer's keys kept by ``KeyCache`` (fetched at most once
per interval, one fetch at a time, trusted within bounds) and nonces claimed in ``NonceMemory``
or a store the caller gives (Redis, say)."""

from __future__ import annotations

import threading
import time
import urllib.request
from typing import Any, Callable, Literal, Mapping, Optional, Protocol, Tuple, Union

from kya._core import JWKS_PATH, Jwks, KeyCache, KyaError, NonceMemory, verify_agent_request

#: Fetches the JWKS: its body and its ``Cache-Control`` (``None`` when absent).
FetchJwks = Callable[[str], Tuple[bytes, Optional[str]]]


class IssuerKeysUnavailable(KyaError):
    """No issuer key is trusted now: never fetched, or past its bound, and the issuer cannot be
    reached. Answer 503: the gate cannot tell a valid pass from a forged one."""


class NonceStore(Protocol):
    """Claims a nonce key once, atomically, until ``remember_until`` (Unix seconds):
    ``NonceMemory`` in one process; Redis ``SET key 1 NX EXAT remember_until`` across several."""

    def claim(self, nonce_key: str, remember_until: int, now: Optional[int] = None) -> bool: ...


def _fetch_jwks(url: str) -> Tuple[bytes, Optional[str]]:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (the issuer's URL)
        body: bytes = response.read()
        return body, response.headers.get("Cache-Control")


class Admission:
    """The gate's answer: ``admitted``, else the ``status`` to answer (401: no valid signature
    or no pass, or a replayed nonce; 403: a pass that does not admit the signer), the stage,
    ``reason`` and ``message``. ``verdict`` is ``verify_agent_request``'s."""

    def __init__(self, verdict: Mapping[str, Any]) -> None:
        self.verdict = verdict
        self.admitted: bool = verdict["outcome"] == "admitted"
        self.stage: Optional[str] = verdict.get("stage")
        self.reason: Optional[str] = verdict.get("reason")
        self.message: Optional[str] = verdict.get("message")
        if self.admitted:
            self.status = 200
        elif self.stage == "pass" and self.reason != "no_pass":
            self.status = 403
        else:
            self.status = 401

    @property
    def signer(self) -> Optional[str]:
        return self.verdict["signature"]["signer"] if self.admitted else None

    def __repr__(self) -> str:
        if self.admitted:
            return f"Admission(admitted, signer={self.signer!r})"
        return f"Admission({self.status}, {self.stage}, {self.reason!r})"


class Gate:
    """Admits requests for the provider serving ``authority`` (``host[:port]``), trusting the
    passes the API at ``api_url`` issues for ``chain_id`` and ``registry``. Thread-safe."""

    def __init__(
        self,
        *,
        api_url: str,
        authority: str,
        chain_id: int,
        registry: str,
        issuer: Optional[str] = None,
        nonces: Optional[NonceStore] = None,
        keys: Optional[KeyCache] = None,
        fetch_jwks: Optional[FetchJwks] = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.issuer = issuer or self.api_url
        self.authority = authority
        self.chain_id = chain_id
        self.registry = registry
        self.nonces: NonceStore = nonces if nonces is not None else NonceMemory()
        self.keys = keys if keys is not None else KeyCache()
        self._fetch_jwks = fetch_jwks or _fetch_jwks
        self._clock = clock
        self._lock = threading.Lock()
        self._fetching = threading.Lock()
        #: The latest block at which each wallet (lowercase) was reported losing compliance.
        self._lost_at: dict[str, int] = {}

    def compliance_lost(self, wallet: str, block: int) -> None:
        """The change feed says ``wallet`` lost compliance at ``block``: its passes from that
        block or before are refused (``revoked``)."""
        with self._lock:
            key = wallet.lower()
            self._lost_at[key] = max(block, self._lost_at.get(key, 0))

    def _refresh(self, reason: Literal["stale", "unknown_key"], seen: int) -> None:
        """One fetch at a time: a caller that finds one under way waits for it, and uses its
        outcome: none starts if a fetch finished since the caller read ``seen`` outcomes."""
        with self._fetching:
            now_ms = int(self._clock() * 1000)
            with self._lock:
                if self.keys.outcomes != seen or not self.keys.begin_fetch(reason, now_ms):
                    return
            try:
                body, cache_control = self._fetch_jwks(self.api_url + JWKS_PATH)
                jwks = Jwks(body)
            except Exception:
                with self._lock:
                    self.keys.failed()
                return
            with self._lock:
                self.keys.fetched(jwks, cache_control, int(self._clock() * 1000))

    def _jwks(self) -> Tuple[Jwks, int]:
        """The keys to check with, and how many fetches had finished when they were read."""
        now_ms = int(self._clock() * 1000)
        if self.keys.is_stale(now_ms):
            self._refresh("stale", self.keys.outcomes)
        with self._lock:
            seen = self.keys.outcomes
            jwks = self.keys.jwks(int(self._clock() * 1000))
        if jwks is None:
            raise IssuerKeysUnavailable(f"no trusted key of {self.issuer}: {self.api_url + JWKS_PATH} cannot be had")
        return jwks, seen

    def admit(
        self, method: str, url: str, headers: Any, body: Union[bytes, str, None] = None
    ) -> Admission:
        """Admits a request (its method, absolute URL, headers and body) or says why not."""
        jwks, seen = self._jwks()
        verdict = self._verify(jwks, method, url, headers, body)
        if verdict.get("reason") == "unknown_key" and verdict.get("stage") == "pass":
            # A rotation, or a made-up kid: the cache allows one attempt per interval.
            self._refresh("unknown_key", seen)
            refreshed = self.keys.jwks(int(self._clock() * 1000))
            if refreshed is not None and refreshed is not jwks:
                verdict = self._verify(refreshed, method, url, headers, body)
        if verdict["outcome"] != "admitted":
            return Admission(verdict)
        signature = verdict["signature"]
        lost_at = self._lost_at.get(signature["signer"].lower())
        if lost_at is not None:
            # kya-core decides whether the pass's block is before the loss (`revoked`).
            verdict = self._verify(jwks, method, url, headers, body, lost_at)
            if verdict["outcome"] != "admitted":
                return Admission(verdict)
        # Claimed last: a request turned away for its pass can be sent again with a new one.
        if not self.nonces.claim(signature["nonce_key"], signature["remember_until"], int(self._clock())):
            message = f"the nonce {signature['nonce']!r} of {signature['keyid']} was used already"
            return Admission({"outcome": "refused", "stage": "signature", "reason": "replayed", "message": message})
        return Admission(verdict)

    def _verify(
        self,
        jwks: Jwks,
        method: str,
        url: str,
        headers: Any,
        body: Union[bytes, str, None],
        lost_at: Optional[int] = None,
    ) -> Mapping[str, Any]:
        return verify_agent_request(
            method,
            url,
            headers,
            authority=self.authority,
            jwks=jwks,
            issuer=self.issuer,
            chain_id=self.chain_id,
            registry=self.registry,
            body=body,
            now=int(self._clock()),
            lost_compliance_at=lost_at,
        )
