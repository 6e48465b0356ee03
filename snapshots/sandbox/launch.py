"""Launching a local sandbox's command server: what both runtimes (``bwrap.py``, ``runsc.py``)
need, so that neither imports the other nor the backend that chooses between them (``local.py``).

* The init: its package's sources (``sandbox_init/``) and the one-line boot that reads them
  from stdin (``init_payload``), the interpreter it runs on, and the capabilities it keeps
  inside its user namespace.
* The sandbox's /etc: the host entries a toolchain needs and the few files written per backend.
* ``Host``: what a runtime asks of the backend that launches it.
* Process identity on the host (``proc_starttime``), which guards every recorded pid against reuse.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Protocol

from snapshots.sandbox import netns
from snapshots.sandbox.sandbox_init import MODULES

INIT_PACKAGE = Path(__file__).with_name("sandbox_init")
INIT_BOOT_SOURCE = (INIT_PACKAGE / "boot.py").read_bytes()
INIT_SOURCES = tuple((name, (INIT_PACKAGE / f"{name}.py").read_bytes()) for name in MODULES)
# Reads boot.py from stdin, which reads the init's modules and then the config line after it.
INIT_BOOT = (
    "import sys;exec(compile(sys.stdin.buffer.read(int(sys.stdin.buffer.readline())),"
    "'sandbox_init/boot.py','exec'))"
)
SANDBOX_PYTHON = "/usr/bin/python3"
INIT_CAPS = (
    # What the command server keeps, inside its own user namespace only: starting commands
    # as the workload uid, ending them, and giving the files it writes to the workload.
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_KILL",
    "CAP_CHOWN",
    "CAP_FOWNER",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
)
# Host /etc entries a toolchain needs; nothing with secrets or host identity beyond this.
ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "mime.types",
    "protocols",
    "services",
    "terminfo",
    "bash.bashrc",
    "chromium.d",  # Debian's /usr/bin/chromium wrapper sources it (screenshots)
    "inputrc",
    "profile",
    "os-release",
    "debian_version",
    "python3",
    "python3.11",
    "magic",
)
# The files of the sandbox's /etc written by the backend (write_etc), not taken from the host.
ETC_WRITTEN = ("passwd", "group", "hostname", "hosts", "resolv.conf")


class Host(Protocol):
    """What a runtime needs of the backend launching a sandbox (``local.LocalBackend``)."""

    root: Path
    mount_base: Path
    etc_dir: Path
    uid: int
    gid: int
    init_uid: int
    # The host processes of live sandboxes, by sandbox id (``<id>:<role>`` for helpers).
    procs: dict[str, subprocess.Popen[bytes]]

    def tools_mount(self) -> Path | None: ...

    def start_nat(self, sdir: Path, state: dict[str, Any], **target: Any) -> None: ...


def init_payload(config: dict[str, Any]) -> bytes:
    """What the init reads on stdin: boot.py's length and source; a JSON line naming the init's
    modules with their sizes, then their sources; one JSON config line."""
    index = json.dumps([[name, len(source)] for name, source in INIT_SOURCES]).encode()
    modules = b"".join(source for _, source in INIT_SOURCES)
    config_line = json.dumps(config).encode()
    return b"%d\n%s%s\n%s%s\n" % (
        len(INIT_BOOT_SOURCE),
        INIT_BOOT_SOURCE,
        index,
        modules,
        config_line,
    )


def write_etc(root: Path, uid: int, gid: int) -> Path:
    """The backend's copies of the sandbox's own /etc files (users, host name, resolver)."""
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    etc.chmod(0o755)
    (etc / "passwd").write_text(
        f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"sandbox:x:{uid}:{gid}:sandbox:/tmp:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\nsandbox:x:{gid}:\nnogroup:x:65534:\n")
    (etc / "hostname").write_text("sandbox\n")
    (etc / "hosts").write_text("127.0.0.1 localhost sandbox\n::1 localhost\n")
    (etc / "resolv.conf").write_text(netns.resolv_conf())
    for name in ETC_WRITTEN:
        (etc / name).chmod(0o644)
    return etc


def proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def proc_starttime(pid: int) -> int | None:
    """Start time of a pid (clock ticks since boot); guards against pid reuse."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None
