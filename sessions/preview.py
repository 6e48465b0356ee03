"""The live preview: an authenticated reverse proxy into the session's sandbox.

`/sessions/<id>/preview/<path>` forwards the request to the recipe's preview port on the
sandbox's own loopback, through the backend's door into the sandbox (`Sandbox.connect_port`;
the local backend goes through the sandbox's command server, so it works with no network
egress at all). Only members of the session's repository get through; everyone else gets the
same 404 as for a session that does not exist. The link lives as long as the sandbox: once the
sandbox is reaped, the preview is a 404 that says so.

The application is agent-written code served from the dashboard's origin, so its responses are
confined: a `Content-Security-Policy: sandbox` header gives its pages an opaque origin (their
scripts cannot read the dashboard's cookies or call it as the viewer), and it may not set
cookies. The viewer's own cookies and credentials are never forwarded.
"""

from __future__ import annotations

import http.client
import logging
import socket
from dataclasses import dataclass

from snapshots.recipe import Preview
from snapshots.sandbox import Sandbox, SandboxError, SandboxGone

log = logging.getLogger(__name__)

MAX_RESPONSE = 50 * 1024 * 1024
TIMEOUT = 30.0
HOP_BY_HOP = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
        "trailer", "trailers", "transfer-encoding", "upgrade", "content-length",
    }
)  # fmt: skip
# Never forwarded into the sandbox: the viewer's credentials for the dashboard.
PRIVATE_REQUEST_HEADERS = frozenset({"cookie", "authorization", "x-csrftoken", "host"})
# Never passed back: the application may not set cookies on the dashboard's origin.
PRIVATE_RESPONSE_HEADERS = frozenset({"set-cookie", "set-cookie2"})
CONFINE = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"


class PreviewUnavailable(Exception):
    """No preview to show (no recipe preview, no live sandbox); the message says why and what
    to do. `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 404) -> None:
        super().__init__(message)
        self.status = status


class PreviewNotRunning(PreviewUnavailable):
    """Nothing listens on the preview port (yet)."""


@dataclass
class ProxiedResponse:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes


def live_sandbox(session) -> Sandbox:
    """The session's live sandbox, or PreviewUnavailable (404) when it is gone."""
    from snapshots.backends import sandbox_backend

    gone = (
        "This session's sandbox is not running any more (it stops after a while idle), so "
        "there is nothing to preview. Queue a prompt to start it again."
    )
    if not session.sandbox_id:
        raise PreviewUnavailable(gone)
    try:
        return sandbox_backend(session.sandbox_backend or None).attach(session.sandbox_id)
    except SandboxGone:
        raise PreviewUnavailable(gone) from None


def session_preview(session) -> Preview:
    from snapshots.restore import recipe_of

    recipe = recipe_of(session.snapshot) if session.snapshot else None
    if recipe is None or recipe.preview is None:
        raise PreviewUnavailable(
            f"{session.repository.name}'s recipe has no `preview`; add one to "
            '.inspect/environment.toml, e.g. preview = { command = "python3 -m http.server '
            '8000", url = "http://127.0.0.1:8000/" }'
        )
    return recipe.preview


def open_preview(sandbox: Sandbox, preview: Preview, *, start: bool = True) -> socket.socket:
    """A connection to the preview port; starts the preview first when nothing listens."""
    from sessions.screenshots import PreviewError, preview_port, start_preview

    port = preview_port(preview)
    try:
        return sandbox.connect_port(port, timeout=TIMEOUT)
    except ConnectionRefusedError:
        if not start:
            raise PreviewNotRunning("The preview is not running.", status=502) from None
    except SandboxError as exc:  # e.g. a backend with no door into its sandboxes
        raise PreviewUnavailable(f"The preview cannot be reached: {exc}", status=502) from None
    try:
        start_preview(sandbox, preview)
        return sandbox.connect_port(port, timeout=TIMEOUT)
    except (PreviewError, ConnectionRefusedError) as exc:
        raise PreviewUnavailable(f"The preview did not start: {exc}", status=502) from None
    except SandboxError as exc:
        raise PreviewUnavailable(f"The sandbox could not be reached: {exc}", status=502) from None


def forward(
    sock: socket.socket,
    *,
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes,
    port: int,
    prefix: str,
) -> ProxiedResponse:
    """Send one HTTP request over `sock` (already connected to the preview) and read the
    whole response (at most MAX_RESPONSE bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    sock.settimeout(TIMEOUT)
    conn.sock = sock  # already connected: through the sandbox's door, not TCP from here
    outgoing = {
        name: value
        for name, value in headers.items()
        if name.lower() not in HOP_BY_HOP | PRIVATE_REQUEST_HEADERS
    }
    outgoing.update(
        {
            "Host": f"127.0.0.1:{port}",
            "Connection": "close",
            "X-Forwarded-Prefix": prefix.rstrip("/"),
        }
    )
    try:
        conn.request(method, target, body=body or None, headers=outgoing)
        response = conn.getresponse()
        data = response.read(MAX_RESPONSE + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise PreviewUnavailable(f"The preview did not answer: {exc}", status=502) from None
    finally:
        conn.close()
    if len(data) > MAX_RESPONSE:
        raise PreviewUnavailable("The preview's response is larger than 50 MB.", status=502)
    kept = []
    for name, value in response.getheaders():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower in PRIVATE_RESPONSE_HEADERS:
            continue
        if lower == "location" and value.startswith("/") and not value.startswith("//"):
            value = prefix.rstrip("/") + value  # keep redirects inside the preview
        kept.append((name, value))
    return ProxiedResponse(response.status, response.reason, kept, data)
