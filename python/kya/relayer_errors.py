"""What a relayer flow fails with. The relayer answers an error as ``{"error": "<message>",
"code": "<code>"}`` with SPEC.md's and docs/relayer.md's exact messages; each becomes a
``RelayerError`` carrying the HTTP status, the message and the stable ``code`` (read from the
message when a body has none: a relayer from before codes, a proxy), of the class that says what
to do: send the request again changed (``RequestRefused``), sign it again at a fresh nonce
(``InvalidSignature``), wait (``RateLimited``, ``RelayerUnavailable``), or give up on this call
(``CallReverted``: the registry refuses it). Past the answer: ``RelayFailed`` (settled without
success), ``RelayTimeout``, ``Unreachable``, ``RpcError``, ``UnexpectedAnswer``."""

from __future__ import annotations

import json
from typing import Any, List, Mapping, Optional, Tuple, Type

from kya._core import KyaError


class RelayerError(KyaError):
    """The relayer refused a request: its HTTP ``status``, its ``message`` (the body's
    ``error``), a stable ``code``, and ``retry_after`` (seconds) when it said when to retry."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[int] = None) -> None:
        super().__init__(f"relayer answered HTTP {status} ({code}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class RequestRefused(RelayerError):
    """400, 403, 404, 411: the request as sent will never pass (a malformed body, another
    contract, value, too much gas, call data that is not one registry write, a deadline too
    near, an unknown relay)."""


class InvalidSignature(RelayerError):
    """401: the signature is not ``from``'s for this request, or the nonce is spent: read the
    nonce again and sign again."""


class RateLimited(RelayerError):
    """429: a rate limit, the day's budget or a share of it; ``retry_after`` when the relayer
    named the time (the budget's next slice)."""


class RelayerUnavailable(RelayerError):
    """503, and the 500s of the relayer's own failures (its RPC, its store, a send whose answer
    was lost: ``code`` ``unconfirmed``, the transaction may still be mined, and sending the same
    signed request again is safe)."""


class CallReverted(RelayerError):
    """500 with the registry's revert reason (``reason``): its simulation refused the call, so
    nothing was sent or paid. Sending it again will not help."""

    @property
    def reason(self) -> str:
        return self.message


class RelayFailed(KyaError):
    """The relay settled without the registry call succeeding: ``status`` (``call_failed``,
    ``dropped``, ``expired``, ``reverted``, ``failed``), ``reason`` (the revert reason or the
    relayer's ``error``), and the relay as ``GET /relay/:id`` shows it."""

    def __init__(self, relay: Mapping[str, Any]) -> None:
        self.relay = relay
        self.status: str = str(relay.get("status"))
        self.reason: Optional[str] = relay.get("revertReason") or relay.get("error")
        said = f": {self.reason}" if self.reason else ""
        super().__init__(f"relay {relay.get('relayId')} ended {self.status}{said}")


class RelayTimeout(KyaError):
    """The relay did not settle in time; it may still be mined (``relay_id`` to look it up)."""

    def __init__(self, relay_id: str, seconds: float) -> None:
        super().__init__(f"gave up waiting after {seconds:g} s for relay {relay_id}; it may still settle")
        self.relay_id = relay_id


class Unreachable(KyaError):
    """The relayer or the RPC endpoint could not be reached (no URL in the message: an RPC URL
    may carry its provider's key)."""


class RpcError(KyaError):
    """The chain's JSON-RPC endpoint answered with an error."""


class UnexpectedAnswer(KyaError):
    """A service answered 2xx with something its interface does not promise."""


#: The relayer's refusals, first match wins: (HTTP status, how the message starts, what else
#: it says, code). Their words are the relayer's (relayer-daemon/src/error.rs);
#: tests/it/python_package.rs hands the suite each one as the daemon writes it, so a change
#: there fails here.
_CODES: List[Tuple[int, str, str, str]] = [
    (400, "Missing request or signature", "", "missing_request_or_signature"),
    (400, "request.deadline ", " leaves ", "deadline_too_near"),
    (400, "request.data is not a registry call", "", "not_a_registry_write"),
    (400, "request.data calls ", "", "not_a_registry_write"),
    (400, "request.data: the arguments of ", "", "not_a_registry_write"),
    (400, "request.data has ", "", "not_a_registry_write"),
    (400, "the consents' deadline ", "Consent deadline too far", "consent_deadline_too_far"),
    (400, "the consents' deadline ", "", "consent_deadline_too_near"),
    (401, "", "", "invalid_signature"),
    (403, "Relayer only forwards to", "", "wrong_target"),
    (403, "Value transfers not supported", "", "value_transfer"),
    (403, "Gas limit ", "", "gas_above_cap"),
    (404, "Relay not found", "", "relay_not_found"),
    (404, "", "", "not_found"),
    (411, "", "", "length_required"),
    (429, "IP rate limit exceeded", "", "ip_rate_limited"),
    (429, "Signer rate limit exceeded", "", "signer_rate_limited"),
    (429, "Rate limit exceeded", "", "read_rate_limited"),
    (429, "Daily gas budget exhausted", "", "budget_exhausted"),
    (429, "Gas budget for this hour spent", "", "budget_slice_spent"),
    (429, "Signer's share of the daily gas budget", "", "signer_share_exhausted"),
    (429, "Client's share of the daily gas budget", "", "client_share_exhausted"),
    (500, "RPC request failed", "", "rpc_failed"),
    (500, "Sending the transaction failed; it may still be mined", "", "unconfirmed"),
    (500, "storage error: ", "", "relayer_failure"),
    (500, "corrupt store: ", "", "relayer_failure"),
    (500, "internal error: ", "", "relayer_failure"),
    (500, "configuration: ", "", "relayer_failure"),
    (503, "Relayer balance too low", "", "balance_too_low"),
    (503, "No relayer key is free", "", "no_free_key"),
    (503, "The relayer's database", "", "store_unavailable"),
]

#: A code not in the table above, by status; a 500 otherwise carries the registry's revert reason.
_BY_STATUS = {400: "bad_request", 403: "forbidden", 429: "rate_limited", 500: "reverted", 503: "unavailable"}


def _code(status: int, message: str) -> str:
    for known, start, also, code in _CODES:
        if known == status and message.startswith(start) and also in message:
            return code
    return _BY_STATUS.get(status, f"http_{status}")


def _kind(status: int, code: str) -> Type[RelayerError]:
    if status == 401:
        return InvalidSignature
    if status == 429:
        return RateLimited
    if status == 503 or (status == 500 and code != "reverted"):
        return RelayerUnavailable
    if status == 500:
        return CallReverted
    if 400 <= status < 500:
        return RequestRefused
    return RelayerError


def relayer_error(status: int, body: str, retry_after: Optional[str] = None) -> RelayerError:
    """The exception for an error answer: its status, its body (``{"error": ...}``, or any
    text), and its ``Retry-After`` header, if any."""
    message = body.strip()
    sent_code = None
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
            message = parsed["error"]
            # The relayer names its code (relayer-daemon/src/error.rs, `Error::code`); one that
            # does not (a relayer from before it did, a proxy) has it read from its words.
            if isinstance(parsed.get("code"), str) and parsed["code"]:
                sent_code = parsed["code"]
    except ValueError:
        pass
    if len(message) > 500:
        message = message[:500] + "…"
    code = sent_code or _code(status, message)
    seconds = int(retry_after) if retry_after is not None and retry_after.strip().isdigit() else None
    return _kind(status, code)(status, code, message or "an empty body", seconds)
