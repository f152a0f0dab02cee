"""ERC-8128 through the binding: kya-core's own pinned vectors (its signatures for the ERC
authors' TypeScript verifier, and that implementation's for us), signatures from a key held
elsewhere (eth-account, an independent secp256k1 and EIP-191), a request signed by the Rust CLI
(`kya sign`), and every refusal reason."""

from __future__ import annotations

import base64
import hashlib
import pickle
from typing import Any, Dict

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct

import kya
from conftest import CHAIN, CREATED, EXPIRES, SECRET, SIGNER

KEYID = f"erc8128:{CHAIN}:{SIGNER.lower()}"
POST_URL = "https://api.example.com/api/v1/kya/verify"
POST_BODY = b'{"hello": "world"}'


def test_signing_matches_kya_cores_pinned_signatures() -> None:
    # core/src/erc8128/tests/interop.rs, our_signatures_for_the_typescript_verifier.
    cases = [
        ("GET", "https://api.example.com/api/v1/agents?status=Active&page=2", None,
         '("@method" "@authority" "@path" "@query")',
         "YqdlBeR+FNT0MbbW00WPneGLOZAu9HreORFtg1yDqXJOVQhyBtcNGNXs7isOe+RIAnRQ57Jd330jaarbO5cMVBw="),
        ("POST", POST_URL, POST_BODY, '("@method" "@authority" "@path" "content-digest")',
         "+43oZmtVJmCTAyxUb2sdCyGzwsgbBbepVJw++tDgTDhXpz1GbYcHTMhqyRt6m/jtdC4ceW5w/gVtBovyt1ymVxw="),
        ("GET", "https://api.example.com/a%20b/c", None, '("@method" "@authority" "@path")',
         "8WCO6ZdQTHSAG1Wa2l9zkHYULzZd+Z9d1pwekP0LFFIfItMpJBomIJikJl3wnYAxlzraDzDKI0ER97i/thHqyxs="),
    ]
    for method, url, body, components, signature in cases:
        signed = kya.sign_request(method, url, chain_id=CHAIN, private_key=SECRET, body=body,
                                  created=CREATED, expires=EXPIRES, nonce="ours-1")
        assert signed["signature_input"] == (
            f'eth={components};created={CREATED};expires={EXPIRES};nonce="ours-1";keyid="{KEYID}"')
        assert signed["signature"] == f"eth=:{signature}:"
        assert signed["keyid"] == KEYID
        assert (signed["created"], signed["expires"], signed["nonce"]) == (CREATED, EXPIRES, "ours-1")
        if body is None:
            assert signed["content_digest"] is None and "Content-Digest" not in signed["headers"]
        else:
            assert signed["content_digest"] == "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
            digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
            assert signed["headers"]["Content-Digest"] == f"sha-256=:{digest}:"


def test_the_typescript_implementations_signature_verifies() -> None:
    # core/src/erc8128/tests/interop.rs, verifies_signatures_of_the_typescript_implementation.
    headers = {
        "content-type": "application/json",
        "content-digest": "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
        "signature-input": 'eth=("@authority" "@method" "@path" "content-digest");created=1767225600;'
                           f'expires=1767225660;nonce="nonce-post-1";keyid="{KEYID}"',
        "signature": "eth=:3QDyaPBdT0uE0Qssiy3Ds3SZckvF2TVMz7IrxeR9kpVnlJw9+S9BzrbAUZQHuAJN8HkuSCOEEyzEpJYkZyluzRw=:",
    }
    verdict = kya.verify_request("POST", POST_URL, headers, authority="api.example.com", chain_id=CHAIN,
                                 body=POST_BODY, now=CREATED + 1)
    assert verdict == {
        "outcome": "verified", "signer": SIGNER, "keyid": KEYID, "chain_id": CHAIN, "created": CREATED,
        "expires": EXPIRES, "nonce": "nonce-post-1",
        "components": ["@authority", "@method", "@path", "content-digest"], "label": "eth",
        "nonce_key": f"{KEYID}:nonce-post-1", "remember_until": EXPIRES + 60,
    }


def test_a_key_held_elsewhere_signs_the_same_headers() -> None:
    account = Account.from_key(SECRET)
    local = kya.sign_request("POST", POST_URL, chain_id=CHAIN, private_key=SECRET, body=POST_BODY,
                             created=CREATED, nonce="n-1")
    # A signer of raw hashes (a KMS): eth-account's own secp256k1, v as 27/28.
    raw = kya.sign_request("POST", POST_URL, chain_id=CHAIN, body=POST_BODY, created=CREATED, nonce="n-1",
                           signer=lambda digest: bytes(account.unsafe_sign_hash(digest).signature),
                           address=account.address)
    assert raw == local
    # A wallet's personal_sign of the signature base: eth-account's EIP-191 hash, not ours.
    prepared = kya.prepare_request("POST", POST_URL, chain_id=CHAIN, address=account.address,
                                   body=POST_BODY, created=CREATED, nonce="n-1")
    assert prepared.signature_base.startswith('"@method": POST\n"@authority": api.example.com\n')
    message = encode_defunct(text=prepared.signature_base)
    signed = Account.sign_message(message, SECRET)
    assert bytes(prepared.message_hash) == bytes(signed.message_hash)
    assert prepared.finish(bytes(signed.signature)) == local
    assert prepared.finish("0x" + bytes(signed.signature).hex()) == local
    # v as 0/1 is written as 27/28.
    low_v = bytes(signed.signature)[:64] + bytes([signed.signature[64] - 27])
    assert prepared.finish(low_v) == local
    with pytest.raises(kya.SignError, match="empty"):
        prepared.finish(b"")


def test_a_private_key_read_once_signs_the_very_headers_of_its_hex_and_never_shows_itself() -> None:
    key = kya.PrivateKey(SECRET)
    assert key.address == SIGNER == kya.PrivateKey(bytes.fromhex(SECRET[2:])).address == kya.address_of(key)
    for method, url, body, extra in (("POST", POST_URL, POST_BODY, {}), ("GET", "https://x.example/a?b=1", None, {}),
                                     ("POST", POST_URL, POST_BODY, {"address": "0x" + "11" * 20})):
        options: Dict[str, Any] = dict(chain_id=CHAIN, body=body, created=CREATED, expires=EXPIRES, nonce="n-1",
                                       headers={"Content-Type": "application/json"}, components=["content-type"])
        options.update(extra)
        held = kya.sign_request(method, url, private_key=key, **options)
        assert held == kya.sign_request(method, url, private_key=SECRET, **options), "byte for byte"
    # The signer holds it once, whether given the hex or the object: its requests verify as the key's.
    for given in (SECRET, key):
        signer = kya.RequestSigner(chain_id=CHAIN, private_key=given)
        assert signer.address == SIGNER
        headers = signer.headers("POST", POST_URL, body=POST_BODY)
        verdict = kya.verify_request("POST", POST_URL, headers, authority="api.example.com", chain_id=CHAIN,
                                     body=POST_BODY)
        assert verdict["outcome"] == "verified" and verdict["signer"] == SIGNER, verdict
    assert repr(key) == str(key) == f"PrivateKey(address='{SIGNER}')"
    secret = SECRET[2:]
    shown = [repr(key), repr(kya.RequestSigner(chain_id=CHAIN, private_key=key)), repr(vars(signer))]
    assert all(secret not in text.lower() for text in shown), shown
    assert not any(secret in repr(getattr(key, name, "")).lower() for name in dir(key))
    with pytest.raises(kya.InvalidInput, match="private_key must be") as refused:
        kya.PrivateKey(SECRET[:-2])
    assert secret[:-2] not in str(refused.value)
    with pytest.raises(TypeError):
        pickle.dumps(key)


def test_a_request_signed_by_kya_sign_verifies_here(fixture: Dict[str, Any]) -> None:
    cli = fixture["cliSigned"]
    headers = dict(cli["headers"])
    headers["Content-Type"] = "application/json"
    verdict = kya.verify_request("POST", cli["url"], headers, authority="api.provider.example",
                                 chain_id=fixture["chainId"], body=cli["body"], now=cli["created"] + 1)
    assert verdict["outcome"] == "verified", verdict
    assert verdict["signer"] == fixture["wallet"]
    assert verdict["components"] == ["@method", "@authority", "@path", "@query", "content-digest", "content-type"]
    assert verdict["nonce"] == cli["nonce"]


def test_a_request_signed_here_verifies_as_kya_sign_writes_it(fixture: Dict[str, Any]) -> None:
    # Same key, times, nonce and covered fields as `kya sign`: the very same headers (RFC 6979).
    cli = fixture["cliSigned"]
    ours = kya.sign_request("POST", cli["url"], chain_id=fixture["chainId"], private_key=fixture["walletKey"],
                            headers={"Content-Type": "application/json"}, body=cli["body"],
                            created=cli["created"], expires=cli["expires"], nonce=cli["nonce"],
                            components=["content-type"])
    assert ours["signature_input"] == cli["headers"]["signature-input"]
    assert ours["signature"] == cli["headers"]["signature"]
    assert ours["content_digest"] == cli["headers"]["content-digest"]


def _signed(url: str = POST_URL, **changes: Any) -> Dict[str, Any]:
    options: Dict[str, Any] = dict(chain_id=CHAIN, private_key=SECRET, body=POST_BODY, created=CREATED,
                                   nonce="n-1")
    options.update(changes)
    signed = kya.sign_request("POST", url, **options)
    return dict(signed["headers"])


def _reason(headers: Any, url: str = POST_URL, body: Any = POST_BODY, now: int = CREATED + 1,
            **policy: Any) -> str:
    options: Dict[str, Any] = dict(authority="api.example.com", chain_id=CHAIN)
    options.update(policy)
    verdict = kya.verify_request("POST", url, headers, body=body, now=now, **options)
    assert verdict["outcome"] == "refused", verdict
    return str(verdict["reason"])


def test_every_signature_refusal_reason() -> None:
    good = _signed()
    assert kya.verify_request("POST", POST_URL, good, authority="api.example.com", chain_id=CHAIN,
                              body=POST_BODY, now=CREATED + 1)["outcome"] == "verified"
    reasons = {
        "malformed": _reason({"signature-input": "eth=(", "signature": "eth=:AA==:"}),
        "unsupported": _reason(good | {"Signature-Input": good["Signature-Input"] + ';alg="ecdsa-p256"'}),
        "wrong_authority": _reason(good, authority="api.other.example"),
        "not_request_bound": _reason(good, url=POST_URL + "?added=1"),
        "expired": _reason(good, now=EXPIRES + 61),
        "not_yet_valid": _reason(good, now=CREATED - 61),
        "window_too_long": _reason(_signed(expires=CREATED + 301)),
        "digest_mismatch": _reason(good, body=b'{"hello": "mallory"}'),
        "bad_signature": _reason(_signed(private_key="0x" + "11" * 32, address=SIGNER), allow_erc1271=False),
        "wrong_chain": _reason(_signed(chain_id=1)),
    }
    assert sorted(reasons) == sorted(reasons.values())
    # `replayed` is the nonce store's: NonceMemory, as the gate uses it.
    verdict = kya.verify_request("POST", POST_URL, good, authority="api.example.com", chain_id=CHAIN,
                                 body=POST_BODY, now=CREATED + 1)
    assert verdict["outcome"] == "verified"
    nonces = kya.NonceMemory()
    assert nonces.claim(str(verdict["nonce_key"]), int(str(verdict["remember_until"])), CREATED + 1)
    assert not nonces.claim(str(verdict["nonce_key"]), int(str(verdict["remember_until"])), CREATED + 2)
    assert set(kya.SIGNATURE_REASONS) == set(reasons) | {"replayed"}


def test_a_contract_accounts_signature_is_an_erc1271_call() -> None:
    account = "0x" + "ab" * 20
    headers = _signed(address=account)
    verdict = kya.verify_request("POST", POST_URL, headers, authority="api.example.com", chain_id=CHAIN,
                                 body=POST_BODY, now=CREATED + 1)
    assert verdict["outcome"] == "erc1271", verdict
    call = verdict["erc1271"]
    assert call["address"].lower() == account and call["chain_id"] == CHAIN
    assert call["calldata"].startswith("0x1626ba7e")
    assert verdict["unverified"]["signer"].lower() == account
    assert kya.erc1271_accepts("0x1626ba7e" + "00" * 28)
    assert not kya.erc1271_accepts(b"")


def test_inputs_kya_core_refuses_raise_with_the_reason() -> None:
    with pytest.raises(kya.InvalidInput, match="authority is required"):
        kya.verify_request("GET", "https://x.example/", {}, authority=" ", chain_id=CHAIN)
    with pytest.raises(kya.InvalidInput, match="private_key must be"):
        kya.sign_request("GET", "https://x.example/", chain_id=CHAIN, private_key="0x1234")
    with pytest.raises(kya.SignError, match="expires"):
        kya.sign_request("GET", "https://x.example/", chain_id=CHAIN, private_key=SECRET, created=10, expires=10)
    with pytest.raises(kya.SignError):
        kya.sign_request("GET", "ftp://x.example/", chain_id=CHAIN, private_key=SECRET)
    with pytest.raises(kya.InvalidInput, match="exactly one"):
        kya.sign_request("GET", "https://x.example/", chain_id=CHAIN)
    with pytest.raises(kya.InvalidInput, match="address"):
        kya.sign_request("GET", "https://x.example/", chain_id=CHAIN, signer=lambda digest: digest)
    assert issubclass(kya.SignError, kya.InvalidInput) and issubclass(kya.InvalidInput, kya.KyaError)


def test_defaults_are_now_sixty_seconds_and_a_random_nonce() -> None:
    import time

    first = kya.sign_request("GET", "https://x.example/", chain_id=CHAIN, private_key=SECRET)
    second = kya.sign_request("GET", "https://x.example/", chain_id=CHAIN, private_key=SECRET)
    assert abs(first["created"] - time.time()) <= 5 and first["expires"] == first["created"] + 60
    assert len(first["nonce"]) == 22 and first["nonce"] != second["nonce"]
    assert kya.address_of(SECRET) == SIGNER
