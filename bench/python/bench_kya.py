"""The Python half of `cargo bench -p kya-bench --bench python` (run by bench/python/run.sh).

It reads the fixture the Rust half wrote (a pass, its JWKS and what a verifier trusts; a request
to sign, its key and parameters, and the headers the native signer made of it), checks that
every case here accepts the same pass and makes the same headers, then answers the Rust half
sample by sample: for each line ``sample`` on standard input it times one sample of every case
and prints one JSON line of nanoseconds per call. The rounds alternate with the native samples,
so that both sides meet the same load on a shared machine; the Rust half takes the medians.

A sample is one ``timeit`` loop of the statement as a caller writes it (no wrapper function in
the loop), run often enough to last at least the fixture's ``sampleMillis``.
"""

from __future__ import annotations

import json
import platform
import re
import sys
import timeit
from typing import Any, Dict

import cryptography
import jwt
from cryptography.exceptions import InvalidSignature
from jwt.types import Options

import kya
from kya import _core

with open(sys.argv[1], encoding="utf-8") as fixture_file:
    fixture: Dict[str, Any] = json.load(fixture_file)
jws: str = fixture["pass"]
issuer: str = fixture["issuer"]
chain_id: int = fixture["chainId"]
registry: str = fixture["registry"]
now: int = fixture["now"]
jwks_document: Dict[str, Any] = fixture["jwks"]
jwks = _core.Jwks(jwks_document)
request = fixture["request"]
method: str = request["method"]
url: str = request["url"]
headers: Dict[str, str] = dict(request["headers"])
body: bytes = request["body"].encode()
private_key: str = request["privateKey"]
held_key = kya.PrivateKey(private_key)
components = request["components"]
created: int = request["created"]
expires: int = request["expires"]
nonce: str = request["nonce"]
signer = kya.RequestSigner(chain_id=request["chainId"], private_key=private_key, components=components)

# PyJWT's best case: the key already chosen and loaded (an `Ed25519PublicKey` of `cryptography`,
# which verifies with OpenSSL), the JWS verified with EdDSA alone allowed, `exp`, `nbf` and `iat`
# checked with the pass's 60 s of skew, `iss` against the trusted issuer. PyJWT does not look
# at `typ`, `kid`, `chainId`, `registry` or `sub`.
pyjwt_keys = {key["kid"]: jwt.PyJWK(key).key for key in jwks_document["keys"]}
pyjwt_key = pyjwt_keys[jwt.get_unverified_header(jws)["kid"]]
pyjwt_options: Options = {"require": ["exp", "nbf", "iat", "iss"]}

SUBJECT = re.compile(r"eip155:(\d+):(0x[0-9a-fA-F]{40})")


def pyjwt_like_kya(token: str) -> Dict[str, Any]:
    """What a provider writes to make PyJWT check what `verify_pass` checks: the `kid` looked up
    in the issuer's keys and the header's `typ` (PyJWT parses the header again to verify), then
    the claims PyJWT does not know: the chain, the registry, a `sub` naming an account."""
    header = jwt.get_unverified_header(token)
    if header.get("typ") != "kya-pass+jwt":
        raise ValueError("wrong_type")
    key = pyjwt_keys.get(header.get("kid"))
    if key is None:
        raise ValueError("unknown_key")
    claims: Dict[str, Any] = jwt.decode(
        token, key, algorithms=["EdDSA"], issuer=issuer, leeway=60, options=pyjwt_options
    )
    if claims.get("chainId") != chain_id:
        raise ValueError("wrong_chain")
    if str(claims.get("registry", "")).lower() != registry.lower():
        raise ValueError("wrong_registry")
    subject = SUBJECT.fullmatch(str(claims.get("sub", "")))
    if subject is None or int(subject.group(1)) != chain_id:
        raise ValueError("bad_subject")
    return claims


signing_input, _, signature_text = jws.rpartition(".")
signature = jwt.utils.base64url_decode(signature_text)
signed_bytes = signing_input.encode()


def ed25519_alone() -> None:
    pyjwt_key.verify(signature, signed_bytes)


# Each case as a caller writes it; `timeit` runs the statement in its own loop.
CASES = {
    "verify_pass": "verify_pass(jws, jwks=jwks, issuer=issuer, chain_id=chain_id, registry=registry, now=now)",
    "verify_pass_document": (
        "verify_pass(jws, jwks=jwks_document, issuer=issuer, chain_id=chain_id, registry=registry, now=now)"
    ),
    "pyjwt": (
        "jwt.decode(jws, pyjwt_key, algorithms=['EdDSA'], issuer=issuer, leeway=60, options=pyjwt_options)"
    ),
    "pyjwt_like_kya": "pyjwt_like_kya(jws)",
    "ed25519_openssl": "ed25519_alone()",
    "sign_request": (
        "sign_request(method, url, chain_id=chain_id, private_key=private_key, headers=headers, body=body,"
        " created=created, expires=expires, nonce=nonce, components=components)"
    ),
    "sign_request_held_key": (
        "sign_request(method, url, chain_id=chain_id, private_key=held_key, headers=headers, body=body,"
        " created=created, expires=expires, nonce=nonce, components=components)"
    ),
    "request_signer": "signer.headers(method, url, headers, body)",
}
NAMESPACE = dict(globals(), verify_pass=_core.verify_pass, sign_request=_core.sign_request)


def check() -> None:
    """Every case accepts the pass, and signs as the native signer did: the same work."""
    verified = _core.verify_pass(jws, jwks=jwks, issuer=issuer, chain_id=chain_id, registry=registry, now=now)
    assert verified["outcome"] == "verified", verified
    assert verified["wallet"] == fixture["wallet"], verified
    assert _core.verify_pass(
        jws, jwks=jwks_document, issuer=issuer, chain_id=chain_id, registry=registry, now=now
    ) == verified
    claims = jwt.decode(jws, pyjwt_key, algorithms=["EdDSA"], issuer=issuer, leeway=60, options=pyjwt_options)
    assert claims == verified["claims"], (claims, verified["claims"])
    assert pyjwt_like_kya(jws) == claims
    ed25519_alone()
    try:
        pyjwt_key.verify(signature, signed_bytes + b".")
        raise AssertionError("OpenSSL accepted a changed input")
    except InvalidSignature:
        pass
    for case in ("sign_request", "sign_request_held_key"):
        signed = eval(CASES[case], NAMESPACE)  # the very statement timed
        assert signed["headers"] == fixture["nativeHeaders"], (case, signed["headers"], fixture["nativeHeaders"])
    fresh = signer.headers(method, url, headers, body)
    assert set(fresh) == set(fixture["nativeHeaders"]), fresh
    assert fresh["Content-Digest"] == fixture["nativeHeaders"]["Content-Digest"], fresh


def calibrated(statement: str) -> timeit.Timer:
    timer = timeit.Timer(statement, globals=NAMESPACE)
    timer.timeit(number=50)  # warm-up: the allocator, OpenSSL's and the module's first calls
    return timer


def runs_for(timer: timeit.Timer, sample_millis: float) -> int:
    """How many calls make a sample last at least `sample_millis` (as `timeit`'s autorange)."""
    runs = 1
    while True:
        if timer.timeit(number=runs) * 1e3 >= sample_millis:
            return runs
        runs *= 2


def main() -> None:
    check()
    sample_millis = float(fixture["sampleMillis"])
    timers = {name: calibrated(statement) for name, statement in CASES.items()}
    runs = {name: runs_for(timer, sample_millis) for name, timer in timers.items()}
    try:
        from cryptography.hazmat.backends.openssl.backend import backend

        openssl = backend.openssl_version_text()
    except Exception:  # the backend's name moved between releases; the version is informative
        openssl = "?"
    ready = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "pyjwt": jwt.__version__,
        "cryptography": cryptography.__version__,
        "openssl": openssl,
        "kya": _core.__version__,
        "module": _core.__file__,
        "runs": runs,
    }
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        if line.strip() != "sample":
            break
        sample = {name: timer.timeit(number=runs[name]) * 1e9 / runs[name] for name, timer in timers.items()}
        print(json.dumps(sample), flush=True)


if __name__ == "__main__":
    main()
