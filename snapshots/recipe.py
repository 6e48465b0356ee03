"""The repository recipe (`.inspect/environment.toml`, or the dashboard's override).

See DESIGN.md, "The repository recipe". Parsing is strict: an unknown key or a wrong type is a
RecipeError naming the key, so a typo never silently drops a setup step.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from snapshots import agent_installs
from snapshots.repository_files import LinkedPath, read_repository_file
from snapshots.sandbox import NetworkPolicy

RECIPE_PATH = ".inspect/environment.toml"
RECIPE_MAX_BYTES = 256 * 1024
# Lockfiles whose hashes are stored with each snapshot; a change makes the snapshot stale.
LOCKFILE_PATTERNS = (
    "poetry.lock",
    "uv.lock",
    "Pipfile.lock",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "Cargo.lock",
    "go.sum",
    "Gemfile.lock",
    "composer.lock",
    "requirements*.txt",
)


class RecipeError(ValueError):
    """The recipe does not parse or has a wrong value; the message says where and what.
    `key` names the key at fault ("preview.url"); `line` and `column` (from 1) point at it in
    the text when known, so an editor can show them."""

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.key, self.line, self.column = key, line, column

    @property
    def position(self) -> str:
        """ "line 3, column 1" ("" when unknown)."""
        if self.line is None:
            return ""
        return f"line {self.line}, column {self.column or 1}"


@dataclass(frozen=True)
class Preview:
    """How the application runs inside the sandbox: `command` starts it (in the background),
    `url` is where it answers (on the sandbox's loopback), `ready_path` is polled until it
    answers, `paths` are the pages screenshotted after a turn that touches the `ui` globs."""

    command: str
    url: str
    ready_path: str = "/"
    paths: tuple[str, ...] = ("/",)
    window: tuple[int, int] = (1280, 800)
    ready_seconds: int = 60


@dataclass(frozen=True)
class StartCommand:
    """One `start` entry, run after every restore. A plain string gets no secrets. A service
    that needs some names them (`{command = "...", secrets = ["NPM_TOKEN"]}`): only it gets
    them, it keeps running, and no other command can read them (see Sandbox.exec)."""

    command: str
    secrets: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.command


@dataclass(frozen=True)
class Recipe:
    setup: tuple[str, ...] = ()
    # Incremental refresh only: run after the tree is brought to the new commit on top of the
    # previous snapshot (an incremental build step); same secrets and egress as `setup`.
    refresh: tuple[str, ...] = ()
    start: tuple[StartCommand, ...] = ()
    verify: tuple[str, ...] = ()
    preview: Preview | None = None
    ui: tuple[str, ...] = ()
    egress: NetworkPolicy = field(default_factory=NetworkPolicy)
    refresh_minutes: int = 30
    # Agent CLI versions the repository pins (`[agents]`, e.g. codex = "0.170.0"): installed by
    # the platform on the worker when the snapshot is built, run by its sessions' turns.
    agents: tuple[tuple[str, str], ...] = ()
    source: str = "default"  # where it came from: the repository file, the dashboard, or default


_KEYS = {
    "setup",
    "refresh",
    "start",
    "verify",
    "preview",
    "ui",
    "egress",
    "refresh_minutes",
    "agents",
}


def _commands(data: dict, key: str, where: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RecipeError(f"{where}: '{key}' must be a list of non-empty command strings")
    return tuple(value)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _start_commands(data: dict, where: str) -> tuple[StartCommand, ...]:
    value = data.get("start", [])
    if isinstance(value, str | dict):
        value = [value]
    if not isinstance(value, list):
        raise RecipeError(f"{where}: 'start' must be a list of commands")
    commands = []
    for entry in value:
        if isinstance(entry, str) and entry.strip():
            commands.append(StartCommand(entry))
            continue
        if not isinstance(entry, dict):
            raise RecipeError(
                f"{where}: each 'start' entry is a command string or a table like "
                '{ command = "...", secrets = ["NAME"] }'
            )
        unknown = sorted(set(entry) - {"command", "secrets"})
        if unknown:
            raise RecipeError(
                f"{where}: unknown key start.{unknown[0]}; known keys are command, secrets"
            )
        command, names = entry.get("command"), entry.get("secrets", [])
        if not isinstance(command, str) or not command.strip():
            raise RecipeError(f"{where}: a 'start' table needs a non-empty command string")
        if not isinstance(names, list) or not all(
            isinstance(n, str) and _ENV_NAME.match(n) for n in names
        ):
            raise RecipeError(
                f"{where}: start.secrets of {command!r} must be a list of secret names "
                "(letters, digits and _)"
            )
        commands.append(StartCommand(command, tuple(names)))
    return tuple(commands)


_PREVIEW_KEYS = {"command", "url", "ready_path", "paths", "window", "ready_seconds"}


def _preview(data: dict, where: str) -> Preview:
    unknown = sorted(set(data) - _PREVIEW_KEYS)
    if unknown:
        raise RecipeError(
            f"{where}: unknown key preview.{unknown[0]}; known keys are "
            + ", ".join(sorted(_PREVIEW_KEYS)),
            key=f"preview.{unknown[0]}",
        )
    url = str(data["url"])
    if not url.startswith(("http://127.0.0.1:", "http://localhost:")):
        raise RecipeError(
            f"{where}: preview.url must be http://127.0.0.1:PORT/ (the sandbox's own loopback)",
            key="preview.url",
        )
    paths = data.get("paths", ["/"])
    if not isinstance(paths, list) or not all(
        isinstance(p, str) and p.startswith("/") for p in paths
    ):
        raise RecipeError(
            f"{where}: preview.paths must be a list of paths starting with '/'", key="preview.paths"
        )
    window = data.get("window", [1280, 800])
    if (
        not isinstance(window, list)
        or len(window) != 2
        or not all(isinstance(v, int) and 100 <= v <= 4000 for v in window)
    ):
        raise RecipeError(
            f"{where}: preview.window must be [width, height], 100 to 4000 pixels",
            key="preview.window",
        )
    ready = data.get("ready_seconds", 60)
    if not isinstance(ready, int) or isinstance(ready, bool) or not 1 <= ready <= 600:
        raise RecipeError(
            f"{where}: preview.ready_seconds must be a whole number from 1 to 600",
            key="preview.ready_seconds",
        )
    return Preview(
        command=str(data["command"]),
        url=url,
        ready_path=str(data.get("ready_path", "/")),
        paths=tuple(paths),
        window=(window[0], window[1]),
        ready_seconds=ready,
    )


def _agents(data: object, where: str) -> tuple[tuple[str, str], ...]:
    """`[agents]`: runtime = "version" pins, checked the way the platform installs them."""
    known = ", ".join(sorted(agent_installs.PINNED))
    if not isinstance(data, dict):
        raise RecipeError(
            f"{where}: 'agents' must be a table of runtime = \"version\" pins, like "
            f'[agents] codex = "{agent_installs.PINNED["codex"].version}" (runtimes: {known})'
        )
    pins = []
    for runtime, version in sorted(data.items()):
        if runtime not in agent_installs.PINNED:
            raise RecipeError(
                f"{where}: unknown key agents.{runtime}; a recipe may pin the agent CLIs {known}",
                key=f"agents.{runtime}",
            )
        example = agent_installs.PINNED[runtime].version
        if not isinstance(version, str):
            raise RecipeError(
                f'{where}: agents.{runtime} must be a version string like "{example}"',
                key=f"agents.{runtime}",
            )
        try:
            agent_installs.check_version(runtime, version)
        except agent_installs.InstallError as exc:
            raise RecipeError(
                f"{where}: agents.{runtime}: {exc} (a release of "
                f"{agent_installs.PINNED[runtime].package}"
                f' on npm, e.g. "{example}", the version the platform pins)',
                key=f"agents.{runtime}",
            ) from None
        pins.append((runtime, version))
    return tuple(pins)


_DECODE_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


@contextmanager
def _key(name: str) -> Iterator[None]:
    """Name `name` as the key at fault in a RecipeError raised inside, unless one is named."""
    try:
        yield
    except RecipeError as exc:
        if exc.key is None:
            exc.key = name
        raise


def parse_recipe(text: str, *, where: str = RECIPE_PATH) -> Recipe:
    """Parse recipe TOML. Raises RecipeError with the location of the problem (its message,
    and its `line` and `column` for a syntax error or a key at fault)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _DECODE_POSITION.search(str(exc))
        line, column = (int(found[1]), int(found[2])) if found else (None, None)
        if line is None and "end of document" in str(exc):
            line, column = max(1, len(text.splitlines())), 1
        raise RecipeError(f"{where} does not parse: {exc}", line=line, column=column) from None
    try:
        return _recipe(data, where)
    except RecipeError as exc:
        if exc.line is None and exc.key:
            exc.line, exc.column = locate_key(text, exc.key)
        raise


def _recipe(data: dict, where: str) -> Recipe:
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise RecipeError(
            f"{where}: unknown key {unknown[0]!r}; known keys are {', '.join(sorted(_KEYS))}",
            key=unknown[0],
        )
    preview = data.get("preview")
    if preview is not None:
        with _key("preview"):
            if not isinstance(preview, dict) or not {"command", "url"} <= set(preview):
                raise RecipeError(f"{where}: 'preview' needs a command and a url")
            preview = _preview(preview, where)
    with _key("egress"):
        egress = data.get("egress", {"mode": "none"})
        if not isinstance(egress, dict):
            raise RecipeError(f"{where}: 'egress' must be a table like {{ mode = \"none\" }}")
        try:
            policy = NetworkPolicy(
                mode=egress.get("mode", "none"), domains=tuple(egress.get("domains", ()))
            )
        except (ValueError, TypeError) as exc:
            raise RecipeError(f"{where}: egress: {exc}") from None
    refresh = data.get("refresh_minutes", 30)
    if not isinstance(refresh, int) or isinstance(refresh, bool) or not 1 <= refresh <= 7 * 24 * 60:
        raise RecipeError(
            f"{where}: 'refresh_minutes' must be a whole number from 1 to 10080",
            key="refresh_minutes",
        )
    ui = data.get("ui", [])
    if not isinstance(ui, list) or not all(isinstance(v, str) for v in ui):
        raise RecipeError(f"{where}: 'ui' must be a list of glob strings", key="ui")
    with _key("setup"):
        setup = _commands(data, "setup", where)
    with _key("refresh"):
        refresh_commands = _commands(data, "refresh", where)
    with _key("start"):
        start = _start_commands(data, where)
    with _key("verify"):
        verify = _commands(data, "verify", where)
    with _key("agents"):
        agents = _agents(data.get("agents", {}), where)
    return Recipe(
        setup=setup,
        refresh=refresh_commands,
        start=start,
        verify=verify,
        preview=preview,
        ui=tuple(ui),
        egress=policy,
        refresh_minutes=refresh,
        agents=agents,
        source=where,
    )


_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\s\"]+?)\s*\]\s*(#.*)?$")
_ASSIGNMENT = re.compile(r"^(\s*)([A-Za-z0-9_\-]+(?:\s*\.\s*[A-Za-z0-9_\-]+)*)\s*=")


def locate_key(text: str, key: str) -> tuple[int | None, int | None]:
    """Where `key` ("refresh_minutes", "preview.url") is written in recipe TOML: (line,
    column) from 1, the nearest enclosing key's place when the key itself is not found, or
    (None, None)."""
    head, _, sub = key.partition(".")
    table = ""
    nearest: tuple[int | None, int | None] = (None, None)
    for number, line in enumerate(text.splitlines(), 1):
        header = _TABLE.match(line)
        if header and not line.lstrip().startswith("[["):
            table = "".join(header[1].split()).replace('"', "")
            if table == key:
                return number, line.index("[") + 1
            if table == head and nearest[0] is None:
                nearest = (number, line.index("[") + 1)
            continue
        assignment = _ASSIGNMENT.match(line)
        if assignment is None:
            continue
        dotted = "".join(assignment[2].split())
        full = f"{table}.{dotted}" if table else dotted
        column = len(assignment[1]) + 1
        if full == key:
            return number, column
        if full == head and sub:  # an inline table: point at the sub-key inside it
            inside = re.search(rf"(?<![A-Za-z0-9_]){re.escape(sub)}\s*=", line[assignment.end() :])
            if inside:
                return number, assignment.end() + inside.start() + 1
            nearest = (number, column)
        elif full.startswith(key + ".") and nearest[0] is None:
            nearest = (number, column)
    return nearest


def read_recipe_file(workspace: Path) -> str:
    """The text of the checked-out repository's own recipe ("" when it has none), read without
    following links. RecipeError when it (or `.inspect`) is a link or is too large."""
    try:
        data = read_repository_file(workspace, RECIPE_PATH, max_bytes=RECIPE_MAX_BYTES)
    except LinkedPath as exc:
        raise RecipeError(
            f"{exc.strerror}; the recipe must be a regular file in the repository"
        ) from None
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    return data.decode(errors="replace") if data is not None else ""


def load_recipe(workspace: Path, override: str = "") -> Recipe:
    """The dashboard's override when set, else the repository's own file, else the default."""
    if override.strip():
        return parse_recipe(override, where="the recipe set in the dashboard")
    text = read_recipe_file(workspace)
    return parse_recipe(text) if text else Recipe()
