"""Visual verification: before/after screenshots of the application a turn changed.

After a turn whose commit touches files matching the recipe's `ui` globs, the recipe's
`preview` is (re)started inside the session's sandbox and each of its `paths` is captured with
headless Chromium running *inside* the sandbox (so it follows the sandbox's egress policy). The
"before" images come from a fresh sandbox of the session's repository snapshot (the diff's base)
and are cached per snapshot, so every session on that snapshot reuses them. Each image is a
`screenshot` event whose PNG is an artifact in Django storage, served to repository members only
(sessions.sandbox_views.screenshot_image).

Nothing here fails a turn: a preview that does not start or a browser that crashes becomes an
`error` event saying what to fix in the recipe.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import shlex
import struct
import time
import uuid
from urllib.parse import urljoin, urlsplit

from django.core import signing
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.urls import reverse
from django.utils.crypto import constant_time_compare

from sessions.events import append_events
from sessions.models import Event, Prompt, Session
from snapshots.recipe import Preview, Recipe
from snapshots.restore import recipe_of, restore_sandbox
from snapshots.sandbox import Limits, Sandbox, SandboxError

log = logging.getLogger(__name__)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
    "--hide-scrollbars",
)  # fmt: skip
PREVIEW_FILES = "/tmp/inspect-preview-{port}"  # noqa: S108 - .pid and .log inside the sandbox
CAPTURE_SECONDS = 60
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GIT = "git -c safe.directory=* -c core.quotePath=false"
SIGNING_SALT = "sessions.screenshots.image"

# Polls the preview from inside the sandbox: any HTTP answer (even a 404) means it is up.
READY_PROBE = """
import sys, time, urllib.error, urllib.request
url, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
while True:
    try:
        opener.open(url, timeout=2).close()
        break
    except urllib.error.HTTPError:
        break
    except Exception:
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.1)
"""


class PreviewError(SandboxError):
    """The preview did not start or could not be captured; the message says what to fix."""


# -- the preview --------------------------------------------------------------------------------


def preview_port(preview: Preview) -> int:
    """The TCP port the preview listens on inside the sandbox (from its URL)."""
    parts = urlsplit(preview.url)
    return parts.port or 80


def preview_ready(sandbox: Sandbox, preview: Preview, *, wait: float = 0.0) -> bool:
    """Whether the preview answers HTTP (polling up to `wait` seconds)."""
    url = urljoin(preview.url, preview.ready_path)
    result = sandbox.run(
        ["/usr/bin/python3", "-I", "-c", READY_PROBE, url, str(wait)],
        timeout=wait + 30,
        cwd="/workspace",
    )
    return result.ok


def start_preview(sandbox: Sandbox, preview: Preview, *, restart: bool = False) -> None:
    """Start the recipe's preview in the background unless it already answers (`restart`:
    stop a running one first, so it serves what the turn just changed). Raises PreviewError
    with the end of its log when it does not answer within `ready_seconds`."""
    if restart:
        stop_preview(sandbox, preview)
    elif preview_ready(sandbox, preview):
        return
    files = PREVIEW_FILES.format(port=preview_port(preview))
    # setsid: the preview gets a process group of its own, which stop_preview kills whole.
    sandbox.run(
        f"setsid /bin/sh -c {shlex.quote(preview.command)} </dev/null >{files}.log 2>&1 & "
        f"echo $! >{files}.pid",
        cwd="/workspace",
        timeout=30,
    )
    if not preview_ready(sandbox, preview, wait=preview.ready_seconds):
        tail = sandbox.run(f"tail -c 1500 {files}.log", timeout=10).stdout.strip()
        raise PreviewError(
            f"the preview `{preview.command}` did not answer at {preview.url} within "
            f"{preview.ready_seconds} s; check `preview` in the recipe"
            + (f". Its output ends with: {tail}" if tail else " (it printed nothing)")
        )


def stop_preview(sandbox: Sandbox, preview: Preview) -> None:
    """Kill the preview's process group (if one was started)."""
    pid = PREVIEW_FILES.format(port=preview_port(preview)) + ".pid"
    sandbox.run(
        f"if [ -f {pid} ]; then kill -TERM -- -$(cat {pid}) 2>/dev/null;"
        f" sleep 0.2; kill -KILL -- -$(cat {pid}) 2>/dev/null; rm -f {pid}; fi; true",
        timeout=30,
    )


# -- capturing ----------------------------------------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; ValueError if `data` is not a PNG."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    return struct.unpack(">II", data[16:24])


def capture(sandbox: Sandbox, url: str, *, window: tuple[int, int]) -> bytes:
    """A PNG of `url` (on the sandbox's loopback) taken by headless Chromium inside the sandbox."""
    token = uuid.uuid4().hex
    # Written under .git: inside the workspace (the file API reaches it) but never in a diff.
    shot = f".git/inspect-shot-{token}.png"
    profile = f"/tmp/inspect-chromium-{token}"  # noqa: S108 - a path inside the sandbox
    argv = [
        CHROMIUM,
        *CHROMIUM_FLAGS,
        f"--user-data-dir={profile}",
        f"--window-size={window[0]},{window[1]}",
        f"--screenshot=/workspace/{shot}",
        url,
    ]
    try:
        result = sandbox.run(argv, cwd="/workspace", timeout=CAPTURE_SECONDS)
        try:
            data = sandbox.read_file(shot)
        except FileNotFoundError:
            data = b""
    finally:
        sandbox.run(["rm", "-rf", profile, f"/workspace/{shot}"], timeout=30)
    if not data.startswith(PNG_SIGNATURE):
        errors = [
            line for line in result.stderr.splitlines() if "dbus" not in line and line.strip()
        ]
        why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
        raise PreviewError(
            f"Chromium {why} without a screenshot of {url}"
            + (f": {errors[-1][-300:]}" if errors else "")
        )
    return data


def turn_ui_paths(sandbox: Sandbox, commit: str, globs: tuple[str, ...]) -> list[str]:
    """The files the turn's commit changed that match one of the recipe's `ui` globs."""
    if not commit or not globs:
        return []
    result = sandbox.run(
        f"{GIT} diff-tree --no-commit-id --name-only -r --root {shlex.quote(commit)}",
        cwd="/workspace",
        timeout=60,
    )
    if not result.ok:
        raise SandboxError(f"listing the files of commit {commit[:10]} failed: {result.stderr}")
    return [path for path in result.stdout.splitlines() if matches_ui(path, globs)]


def matches_ui(path: str, globs: tuple[str, ...]) -> bool:
    """`*.html` matches index.html and pages/a.html; `src/components/**` what is under it."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(path, g) or fnmatch.fnmatchcase(name, g) for g in globs)


# -- storing ------------------------------------------------------------------------------------


def artifact_name(session_id: int, key: str) -> str:
    return f"artifacts/session-{session_id}/screenshots/{key}.png"


def image_url(session_id: int, key: str) -> str:
    return reverse("sandbox:screenshot", args=[session_id, key])


def signed_image_url(session_id: int, key: str) -> str:
    """A link to one screenshot that works without a login (for pull request bodies: the code
    host fetches images anonymously). It names one image only and cannot be forged."""
    signature = signing.Signer(salt=SIGNING_SALT).signature(f"{session_id}:{key}")
    return f"{image_url(session_id, key)}?s={signature}"


def screenshot_link_valid(session_id: int, key: str, signature: str) -> bool:
    if not signature:
        return False
    expected = signing.Signer(salt=SIGNING_SALT).signature(f"{session_id}:{key}")
    return constant_time_compare(signature, expected)


def _store(session_id: int, data: bytes) -> str:
    key = uuid.uuid4().hex
    default_storage.save(artifact_name(session_id, key), ContentFile(data))
    return key


def cache_dir(snapshot) -> str:
    """Where a snapshot's "before" images are kept (its backend ref: ids can be reused)."""
    ref = hashlib.sha256(snapshot.backend_ref.encode()).hexdigest()[:12]
    return f"screenshots/snapshot-{snapshot.pk}-{ref}"


def _cache_name(snapshot, preview: Preview, path: str) -> str:
    digest = hashlib.sha256(
        f"{preview.command}\n{preview.url}\n{path}\n{preview.window}".encode()
    ).hexdigest()[:24]
    return f"{cache_dir(snapshot)}/{digest}.png"


def before_shots(session: Session, preview: Preview) -> dict[str, bytes]:
    """The base commit's images, per path: from the snapshot's cache, else captured in a fresh
    sandbox restored from the snapshot (then cached for every session on it)."""
    snapshot = session.snapshot
    names = {path: _cache_name(snapshot, preview, path) for path in preview.paths}
    shots = {}
    for path, name in names.items():
        if default_storage.exists(name):
            with default_storage.open(name, "rb") as fh:
                shots[path] = fh.read()
    missing = [path for path in preview.paths if path not in shots]
    if not missing:
        return shots
    restored = restore_sandbox(
        session.repository,
        snapshot=snapshot,
        sync=False,
        limits=Limits(wall_seconds=600, lifetime_seconds=900),
    )
    try:
        start_preview(restored.sandbox, preview)
        for path in missing:
            data = capture(restored.sandbox, urljoin(preview.url, path), window=preview.window)
            if not default_storage.exists(names[path]):
                default_storage.save(names[path], ContentFile(data))
            shots[path] = data
    finally:
        restored.sandbox.terminate()
    return shots


def capture_turn_screenshots(
    session: Session, sandbox: Sandbox, prompt: Prompt, *, recipe: Recipe | None = None
) -> int:
    """Before/after screenshots for a turn that touched UI files; returns how many events were
    appended. Never raises: a failure is an `error` event (the turn itself stands)."""
    try:
        recipe = recipe or (recipe_of(session.snapshot) if session.snapshot else None)
        if recipe is None or recipe.preview is None or not recipe.ui:
            return 0
        commit = Prompt.objects.filter(pk=prompt.pk).values_list("commit", flat=True).get()
        touched = turn_ui_paths(sandbox, commit, recipe.ui)
        if not touched:
            return 0
        started = time.monotonic()
        preview = recipe.preview
        before = before_shots(session, preview)
        start_preview(sandbox, preview, restart=True)
        after = {
            path: capture(sandbox, urljoin(preview.url, path), window=preview.window)
            for path in preview.paths
        }
    except Exception as exc:
        if not isinstance(exc, SandboxError):
            log.exception("screenshots of session %s failed", session.pk)
        append_events(
            session.pk,
            [("error", {"message": f"screenshots were not taken: {exc}", "turn": prompt.order})],
        )
        return 0
    events = []
    for path in preview.paths:
        for label, data in (("before", before[path]), ("after", after[path])):
            width, height = png_size(data)
            key = _store(session.pk, data)
            events.append(
                (
                    "screenshot",
                    {
                        "label": label,
                        "path": path,
                        "key": key,
                        "url": image_url(session.pk, key),
                        "width": width,
                        "height": height,
                        "bytes": len(data),
                        "turn": prompt.order,
                        "commit": session.base_commit if label == "before" else commit,
                        "changed": touched[:20],
                    },
                )
            )
    append_events(session.pk, events)
    log.info(
        "session %s turn %s: %d screenshots in %.1f s",
        session.pk,
        prompt.order,
        len(events),
        time.monotonic() - started,
    )
    return len(events)


def screenshot_markdown(session: Session, base_url: str = "") -> str:
    """The newest turn's before/after pairs as a Markdown table for a pull request body, with
    signed image links (see signed_image_url); "" when the session has no screenshots."""
    newest = (
        Event.objects.filter(session=session, kind="screenshot")
        .order_by("-seq")
        .values_list("payload__turn", flat=True)
        .first()
    )
    if newest is None:
        return ""
    shots = Event.objects.filter(session=session, kind="screenshot", payload__turn=newest)
    rows: dict[str, dict[str, str]] = {}
    for event in shots.order_by("seq"):
        p = event.payload
        link = signed_image_url(session.pk, p["key"]) if p.get("key") else p.get("url", "")
        rows.setdefault(p.get("path", "/"), {})[p.get("label", "after")] = (
            base_url.rstrip("/") + link
        )
    lines = ["## Screenshots", "", "| Page | Before | After |", "| --- | --- | --- |"]
    for path, pair in rows.items():
        before, after = pair.get("before", ""), pair.get("after", "")
        lines.append(f"| `{path}` | ![before]({before}) | ![after]({after}) |")
    return "\n".join(lines) + "\n"
