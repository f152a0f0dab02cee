"""KYA passes minted by kya-core (tests/it/python_package.rs) checked here, and every refusal
reason of INTERFACE.md section 7 from verify_agent_request, with the verdicts of the npm
package's verifyAgentRequest (tests/js/pass-interop.test.mjs)."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

import kya

URL = "https://api.provider.example/v1/infer?model=small"
BODY = '{"prompt":"hi"}'


def test_a_pass_kya_core_signed_verifies_with_its_claims(fixture: Dict[str, Any], trust: Dict[str, Any]) -> None:
    for name in ["valid", "previousKey"]:
        verdict = kya.verify_pass(fixture["passes"][name], now=fixture["now"], **trust)
        assert verdict["outcome"] == "verified", verdict
        assert verdict["wallet"] == fixture["wallet"]
        claims = verdict["claims"]
        assert claims["sub"] == f"eip155:{fixture['chainId']}:{fixture['wallet']}"
        assert claims["iss"] == fixture["issuer"] and claims["registry"] == fixture["registry"]
        assert claims["exp"] == fixture["now"] + 300 and claims["nbf"] == claims["iat"] == fixture["now"]
        assert claims["kya"]["isCompliant"] is True and claims["kya"]["agentId"] == 3
        assert claims["block"] == {"number": 42, "hash": "0x" + "07" * 32, "time": fixture["now"]}
    jwks = kya.Jwks(fixture["jwks"])
    assert len(jwks) == 2 and jwks.kids[0] in jwks
    # A Jwks read once, a dict, and its JSON text give the same verdict.
    for keys in [jwks, fixture["jwks"], __import__("json").dumps(fixture["jwks"])]:
        assert kya.verify_pass(fixture["passes"]["valid"], now=fixture["now"], **(trust | {"jwks": keys}))[
            "outcome"] == "verified"


def test_every_change_to_a_pass_is_refused_with_its_reason(fixture: Dict[str, Any], trust: Dict[str, Any]) -> None:
    expected = {
        "expired": "expired", "tamperedClaims": "bad_signature", "tamperedSignature": "bad_signature",
        "respelledHeader": "bad_signature", "unknownKey": "unknown_key", "otherIssuer": "wrong_issuer",
        "truncated": "malformed", "wrongType": "wrong_type", "notYetValid": "not_yet_valid",
        "badSubject": "bad_subject",
    }
    for name, reason in expected.items():
        verdict = kya.verify_pass(fixture["passes"][name], now=fixture["now"], **trust)
        assert (verdict["outcome"], verdict.get("reason")) == ("refused", reason), (name, verdict)
        assert verdict.get("message")
    wrong_chain = kya.verify_pass(fixture["passes"]["valid"], now=fixture["now"], **(trust | {"chain_id": 1}))
    assert wrong_chain.get("reason") == "wrong_chain"
    wrong_registry = trust | {"registry": fixture["wallet"]}
    assert kya.verify_pass(fixture["passes"]["valid"], now=fixture["now"], **wrong_registry).get("reason") == \
        "wrong_registry"
    with pytest.raises(kya.InvalidInput, match="keys"):
        kya.verify_pass(fixture["passes"]["valid"], now=fixture["now"], **(trust | {"jwks": {"keys": 5}}))
    with pytest.raises(kya.InvalidInput, match="registry"):
        kya.verify_pass(fixture["passes"]["valid"], now=fixture["now"], **(trust | {"registry": "0x12"}))


def _request(fixture: Dict[str, Any], key: str, pass_: Optional[str], nonce: str) -> Dict[str, Any]:
    signed = kya.sign_request("POST", URL, chain_id=fixture["chainId"], private_key=key,
                              headers={"content-type": "application/json"}, body=BODY,
                              created=fixture["now"], nonce=nonce, components=["content-type"])
    headers = {"content-type": "application/json"} | signed["headers"]
    if pass_ is not None:
        headers[kya.PASS_HEADER] = pass_
    return {"method": "POST", "url": URL, "headers": headers, "body": BODY}


def _admit(fixture: Dict[str, Any], trust: Dict[str, Any], request: Dict[str, Any], **more: Any) -> Any:
    options = dict(authority="api.provider.example", now=fixture["now"] + 1, **trust)
    options.update(more)
    return kya.verify_agent_request(request["method"], request["url"], request["headers"], body=request["body"],
                                    **options)


def test_verify_agent_request_admits_the_holders_own_request(fixture: Dict[str, Any], trust: Dict[str, Any]) -> None:
    verdict = _admit(fixture, trust, _request(fixture, fixture["walletKey"], fixture["passes"]["valid"], "n-1"))
    assert verdict["outcome"] == "admitted", verdict
    assert verdict["signature"]["signer"] == fixture["wallet"]
    assert verdict["signature"]["nonce_key"] == f"erc8128:{fixture['chainId']}:{fixture['wallet'].lower()}:n-1"
    assert verdict["pass"]["wallet"] == fixture["wallet"]
    assert verdict["pass"]["claims"]["kya"]["isCompliant"] is True


def test_every_refusal_of_section_7(fixture: Dict[str, Any], trust: Dict[str, Any]) -> None:
    passes, key, stranger = fixture["passes"], fixture["walletKey"], fixture["strangerKey"]

    def refused(request: Dict[str, Any], **more: Any) -> Any:
        verdict = _admit(fixture, trust, request, **more)
        assert verdict["outcome"] == "refused", verdict
        assert verdict["message"]
        return (verdict["stage"], verdict["reason"])

    seen = {
        refused(_request(fixture, stranger, passes["valid"], "n-2")),
        refused(_request(fixture, key, None, "n-3")),
        refused(_request(fixture, key, passes["notCompliant"], "n-4")),
        refused(_request(fixture, key, passes["valid"], "n-5"), lost_compliance_at=42),
    }
    for name in ["expired", "tamperedClaims", "unknownKey", "otherIssuer", "truncated", "wrongType",
                 "notYetValid", "badSubject"]:
        seen.add(refused(_request(fixture, key, passes[name], f"n-{name}")))
    seen.add(refused(_request(fixture, key, passes["valid"], "n-6"), chain_id=fixture["chainId"],
                     registry=fixture["wallet"]))
    tampered = _request(fixture, key, passes["valid"], "n-7")
    tampered["body"] = '{"prompt":"rm -rf"}'
    seen.add(refused(tampered))
    seen.add(refused(_request(fixture, key, passes["valid"], "n-8"), authority="api.other.example"))
    assert seen == {
        ("pass", "not_the_signer"), ("pass", "no_pass"), ("pass", "not_compliant"), ("pass", "revoked"),
        ("pass", "expired"), ("pass", "bad_signature"), ("pass", "unknown_key"), ("pass", "wrong_issuer"),
        ("pass", "malformed"), ("pass", "wrong_type"), ("pass", "not_yet_valid"), ("pass", "bad_subject"),
        ("pass", "wrong_registry"), ("signature", "digest_mismatch"), ("signature", "wrong_authority"),
    }
    # wrong_chain: a pass for another chain than the provider trusts; the request is signed for
    # the provider's own chain, so only the pass can be wrong.
    other = trust | {"chain_id": fixture["chainId"] + 1}
    request = kya.sign_request("POST", URL, chain_id=fixture["chainId"] + 1, private_key=key, body=BODY,
                               created=fixture["now"], nonce="n-9")
    headers = dict(request["headers"]) | {kya.PASS_HEADER: passes["valid"]}
    verdict = kya.verify_agent_request("POST", URL, headers, body=BODY, authority="api.provider.example",
                                       now=fixture["now"] + 1, **other)
    assert (verdict["outcome"], verdict.get("stage"), verdict.get("reason")) == ("refused", "pass", "wrong_chain")
    # A pass from before a loss the feed reported is revoked; one from after it is not.
    later = _admit(fixture, trust, _request(fixture, key, passes["valid"], "n-10"), lost_compliance_at=41)
    assert later["outcome"] == "admitted"
    with pytest.raises(kya.InvalidInput, match="authority is required"):
        _admit(fixture, trust, _request(fixture, key, passes["valid"], "n-11"), authority="")
