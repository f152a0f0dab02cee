"""Verifies webhook deliveries with Python's standardwebhooks package, an implementation of
Standard Webhooks independent of the relayer's.

A job is {"secret": "...", "deliveries": [{"headers": {...}, "body": "...", "at": null|unix}]};
"at" checks a delivery as if it arrived at that time (a replay, later). Answered with one
{"error": null|"..."} per delivery, in order. Jobs come one a line on stdin, each answered on a
line of stdout (kya_tests::run_python).
"""

import json
import sys
import traceback
from datetime import timezone

import standardwebhooks.webhooks as webhooks
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

REAL_DATETIME = webhooks.datetime


def clock_at(seconds):
    """A datetime class whose now() is `seconds`: the package reads its clock through it."""

    class At(REAL_DATETIME):
        @classmethod
        def now(cls, tz=None):
            return REAL_DATETIME.fromtimestamp(seconds, tz=tz or timezone.utc)

    return At


def answer(job):
    secret = job["secret"]
    # A raw secret is its text's bytes; the package decodes a str as base64, so pass bytes.
    webhook = Webhook(secret if secret.startswith("whsec_") else secret.encode())
    answers = []
    for delivery in job["deliveries"]:
        webhooks.datetime = REAL_DATETIME if delivery["at"] is None else clock_at(delivery["at"])
        try:
            webhook.verify(delivery["body"], delivery["headers"])
            answers.append({"error": None})
        except WebhookVerificationError as error:
            answers.append({"error": str(error)})
        finally:
            webhooks.datetime = REAL_DATETIME
    return answers


if __name__ == "__main__":
    # One process answers every job of a test process: Python and the package load once.
    for line in sys.stdin:
        try:
            print(json.dumps({"answer": answer(json.loads(line))}), flush=True)
        except Exception:  # noqa: BLE001: the test fails with the traceback
            print(json.dumps({"failure": traceback.format_exc()}), flush=True)
