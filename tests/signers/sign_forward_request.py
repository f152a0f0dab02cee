"""Signs a forwarder ForwardRequest with eth-account: an EIP-712 implementation independent of
kya-core's, used by the relayer's end-to-end tests.

A job:    {"key": "0x…", "chainId": 84532, "verifyingContract": "0x…",
           "request": {"from", "to", "value", "gas", "nonce", "deadline", "data"}}
          (numbers as JSON numbers or decimal strings, data as 0x-hex)
Answered: {"digest": "0x…", "signature": "0x…" (65 bytes: r, s, v with v in {27, 28})}
Jobs come one a line on stdin, each answered on a line of stdout (kya_tests::run_python).
"""

import json
import sys
import traceback

from eth_account import Account

TYPES = {
    "EIP712Domain": [
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"},
        {"name": "verifyingContract", "type": "address"},
    ],
    "ForwardRequest": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "gas", "type": "uint256"},
        {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint48"},
        {"name": "data", "type": "bytes"},
    ],
}


def answer(job: dict) -> dict:
    request = job["request"]
    message = {
        "from": request["from"],
        "to": request["to"],
        "value": int(request["value"]),
        "gas": int(request["gas"]),
        "nonce": int(request["nonce"]),
        "deadline": int(request.get("deadline", 0)),
        "data": bytes.fromhex(request["data"].removeprefix("0x")),
    }
    typed = {
        "types": TYPES,
        "primaryType": "ForwardRequest",
        "domain": {
            "name": "MinimalForwarder",
            "version": "1",
            "chainId": int(job["chainId"]),
            "verifyingContract": job["verifyingContract"],
        },
        "message": message,
    }
    signed = Account.sign_typed_data(job["key"], full_message=typed)
    return {
        "digest": "0x" + bytes(signed.message_hash).hex(),
        "signature": "0x" + bytes(signed.signature).hex(),
    }


if __name__ == "__main__":
    # One process answers every job of a test process: Python and eth-account load once.
    for line in sys.stdin:
        try:
            print(json.dumps({"answer": answer(json.loads(line))}), flush=True)
        except Exception:  # noqa: BLE001: the test fails with the traceback
            print(json.dumps({"failure": traceback.format_exc()}), flush=True)
