"""Verifies webhook deliveries with Python's standardwebhooks package, an implementation of
Standard Webhooks independent of the relayer's.

Reads {"secret": "...", "deliveries": [{"headers": {...}, "body": "...", "at": null|unix}]} on
stdin; "at" checks a delivery as if it arrived at that time (a replay, later). Writes one
{"error": null|"..."} per delivery, in order, on stdout.
"""

import json
import sys
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


def main():
    job = json.load(sys.stdin)
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
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
