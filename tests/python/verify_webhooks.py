"""Verifies recorded webhook deliveries with the official Standard Webhooks library.

Reads JSON Lines from the file named by WEBHOOKS_RECORDED: one request per line,
{"expect": "valid" | "tampered" | "stale", "headers": {...}, "body": "..."}, and the
endpoint's secret from WEBHOOK_SECRET. A "valid" request must verify; a "tampered" or
"stale" one must be refused, for that reason (no matching signature, a timestamp too
old). Exits non-zero, naming the first request that does not
behave, otherwise prints how many of each kind behaved.
"""

import json
import os
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["WEBHOOK_SECRET"])
counts = {"valid": 0, "tampered": 0, "stale": 0}
# What the library says when it refuses each kind of bad request.
reasons = {"tampered": "No matching signature found", "stale": "Message timestamp too old"}
with open(os.environ["WEBHOOKS_RECORDED"], encoding="utf-8") as recorded:
    for number, line in enumerate(recorded, start=1):
        request = json.loads(line)
        expect = request["expect"]
        try:
            payload = webhook.verify(request["body"], request["headers"])
            verified = True
        except WebhookVerificationError as error:
            verified = False
            reason = str(error)
        if expect == "valid":
            if not verified:
                sys.exit(f"request {number} ({request['headers'].get('webhook-id')}) did not verify: {reason}")
            if payload.get("id") != request["headers"]["webhook-id"]:
                sys.exit(f"request {number}: the body's id is not the webhook-id header")
        elif verified:
            sys.exit(f"request {number} was {expect} and still verified")
        elif reason != reasons[expect]:
            sys.exit(f"request {number} was {expect} but refused for another reason: {reason}")
        counts[expect] += 1
print(json.dumps(counts))
