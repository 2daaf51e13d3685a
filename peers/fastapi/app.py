"""GET /v1/meetings and GET /v1/meetings/{id} over PostgreSQL with FastAPI, uvicorn and
asyncpg: the read API most teams would write first, kept as the common baseline of
scripts/peers/bench.sh. Same schema, JSON, checks and their order as the axum peer
(peers/axum-postgres/src/main.rs): bearer token (SHA-256 looked up in `tokens` joined to
`accounts`, kept TOKEN_CACHE_MS), plan, parameters, per-minute limit, period quota,
quota headers; cursors sealed like recap's with CURSOR_SECRET_FILE. JSONB columns are
decoded to Python objects and the response is rendered by FastAPI's JSONResponse, as an
idiomatic FastAPI service does.

Run: DATABASE_URL=postgresql://recap@127.0.0.1:54329/recap uvicorn app:app --port 8091
"""
import base64
import hashlib
import hmac
import json
import os
import time
import uuid
from datetime import datetime, timezone

import asyncpg
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

app = FastAPI()
LIST_COLUMNS = "id, title, kind, status, started_at, ended_at, created_at, updated_at, series_id"
TOKEN_CACHE_SECONDS = int(os.environ.get("TOKEN_CACHE_MS", "1000")) / 1000
PER_MINUTE = int(os.environ.get("RATE_LIMIT_PER_MINUTE", "120"))
DEFAULT_QUOTA = int(os.environ.get("DEFAULT_API_QUOTA", "50000"))
SECRET = open(os.environ["CURSOR_SECRET_FILE"], "rb").read() if os.environ.get("CURSOR_SECRET_FILE") else b"peer-cursor-secret"
state = {"pool": None, "tokens": {}, "counts": {}}


def ts(instant):
    if instant is None:
        return None
    text = instant.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    micro = instant.microsecond
    if micro and micro % 1000 == 0:
        text += f".{micro // 1000:03d}"
    elif micro:
        text += f".{micro:06d}"
    return text + "Z"


def error(status, code, message, headers=None, **extra):
    return JSONResponse({"error": {"code": code, "message": message, **extra}}, status_code=status, headers=headers)


class Refused(Exception):
    def __init__(self, response):
        self.response = response


def add_months(instant, months):
    month = instant.month - 1 + months
    year, month = instant.year + month // 12, month % 12 + 1
    days = [31, 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    return instant.replace(year=year, month=month, day=min(instant.day, days))


def period_end(anchor, now):
    months = max(0, (now.year - anchor.year) * 12 + now.month - anchor.month)
    while months > 0 and add_months(anchor, months) > now:
        months -= 1
    while add_months(anchor, months + 1) <= now:
        months += 1
    return add_months(anchor, months + 1)


@app.on_event("startup")
async def startup():
    async def init(connection):
        await connection.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")

    size = int(os.environ.get("PG_CONNECTIONS", "2"))
    state["pool"] = await asyncpg.create_pool(os.environ.get("DATABASE_URL", "postgresql://recap@127.0.0.1:54329/recap"), min_size=size, max_size=size, init=init)


async def authenticate(request):
    header = request.headers.get("authorization")
    if not header or " " not in header:
        raise Refused(error(401, "unauthorized", "missing, malformed or unknown token", {"WWW-Authenticate": "Bearer"}))
    scheme, token = header.split(" ", 1)
    token = token.strip()
    if scheme.lower() != "bearer" or " " in token or not token.startswith("svc_pat_") or len(token) <= 8:
        raise Refused(error(401, "unauthorized", "missing, malformed or unknown token", {"WWW-Authenticate": "Bearer"}))
    digest = hashlib.sha256(token.encode()).hexdigest()
    kept = state["tokens"].get(digest)
    if kept and time.monotonic() - kept[0] < TOKEN_CACHE_SECONDS:
        caller = kept[1]
    else:
        fetched_at = time.monotonic()
        row = await state["pool"].fetchrow(
            "SELECT t.account_id, t.revoked, a.plan_tier, a.api_quota, a.billing_cycle_anchor "
            "FROM tokens t LEFT JOIN accounts a ON a.account_id = t.account_id WHERE t.token_sha256 = $1", digest)
        if row is None:
            raise Refused(error(401, "unauthorized", "missing, malformed or unknown token", {"WWW-Authenticate": "Bearer"}))
        caller = dict(row)
        if TOKEN_CACHE_SECONDS > 0:
            state["tokens"][digest] = (fetched_at, caller)
    if caller["revoked"]:
        raise Refused(error(401, "token_revoked", "the token was revoked", {"WWW-Authenticate": 'Bearer error="invalid_token"'}))
    if caller["plan_tier"] is None:
        raise Refused(error(402, "no_plan", "the account has no active plan"))
    if caller["plan_tier"] not in ("flow", "enterprise"):
        raise Refused(error(402, "feature_not_included", "the account's plan does not include the REST API", feature="public_api"))
    return caller


def admit(caller):
    now = datetime.now(timezone.utc)
    second = int(now.timestamp())
    quota = caller["api_quota"] or DEFAULT_QUOTA
    anchor = caller["billing_cycle_anchor"] or datetime(1970, 1, 1, tzinfo=timezone.utc)
    counts = state["counts"].get(caller["account_id"])
    if counts is None or now >= counts["end"]:
        counts = state["counts"][caller["account_id"]] = {"seconds": {}, "end": period_end(anchor, now), "used": 0}
    seconds = {at: count for at, count in counts["seconds"].items() if second - at < 60}
    counts["seconds"] = seconds
    in_minute = sum(seconds.values())
    oldest = min(seconds) if seconds else second
    if in_minute >= PER_MINUTE:
        raise Refused(error(429, "rate_limited", "too many requests in the last minute", {"Retry-After": str(max(1, oldest + 60 - second))}))
    if counts["used"] >= quota:
        raise Refused(error(402, "quota_exhausted", "the billing period's requests are used up", used=counts["used"], limit=quota, resets_at=ts(counts["end"])))
    seconds[second] = seconds.get(second, 0) + 1
    counts["used"] += 1
    return {
        "X-Quota-Limit": str(quota),
        "X-Quota-Remaining": str(max(0, quota - counts["used"])),
        "X-Quota-Reset": ts(counts["end"]),
        "RateLimit-Policy": f'"minute";q={PER_MINUTE};w=60',
        "RateLimit": f'"minute";r={PER_MINUTE - in_minute - 1};t={oldest + 60 - second}',
    }


# Cursors as recap seals them: the key as JSON padded with spaces to a multiple of 32
# bytes, AES-256-GCM-SIV under a key derived from the secret, the binding as associated
# data, a fixed nonce, behind a first byte 1.
SEALING = AESGCMSIV(hmac.new(SECRET, b"recap cursor sealing key v1", hashlib.sha256).digest())
NONCE = bytes(12)


def issue_cursor(binding, created_micros, meeting_id):
    payload = json.dumps([created_micros, meeting_id], separators=(",", ":"), ensure_ascii=False).encode()
    payload = payload.ljust(max(32, -(-len(payload) // 32) * 32))
    return base64.urlsafe_b64encode(b"\x01" + SEALING.encrypt(NONCE, payload, binding.encode())).decode().rstrip("=")


def open_cursor(binding, cursor):
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        if len(cursor) > 1024 or raw[:1] != b"\x01":
            return None
        payload = SEALING.decrypt(NONCE, raw[1:], binding.encode())
        created_micros, meeting_id = json.loads(payload)
        return datetime.fromtimestamp(created_micros // 1_000_000, timezone.utc).replace(microsecond=created_micros % 1_000_000), meeting_id
    except Exception:
        return None


def request_id(request):
    incoming = request.headers.get("x-request-id", "")
    if 1 <= len(incoming) <= 128 and all(c.isascii() and (c.isalnum() or c in "._:-") for c in incoming):
        return incoming
    return str(uuid.uuid4())


def entry(row):
    return {"id": row["id"], "title": row["title"], "kind": row["kind"], "status": row["status"], "started_at": ts(row["started_at"]),
            "ended_at": ts(row["ended_at"]), "created_at": ts(row["created_at"]), "updated_at": ts(row["updated_at"]), "series_id": row["series_id"]}


def only(request, name):
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise Refused(error(400, "invalid_request", "given more than once", param=name))
    return values[0] if values else None


@app.get("/v1/meetings")
async def meetings(request: Request):
    rid = request_id(request)
    try:
        caller = await authenticate(request)
        text = only(request, "limit")
        if text is None:
            limit = 50
        elif not text.isdigit() or not text.isascii() or not 1 <= int(text) <= 200:
            raise Refused(error(400, "invalid_request", "limit is an integer from 1 to 200", param="limit"))
        else:
            limit = int(text)
        binding = json.dumps(["meetings", caller["account_id"], None, None], separators=(",", ":"), ensure_ascii=False)
        cursor = only(request, "cursor")
        after = None
        if cursor is not None:
            after = open_cursor(binding, cursor)
            if after is None:
                raise Refused(error(400, "invalid_request", "cursor is not a next_cursor this endpoint issued", param="cursor"))
        headers = admit(caller)
    except Refused as refused:
        refused.response.headers["X-Request-Id"] = rid
        return refused.response
    if after is None:
        rows = await state["pool"].fetch(f"SELECT {LIST_COLUMNS} FROM meetings WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
                                         caller["account_id"], limit + 1)
    else:
        rows = await state["pool"].fetch(
            f"SELECT {LIST_COLUMNS} FROM meetings WHERE account_id = $1 AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $4",
            caller["account_id"], after[0], after[1], limit + 1)
    has_more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = None
    if has_more and rows:
        last = rows[-1]
        created = last["created_at"]
        next_cursor = issue_cursor(binding, int(created.timestamp()) * 1_000_000 + created.microsecond, last["id"])
    headers["X-Request-Id"] = rid
    return JSONResponse({"data": [entry(row) for row in rows], "has_more": next_cursor is not None, "next_cursor": next_cursor}, headers=headers)


@app.get("/v1/meetings/{meeting_id}")
async def meeting(meeting_id: str, request: Request):
    rid = request_id(request)
    try:
        caller = await authenticate(request)
        if not 1 <= len(meeting_id.encode()) <= 256:
            raise Refused(error(400, "invalid_request", "meeting_id is 1 to 256 bytes of UTF-8", param="meeting_id"))
        headers = admit(caller)
    except Refused as refused:
        refused.response.headers["X-Request-Id"] = rid
        return refused.response
    headers["X-Request-Id"] = rid
    row = await state["pool"].fetchrow(
        f"SELECT {LIST_COLUMNS}, timezone, language, note, summaries, participants, action_items FROM meetings WHERE account_id = $1 AND id = $2",
        caller["account_id"], meeting_id)
    if row is None:
        return error(404, "meeting_not_found", "no such meeting", headers)
    detail = entry(row)
    detail.update(timezone=row["timezone"], language=row["language"], note=row["note"], summaries=row["summaries"],
                  participants=row["participants"], action_items=row["action_items"])
    return JSONResponse({"data": detail}, headers=headers)
