"""What the Python real-client checks share, whichever line of the MCP Python SDK runs them.

The tools and calls every client checks, an in-memory token storage, and a "browser"
that answers the consent page as a user would (it opens the page, types the personal
access token, approves) and keeps the redirect with the code. Only names that SDK 1.x
and 2.x spell alike are used here: each check script reads results and builds the
callback answer in its own SDK's names.
"""

import asyncio
import html.parser
import os
import sys
import traceback
import urllib.parse

from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

try:
    # SDK 2.x's HTTP client.
    import httpx2 as httpx
except ImportError:
    # SDK 1.x's: httpx, the same API under its first name.
    import httpx

MCP_URL = os.environ["MCP_URL"]
PAT = os.environ["RECAP_PAT"]
MEETING_ID = os.environ.get("RECAP_MEETING_ID", "mtg_weekly_1")
SHARE_ID = os.environ.get("RECAP_SHARE_ID", "shr_team")
REDIRECT_URI = "http://127.0.0.1:47999/callback"

EXPECTED_TOOLS = [
    "list_meetings",
    "get_meeting",
    "get_meeting_transcript",
    "get_recurring_meeting_history",
    "search_meetings",
    "list_pending_action_items",
    "search_shared_notes",
    "get_shared_note",
    "list_recent_changes",
]


# One call of every tool, with arguments that find the world the Rust test seeded.
CALLS = {
    "list_meetings": {"limit": 5},
    "get_meeting": {"meeting_id": MEETING_ID},
    "get_meeting_transcript": {"meeting_id": MEETING_ID, "limit": 2},
    "get_recurring_meeting_history": {"meeting_id": MEETING_ID},
    "search_meetings": {"query": "weekly"},
    "list_pending_action_items": {},
    "search_shared_notes": {"query": "budget"},
    "get_shared_note": {"share_id": SHARE_ID},
    "list_recent_changes": {"limit": 5},
}


def check(condition, message):
    if not condition:
        raise AssertionError(message)


class MemoryStorage(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull):
        self.client_info = client_info


class FormReader(html.parser.HTMLParser):
    """The consent page's form: its action and its hidden fields."""

    def __init__(self):
        super().__init__()
        self.action = None
        self.method = None
        self.fields = {}
        self.inputs = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.action, self.method = attrs.get("action"), attrs.get("method")
        if tag == "input":
            self.inputs.append(attrs.get("name"))
            if attrs.get("type") == "hidden":
                self.fields[attrs["name"]] = attrs.get("value", "")


class ConsentBrowser:
    """Answers the authorization page as a user would: open it, type the PAT, approve.

    Each SDK line hands the code back to its OAuth provider in its own shape, so the
    scripts add the `callback` their provider calls.
    """

    def __init__(self):
        self.redirect = None

    async def open(self, authorization_url: str):
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as http:
            page = await http.get(authorization_url)
            check(page.status_code == 200, f"authorize page: {page.status_code} {page.text[:300]}")
            check("svc:read" in page.text, "the page names the scope")
            form = FormReader()
            form.feed(page.text)
            check(form.method and form.method.upper() == "POST" and "pat" in form.inputs, f"a POST form with a pat input: {form.inputs}")
            target = urllib.parse.urljoin(authorization_url, form.action)
            answer = await http.post(target, data={**form.fields, "pat": PAT, "decision": "approve"})
            check(answer.status_code in (302, 303), f"approval redirects: {answer.status_code} {answer.text[:300]}")
            self.redirect = answer.headers["location"]

    def redirect_query(self) -> dict:
        """The parameters of the redirect to the client's callback (code, state, iss)."""
        check(self.redirect.startswith(REDIRECT_URI + "?"), f"redirected to the registered URI: {self.redirect}")
        return {name: values[0] for name, values in urllib.parse.parse_qs(urllib.parse.urlparse(self.redirect).query).items()}


def oauth_provider(client_name, storage, browser, **options):
    """The SDK's OAuth client provider for the server, as a public client redirected to
    REDIRECT_URI whose consent page `browser` answers; `options` are the provider's
    other arguments (another `redirect_handler`, a `client_metadata_url`)."""
    return OAuthClientProvider(
        server_url=MCP_URL,
        client_metadata=OAuthClientMetadata(client_name=client_name, redirect_uris=[REDIRECT_URI], token_endpoint_auth_method="none"),
        storage=storage,
        **{"redirect_handler": browser.open, "callback_handler": browser.callback, **options},
    )


def main(checks):
    """Runs the checks; any failure is printed and exits non-zero."""
    try:
        asyncio.run(checks())
    except BaseException as error:  # noqa: BLE001 - report anything, including exception groups
        traceback.print_exc()
        print(f"FAILED: {error!r}", file=sys.stderr)
        sys.exit(1)
