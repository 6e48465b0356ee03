"""The live preview: an authenticated reverse proxy into the session's sandbox.

`/sessions/<id>/preview/<path>` forwards the request to the recipe's preview port on the
sandbox's own loopback, through the backend's door into the sandbox (`Sandbox.connect_port`;
the local backend goes through the sandbox's command server, so it works with no network
egress at all). Only members of the session's repository get through; everyone else gets the
same 404 as for a session that does not exist. The link lives as long as the sandbox: once the
sandbox is reaped, the preview is a 404 that says so.

The application is agent-written code served from the dashboard's origin, so its responses are
confined: a `Content-Security-Policy: sandbox` header gives its pages an opaque origin (their
scripts cannot read the dashboard's cookies or call it as the viewer), only RESPONSE_HEADERS
come back (nothing that acts on the origin: cookies, Clear-Site-Data, HSTS, reporting, CORS),
and a redirect stays inside the preview or is refused. The viewer's own cookies and
credentials are never forwarded.
"""

from __future__ import annotations

import http.client
import logging
import re
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from sessions.screenshots import PreviewError, preview_port, start_preview
from snapshots.backends import sandbox_backend
from snapshots.recipe import Preview
from snapshots.restore import recipe_of
from snapshots.sandbox import Sandbox, SandboxError, SandboxGone

log = logging.getLogger(__name__)

MAX_RESPONSE = 50 * 1024 * 1024
DEFAULT_PORTS = {"http": 80, "https": 443}
APP_BASE = "http://preview.invalid"  # stands for the application when resolving redirects
C0_AND_SPACE = "".join(map(chr, range(33)))
TIMEOUT = 30.0
HOP_BY_HOP = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
        "trailer", "trailers", "transfer-encoding", "upgrade", "content-length",
    }
)  # fmt: skip
# Never forwarded into the sandbox: the viewer's credentials for the dashboard.
PRIVATE_REQUEST_HEADERS = frozenset({"cookie", "authorization", "x-csrftoken", "host"})
# The only response headers passed back: what a browser needs to show and cache the page,
# nothing that acts on the origin serving it. Everything else is dropped, notably Set-Cookie
# (cookies on the dashboard's origin), Clear-Site-Data (wipes the viewer's dashboard login),
# Strict-Transport-Security, NEL / Report-To / Reporting-Endpoints (the origin's reports sent
# to the app's collector), Access-Control-* (other sites reading the preview with the viewer's
# cookies), WWW-Authenticate (a password prompt shown as the dashboard's), Refresh (a redirect
# by another name), Link (preloads), Content-Security-Policy (ours applies) and custom X-/HX-.
# Cache-Control is set by the view (private, no-store); Location is rewritten or refused.
RESPONSE_HEADERS = frozenset(
    {
        "content-type", "content-encoding", "content-language", "content-disposition",
        "content-range", "accept-ranges", "etag", "last-modified", "vary", "allow",
        "retry-after", "location",
    }
)  # fmt: skip
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
    app_url: str = "",
) -> ProxiedResponse:
    """Send one HTTP request over `sock` (already connected to the preview) and read the
    whole response (at most MAX_RESPONSE bytes). Only RESPONSE_HEADERS come back; a redirect
    is rewritten into the preview, or refused (PreviewUnavailable, 502) when it leaves the
    application at `app_url`."""
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
        if lower in HOP_BY_HOP or lower not in RESPONSE_HEADERS:
            continue
        if lower == "location":
            inside = preview_location(value, prefix=prefix, target=target, app_url=app_url)
            if inside is None:
                raise PreviewUnavailable(
                    f"The preview redirected to {value!r}, outside the preview: not followed. "
                    "A preview may only redirect within its own application.",
                    status=502,
                )
            value = inside
        kept.append((name, value))
    return ProxiedResponse(response.status, response.reason, kept, data)


def _is_the_application(host: str, port: int, app_url: str) -> bool:
    """Whether host:port is the application itself: the preview URL's port, on its host or on
    one of the sandbox's loopback names (the proxy sends it `Host: 127.0.0.1:port`)."""
    if not app_url:
        return False
    app = urlsplit(app_url)
    app_port = app.port or DEFAULT_PORTS.get(app.scheme, 80)
    return port == app_port and host in {"127.0.0.1", "localhost", "::1", app.hostname or ""}


def preview_location(value: str, *, prefix: str, target: str, app_url: str) -> str | None:
    """A redirect's `Location` as an address inside the preview, or None for one that leaves
    the application at `app_url` (another host or port, or not http(s) at all)."""
    # Read it as a browser does: surrounding spaces and controls dropped, tabs and newlines
    # removed, backslashes taken as slashes (so "/\\evil.example" is "//evil.example").
    cleaned = value.strip(C0_AND_SPACE)
    cleaned = re.sub(r"[\t\n\r]", "", cleaned).replace("\\", "/")
    # Relative addresses resolve against the request's path in the application, so "../" can
    # climb to the application's root but never out of the preview.
    parts = urlsplit(urljoin(APP_BASE + (target or "/"), cleaned))
    if parts.scheme not in DEFAULT_PORTS:
        return None
    if f"{parts.scheme}://{parts.netloc}" != APP_BASE:  # absolute or scheme-relative: whose?
        try:
            port = parts.port or DEFAULT_PORTS[parts.scheme]
        except ValueError:  # a port that is not a number
            return None
        if not _is_the_application((parts.hostname or "").lower(), port, app_url):
            return None
    inside = prefix.rstrip("/") + (parts.path or "/")
    if parts.query:
        inside += "?" + parts.query
    if parts.fragment:
        inside += "#" + parts.fragment
    return inside
