"""A provider admitting agents offline: the Gate checks each request's ERC-8128 signature and
KYA pass with the issuer's keys (fetched once, kept as their Cache-Control allows), with no call
to the API per request. A standard-library server, so the example needs nothing else.

    KYA_API_URL=https://kya.example REGISTRY=0x... python provider.py 8080
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kya

GATE = kya.Gate(
    api_url=os.environ.get("KYA_API_URL", "https://kya.example"),
    authority=os.environ.get("PROVIDER_AUTHORITY", "api.provider.example"),
    chain_id=int(os.environ.get("CHAIN_ID", "84532")),
    registry=os.environ.get("REGISTRY", "0x0000000000000000000000000000000000000000"),
)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = f"https://{GATE.authority}{self.path}"
        try:
            admission = GATE.admit(self.command, url, self.headers.items(), body)
        except kya.IssuerKeysUnavailable as error:
            self.answer(503, {"error": str(error)})
            return
        if not admission.admitted:
            self.answer(admission.status, {"reason": admission.reason, "message": admission.message})
            return
        self.answer(200, {"hello": admission.signer})

    def answer(self, status: int, document: dict[str, object]) -> None:
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
