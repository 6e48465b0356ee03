"""The agent CLIs the platform provides, each at a pinned, tested version.

Each supported CLI is installed by npm into a directory of its own under
`settings.AGENT_CLIS_DIR` (`<dir>/<runtime>/<version>/node_modules/.bin/<binary>`), which every
sandbox sees read-only at `AGENT_TOOLS_MOUNT`; `<dir>/bin` links each binary of its pinned
version and is on the sandbox's PATH. A repository may pin another version in its recipe
(`[agents]`); that version is installed the same way, beside the pinned one. No recipe installs
an agent and no sandbox needs egress to the npm registry.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from snapshots.sandbox import AGENT_TOOLS_MOUNT

VERSION_RE = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?$")
NPM_TIMEOUT = 900
PR_SET_PDEATHSIG = 1


def _die_with_installer() -> None:
    """npm ends with whoever started it (`make run` stopped mid-install leaves no npm behind)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True)
class AgentCli:
    runtime: str  # the session's agent name
    label: str
    package: str  # its npm package
    binary: str
    version: str  # the version the platform pins (tested with this release)


PINNED: dict[str, AgentCli] = {
    cli.runtime: cli
    for cli in (
        AgentCli("claude-code", "Claude Code", "@anthropic-ai/claude-code", "claude", "2.1.197"),
        AgentCli("codex", "Codex", "@openai/codex", "codex", "0.171.0"),
        AgentCli("opencode", "OpenCode", "opencode-ai", "opencode", "1.18.33"),
    )
}


class InstallError(Exception):
    """An agent CLI could not be installed or does not run; the message says why."""


def root() -> Path:
    return Path(settings.AGENT_CLIS_DIR)


def check_version(runtime: str, version: str) -> str:
    """`version` if it is a plain release number of a supported CLI, else InstallError."""
    if runtime not in PINNED:
        known = ", ".join(sorted(PINNED))
        raise InstallError(f"{runtime!r} is not an agent CLI the platform provides ({known})")
    if not VERSION_RE.match(version):
        raise InstallError(
            f"{PINNED[runtime].label} version {version!r} is not a release number like "
            f"{PINNED[runtime].version}"
        )
    return version


def install_dir(runtime: str, version: str) -> Path:
    return root() / runtime / check_version(runtime, version)


def host_binary(runtime: str, version: str) -> Path:
    return install_dir(runtime, version) / "node_modules" / ".bin" / PINNED[runtime].binary


def sandbox_binary(runtime: str, version: str) -> str:
    """Where a sandbox runs this version of the CLI."""
    check_version(runtime, version)
    return f"{AGENT_TOOLS_MOUNT}/{runtime}/{version}/node_modules/.bin/{PINNED[runtime].binary}"


def is_installed(runtime: str, version: str) -> bool:
    directory = install_dir(runtime, version)
    return (directory / ".installed").exists() and host_binary(runtime, version).exists()


def install(runtime: str, version: str | None = None) -> Path:
    """Install one CLI version (idempotent; concurrent callers each install into a directory of
    their own and the first rename wins). Returns its directory."""
    cli = PINNED.get(runtime)
    if cli is None:
        check_version(runtime, "0.0.0")
    version = version or cli.version
    target = install_dir(runtime, version)
    if not is_installed(runtime, version):
        npm = shutil.which("npm")
        if npm is None:
            raise InstallError("npm is not installed on this machine (Debian package `npm`)")
        target.parent.mkdir(parents=True, exist_ok=True)
        # Open the new directories now: an install killed half-way must not leave the mounted
        # directory 0700 (every sandbox start would then fail in bwrap).
        _traversable(target.parent)
        _remove_abandoned(target.parent)
        scratch = target.parent / f".{version}.{os.getpid()}.partial"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(scratch), "--no-audit", "--no-fund",
                 "--loglevel=error", "--ignore-scripts=false", f"{cli.package}@{version}"],
                capture_output=True, text=True, timeout=NPM_TIMEOUT, check=False,
                preexec_fn=_die_with_installer,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            shutil.rmtree(scratch, ignore_errors=True)
            raise InstallError(
                f"npm install {cli.package}@{version} took over {NPM_TIMEOUT}s"
            ) from None
        if done.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            said = (done.stderr or done.stdout).strip().splitlines()
            raise InstallError(
                f"npm install {cli.package}@{version} failed: {' '.join(said[-3:])[:500]}"
            )
        (scratch / ".installed").write_text(version + "\n")
        _readable(scratch)
        try:
            scratch.rename(target)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)  # another process installed it first
            if not is_installed(runtime, version):
                raise
    if version == cli.version:
        link_pinned(runtime)
    return target


def link_pinned(runtime: str) -> None:
    """`<dir>/bin/<binary>` -> the pinned version (relative, so it resolves in the sandbox)."""
    cli = PINNED[runtime]
    bin_dir = root() / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    link = bin_dir / cli.binary
    relative = f"../{runtime}/{cli.version}/node_modules/.bin/{cli.binary}"
    if link.is_symlink() and os.readlink(link) == relative:
        return
    scratch = bin_dir / f".{cli.binary}.{os.getpid()}"
    scratch.unlink(missing_ok=True)
    scratch.symlink_to(relative)
    scratch.replace(link)
    _readable(root())


def _remove_abandoned(directory: Path) -> None:
    """Delete the scratch directories of installs whose process is gone (killed half-way)."""
    for scratch in directory.glob(".*.partial"):
        try:
            pid = int(scratch.name.rsplit(".", 2)[-2])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(scratch, ignore_errors=True)
        except (ValueError, PermissionError):
            continue  # not ours to judge: a name we did not make, or a live process


def _readable(directory: Path) -> None:
    """Sandboxes run as an unprivileged uid that must traverse to and read the CLIs."""
    _traversable(directory)
    subprocess.run(["chmod", "-R", "a+rX", str(directory)], check=False, capture_output=True)


def _traversable(directory: Path) -> None:
    """`directory` and its parents up to the CLIs' directory's parent get read and search for
    group and others. Group too: a directory made under `make run`'s umask (077) is 0700, and a
    sandbox whose group owns it is judged by the group bits, not the others' (bwrap: "Can't find
    source path")."""
    for path in (directory, *directory.parents):
        if path == Path("/"):
            break
        mode = path.stat().st_mode
        if mode & 0o055 != 0o055:
            path.chmod(mode | 0o055)
        if path == root().parent:
            break


@dataclass(frozen=True)
class CliStatus:
    runtime: str
    label: str
    version: str
    ok: bool
    detail: str  # the version it printed, or what is wrong


def node_problem(runtime: str, version: str) -> str:
    """What is wrong with this machine's node for this CLI version ('' if nothing)."""
    node = shutil.which("node", path="/usr/bin:/bin")
    if node is None:
        return "node is not installed on this machine (Debian package `nodejs`)"
    try:
        said = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"node does not run: {exc}"
    major = int(re.match(r"v?(\d+)", said).group(1)) if re.match(r"v?(\d+)", said) else 0
    needed = _node_needed(runtime, version)
    if needed and major < needed:
        return f"{PINNED[runtime].label} {version} needs node >= {needed}; this machine has {said}"
    return ""


def _node_needed(runtime: str, version: str) -> int:
    manifest = install_dir(runtime, version) / "node_modules" / PINNED[runtime].package
    try:
        engines = json.loads((manifest / "package.json").read_text()).get("engines") or {}
    except (OSError, ValueError):
        return 0
    found = re.search(r">=?\s*(\d+)", str(engines.get("node") or ""))
    return int(found.group(1)) if found else 0


def status(runtime: str, version: str | None = None) -> CliStatus:
    """Whether this CLI version is installed and starts with the platform's node."""
    cli = PINNED[runtime]
    version = version or cli.version
    if not is_installed(runtime, version):
        return CliStatus(
            runtime,
            cli.label,
            version,
            False,
            f"{cli.label} {version} is not installed on this platform "
            "(`manage.py inspect doctor --install-agents` installs it)",
        )
    problem = node_problem(runtime, version)
    if problem:
        return CliStatus(runtime, cli.label, version, False, problem)
    try:
        with tempfile.TemporaryDirectory(prefix="agent-cli-home-") as home:
            ran = subprocess.run(
                [str(host_binary(runtime, version)), "--version"],
                capture_output=True, text=True, timeout=60, check=False,
                env={"PATH": "/usr/bin:/bin", "HOME": home, "NO_COLOR": "1"},
            )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return CliStatus(runtime, cli.label, version, False, f"does not start: {exc}")
    said = (ran.stdout or ran.stderr).strip().splitlines()
    first = said[0][:200] if said else ""
    if ran.returncode != 0:
        return CliStatus(
            runtime, cli.label, version, False, f"exits {ran.returncode} on --version: {first}"
        )
    return CliStatus(runtime, cli.label, version, True, first)


def ready(runtime: str, version: str | None = None, *, install_missing: bool = False) -> str:
    """The version of `runtime` a turn runs, checked the way `doctor` checks it: installed (or
    installed now, with `install_missing`) and startable with the platform's node. InstallError
    naming the runtime and its version otherwise — the turn fails with the words doctor says."""
    cli = PINNED[runtime]
    version = check_version(runtime, version or cli.version)
    if not is_installed(runtime, version):
        if not install_missing:
            raise InstallError(
                f"{cli.label} {version} is not installed on this platform ({runtime}): run "
                "`manage.py inspect doctor --install-agents`"
            )
        try:
            install(runtime, version)
        except InstallError as exc:
            raise InstallError(f"{cli.label} {version} ({runtime}): {exc}") from None
    problem = node_problem(runtime, version)
    if problem:
        raise InstallError(f"{cli.label} {version} ({runtime}) does not start: {problem}")
    return version


def describe(cli_status: CliStatus) -> str:
    """One line for `doctor`: the runtime, its version and whether it works."""
    if cli_status.ok:
        return f"{cli_status.runtime} {cli_status.version}: works ({cli_status.detail})"
    return f"{cli_status.runtime} {cli_status.version}: NOT usable: {cli_status.detail}"


def tools_problem() -> str:
    """What stops this machine from installing the CLIs at all ('' if nothing)."""
    missing = []
    if shutil.which("node", path="/usr/bin:/bin") is None:
        missing.append(("node", "nodejs"))
    if shutil.which("npm") is None:
        missing.append(("npm", "npm"))
    if not missing:
        return ""
    names = " and ".join(name for name, _ in missing)
    return (
        f"{names} {'is' if len(missing) == 1 else 'are'} not installed on this machine, so the "
        "agent CLIs cannot be installed (Debian packages: "
        f"{' '.join(package for _, package in missing)}; `make run` installs them as root)"
    )


def install_pinned(echo=print) -> list[str]:
    """What `make run` does at start-up (in the background, so the web UI is up at once):
    install every pinned CLI that is missing and check it starts, saying each step through
    `echo`. Returns the problems found, one line each (empty when every CLI works)."""
    problem = tools_problem()
    if problem:
        echo(f"agent CLIs: {problem}")
        return [problem]
    problems = []
    for runtime, cli in PINNED.items():
        if not is_installed(runtime, cli.version):
            where = install_dir(runtime, cli.version)
            echo(f"agent CLIs: installing {cli.package}@{cli.version} into {where}")
        try:
            install(runtime, cli.version)
        except (InstallError, OSError) as exc:
            problems.append(f"{runtime} {cli.version}: {exc}")
            echo(f"agent CLIs: {runtime} {cli.version} NOT installed: {exc}")
            continue
        found = status(runtime, cli.version)
        echo(f"agent CLIs: {describe(found)}")
        if not found.ok:
            problems.append(describe(found))
    return problems


def modal_image_commands(node_version: str = "20.19.5") -> list[str]:
    """The shell commands that give a Modal image the same CLIs at the same path: node (the
    official build, the major the platform tests with), each pinned CLI in a directory of its
    own under AGENT_TOOLS_MOUNT, and `bin/` links to the pinned versions."""
    tools = AGENT_TOOLS_MOUNT
    commands = [
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates "
        "curl xz-utils >/dev/null",
        f"curl -fsSL https://nodejs.org/dist/v{node_version}/node-v{node_version}-linux-x64.tar.xz"
        " | tar -xJ -C /usr/local --strip-components=1 && node --version",
        f"mkdir -p {tools}/bin",
    ]
    for runtime, cli in PINNED.items():
        commands.append(
            f"npm install --prefix {tools}/{runtime}/{cli.version} --no-audit --no-fund "
            f"--loglevel=error {cli.package}@{cli.version}"
            f" && touch {tools}/{runtime}/{cli.version}/.installed"
        )
        commands.append(
            f"ln -sfn ../{runtime}/{cli.version}/node_modules/.bin/{cli.binary} "
            f"{tools}/bin/{cli.binary}"
        )
    commands.append(f"chmod -R a+rX,go-w {tools}")
    return commands
