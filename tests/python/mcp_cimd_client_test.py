"""Real-client check of Client ID Metadata Documents with the official MCP Python SDK 2.x,
pinned to MCP 2026-07-28.

    MCP_URL=http://127.0.0.1:PORT/mcp RECAP_PAT=svc_pat_... \\
    RECAP_CIMD_CERT=leaf.pem RECAP_CIMD_KEY=leaf-key.pem python tests/python/mcp_cimd_client_test.py

The client's metadata document is served here, over https on 127.0.0.1 with the
certificate the Rust test made with its own CA (the server under test trusts that CA
through --mcp-cimd-extra-ca-file). The SDK's OAuth provider is given the document's URL
as client_metadata_url: seeing client_id_metadata_document_supported in the server's
metadata, the SDK uses the URL as its client_id instead of registering. The consent
page is answered over HTTP with the PAT, and every tool called with the svc_oat_ token.
Every request the SDK sent is recorded: none is to /register. The first line printed
names the URL, for the Rust test to find it in the server's debug log. Exits non-zero on
the first failed check.
"""

import http.server
import json
import os
import ssl
import threading
import urllib.parse

import httpx2

from common import REDIRECT_URI, MemoryStorage, check, main, oauth_provider
from mcp_client_test import Browser
from mcp_modern_client_test import MODERN, call_every_tool, modern_client

DOCUMENT_PATH = "/oauth/recap-cimd-client.json"
CLIENT_NAME = "recap CIMD test (Python SDK 2)"


class DocumentServer(http.server.ThreadingHTTPServer):
    """The https server of the metadata document; keeps what it was asked."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), DocumentHandler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(os.environ["RECAP_CIMD_CERT"], os.environ["RECAP_CIMD_KEY"])
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server_address[1]}{DOCUMENT_PATH}"
        self.requests = []


class DocumentHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append(f"GET {self.path}")
        if self.path != DOCUMENT_PATH:
            self.answer(404, {}, {})
            return
        document = {
            "client_id": self.server.url,
            "client_name": CLIENT_NAME,
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        self.answer(200, document, {"cache-control": "max-age=300"})

    def do_POST(self):
        self.server.requests.append(f"POST {self.path}")
        self.answer(404, {}, {})

    def answer(self, status, body, headers):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        # The server's own access log would interleave with the checks' output.
        pass


async def authorize_with_the_document(document):
    print(f"OAuth, pinned to {MODERN}, the client named by its metadata document")
    sent = []

    async def record(request):
        sent.append(f"{request.method} {request.url.path}")

    storage = MemoryStorage()
    browser = Browser()
    authorization_urls = []

    async def open_page(authorization_url):
        authorization_urls.append(authorization_url)
        await browser.open(authorization_url)

    provider = oauth_provider(CLIENT_NAME, storage, browser, redirect_handler=open_page, client_metadata_url=document.url)
    async with httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"request": [record]}) as http:
        async with modern_client(http) as client:
            await call_every_tool(client)

    check(len(authorization_urls) == 1, f"the provider sent the user to the authorization page once: {authorization_urls}")
    query = urllib.parse.parse_qs(urllib.parse.urlparse(authorization_urls[0]).query)
    check(query.get("client_id") == [document.url], f"the page was asked for the document's URL: {authorization_urls[0]}")
    check(storage.client_info is not None and storage.client_info.client_id == document.url, f"the document's URL is the client_id: {storage.client_info}")
    check(storage.tokens is not None and storage.tokens.access_token.startswith("svc_oat_"), f"an svc_oat_ token: {storage.tokens}")
    print("  authorized as the metadata document's URL; every tool with svc_oat_: ok")

    check(not any(request.endswith("/register") for request in sent), f"the SDK registered: {sent}")
    check(any(request in ("POST /mcp/token", "POST /token") for request in sent), f"the code was exchanged: {sent}")
    check(document.requests and all(request == f"GET {DOCUMENT_PATH}" for request in document.requests), f"the document server was asked: {document.requests}")
    print(f"document requests {len(document.requests)}")


async def checks():
    document = DocumentServer()
    threading.Thread(target=document.serve_forever, daemon=True).start()
    try:
        print(f"client_id {document.url}", flush=True)
        await authorize_with_the_document(document)
        print("all python sdk 2.x metadata document checks passed")
    finally:
        document.shutdown()
        document.server_close()


if __name__ == "__main__":
    main(checks)
