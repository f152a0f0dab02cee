"""Schemathesis hooks of the contract test (tests/it/openapi/): each request comes from its own
client IP (`CF-Connecting-IP`, as Cloudflare sets it), so the edge API's per-IP limit of 60 a
minute leaves the run's requests to reach the endpoints. The relayer counts TCP peers instead;
its limit is raised for that run through its configuration."""

import itertools

import schemathesis

_next_ip = itertools.count(1)


@schemathesis.hook
def before_call(ctx, case, kwargs):
    n = next(_next_ip)
    headers = dict(case.headers or {})
    headers["CF-Connecting-IP"] = f"10.{200 + (n >> 16) % 50}.{(n >> 8) & 255}.{n & 255}"
    case.headers = headers
