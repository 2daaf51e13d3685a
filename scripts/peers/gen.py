"""The comparison's data, written twice from the same values: contract events for recap
(`events.jsonl`, appended with `recap events append`) and the rows the Postgres peers
serve (`accounts.csv`, `tokens.csv`, `meetings.csv`, loaded with COPY).

Two flow-plan accounts, each with one token: `acc_small` with 1,000 meetings and
`acc_large` with 100,000, made like benches/http.rs makes its world (one meeting a
minute, a note, a summary, two participants, an action item, titles of eight topics).
Usage: gen.py <output dir>
"""
import csv
import hashlib
import json
import os
import sys
import uuid
from datetime import datetime, timedelta, timezone

ACCOUNTS = {"acc_small": 1_000, "acc_large": 100_000}
TOKENS = {"acc_small": "svc_pat_peerbenchsmall00000000000000", "acc_large": "svc_pat_peerbenchlarge00000000000000"}
TOPICS = ["Budget review", "Design sync", "Hiring debrief", "Customer call", "Roadmap planning", "Incident retro", "Sales pipeline", "Weekly sync"]
BASE = datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)  # 1,700,000,000 s
ANCHOR = "2026-01-01T00:00:00Z"
QUOTA = 1_000_000_000_000


def ts(instant):
    """As recap renders instants: UTC with Z, fractional seconds only when present."""
    text = instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    # chrono's AutoSi: milliseconds when they suffice, else microseconds.
    if instant.microsecond % 1000 == 0 and instant.microsecond:
        text += f".{instant.microsecond // 1000:03d}"
    elif instant.microsecond:
        text += f".{instant.microsecond:06d}"
    return text + "Z"


def meeting(account, index):
    short = account.split("_")[1][0]
    created = BASE + timedelta(minutes=index)
    title = f"{TOPICS[index % len(TOPICS)]} {'escalation ' if index % 100 == 7 else ''}{index}"
    return {
        "id": f"mtg_{short}{index:06d}",
        "title": title,
        "kind": "call",
        "status": "done",
        "started_at": ts(created),
        "ended_at": ts(created + timedelta(minutes=30)),
        "created_at": ts(created),
        # Every third meeting was edited a moment later: fractional seconds are rendered too.
        "updated_at": ts(created + timedelta(minutes=31, microseconds=250_000 if index % 3 == 0 else 0)),
        "series_id": f"ser_{index % 50}" if index % 4 == 0 else None,
        "timezone": "Europe/Berlin",
        "language": "en",
        "note": {"id": f"n{short}{index}", "kind": "note", "title": title, "template_id": None, "text": "Agenda\nBudget\nHiring",
                 "created_at": ts(created), "updated_at": ts(created + timedelta(minutes=31))},
        "summaries": [{"id": f"s{short}{index}", "kind": "summary", "title": "Summary", "template_id": None,
                       "text": "We agreed on the plan.", "created_at": ts(created + timedelta(minutes=31)), "updated_at": ts(created + timedelta(minutes=31))}],
        "participants": [{"human_id": "hum_1", "name": "Ada", "email": "ada@example.com", "role": None, "job_title": "CTO"},
                         {"human_id": "hum_2", "name": "Grace", "email": "grace@example.com", "role": "host", "job_title": "Engineer"}],
        "action_items": [{"id": f"ai{short}{index}", "text": "Follow up", "status": "todo", "assignee_human_id": "hum_1", "due_at": None,
                          "completed_at": None, "created_at": ts(created + timedelta(minutes=30))}],
    }


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    serial = 0

    def envelope(kind, data, version=1):
        nonlocal serial
        serial += 1
        return json.dumps({"id": str(uuid.UUID(int=serial)), "type": kind, "version": version, "occurred_at": ts(BASE), "data": data},
                          separators=(",", ":"), ensure_ascii=False) + "\n"

    with open(f"{out}/events.jsonl", "w") as events, open(f"{out}/meetings.csv", "w", newline="") as meetings_file, \
            open(f"{out}/accounts.csv", "w", newline="") as accounts_file, open(f"{out}/tokens.csv", "w", newline="") as tokens_file:
        meetings_csv, accounts_csv, tokens_csv = csv.writer(meetings_file), csv.writer(accounts_file), csv.writer(tokens_file)
        for account, count in ACCOUNTS.items():
            events.write(envelope("account.upserted", {"account_id": account, "plan": {"tier": "flow", "api_quota": QUOTA, "billing_cycle_anchor": ANCHOR}}))
            accounts_csv.writerow([account, "flow", QUOTA, ANCHOR])
            sha = hashlib.sha256(TOKENS[account].encode()).hexdigest()
            token_id = f"tok_{account}"
            events.write(envelope("token.created", {"account_id": account, "token_id": token_id, "name": "bench", "token_sha256": sha, "created_at": ts(BASE)}))
            tokens_csv.writerow([sha, token_id, account, "f"])
            for index in range(count):
                m = meeting(account, index)
                events.write(envelope("meeting.upserted", {"account_id": account, "meeting": m}))
                # The detail form of an action item has no created_at (docs/rest.md).
                items = [{key: value for key, value in item.items() if key != "created_at"} for item in m["action_items"]]
                dumps = lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False)
                meetings_csv.writerow([account, m["id"], m["title"], m["kind"], m["status"], m["started_at"], m["ended_at"], m["created_at"],
                                       m["updated_at"], m["series_id"] or "", m["timezone"], m["language"], dumps(m["note"]),
                                       dumps(m["summaries"]), dumps(m["participants"]), dumps(items)])
    with open(f"{out}/tokens.json", "w") as tokens:
        json.dump({account: {"token": TOKENS[account], "meetings": count, "prefix": f"mtg_{account.split('_')[1][0]}"} for account, count in ACCOUNTS.items()}, tokens)


if __name__ == "__main__":
    main()
