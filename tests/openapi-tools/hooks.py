"""Schemathesis hooks of the contract test (tests/it/openapi/): each request comes from its own
client IP (`CF-Connecting-IP`, as Cloudflare sets it), so the edge API's per-IP limit of 60 a
minute leaves the run's requests to reach the endpoints. The relayer counts TCP peers instead;
its limit is raised for that run through its configuration. A generated wallet in mixed case
gets a valid EIP-55 checksum (below)."""

import itertools
import re

import schemathesis
from eth_utils import to_checksum_address

_next_ip = itertools.count(1)
_WALLET = re.compile(r"0x[0-9a-fA-F]{40}\Z")


@schemathesis.hook
def map_path_parameters(ctx, path_parameters):
    """`/kya/{wallet}` takes a wallet in lowercase, uppercase, or mixed case with a valid EIP-55
    checksum (a 400 otherwise), which the document's pattern cannot say: it admits any case. So
    a mixed-case wallet Schemathesis makes up is given its checksum, and the check that
    schema-valid requests are accepted holds; the 400 for a bad checksum is tested end to end."""
    wallet = (path_parameters or {}).get("wallet")
    if isinstance(wallet, str):
        return {**path_parameters, "wallet": _checksummed(wallet)}
    return path_parameters


@schemathesis.hook
def map_body(ctx, body):
    """`POST /kya/batch`'s wallets, as `/kya/{wallet}`'s: a mixed-case one gets its checksum."""
    if isinstance(body, dict) and isinstance(body.get("wallets"), list):
        return {**body, "wallets": [_checksummed(wallet) for wallet in body["wallets"]]}
    return body


def _checksummed(wallet):
    """A well-formed wallet in mixed case with its EIP-55 checksum; anything else as it is."""
    if isinstance(wallet, str) and _WALLET.match(wallet):
        digits = wallet[2:]
        if digits not in (digits.lower(), digits.upper()):
            return to_checksum_address(wallet)
    return wallet


@schemathesis.hook
def before_call(ctx, case, kwargs):
    n = next(_next_ip)
    headers = dict(case.headers or {})
    headers["CF-Connecting-IP"] = f"10.{200 + (n >> 16) % 50}.{(n >> 8) & 255}.{n & 255}"
    case.headers = headers

