"""The audit chain's head, written outside the database at every entry (DESIGN.md invariant 5).

Someone with SQL access can delete entries from the end of the chain and wind `AuditHead`
back; the sink, which the database cannot reach, still holds the heads they removed, and
`audit verify` compares the two. Where it goes is `INSPECT_AUDIT_SINK`:

- a file (default `<data dir>/audit-head.log`): one JSON line `{"seq": …, "hmac": …}` per
  entry, opened O_APPEND (each line is one write(2) at the end, whoever else appends) and
  created 0600. No fsync: the line is in the kernel once write(2) returns, so it survives a
  crash of the process; a power loss can drop the last lines, which `verify` reports as entries
  not anchored, never as tampering. Make the file append-only for good with `chattr +a`.
- `syslog:` (the local /dev/log), `syslog:/path/to/socket` or `syslog:HOST:PORT` (UDP): the
  same line through the stdlib's SysLogHandler, facility authpriv, for a log host that keeps
  it. `verify` cannot read it back; compare with the log host by hand.

Lines are written after the entry's transaction commits (the caller uses on_commit), so a
rolled-back entry is never anchored; two workers commit in seq order but may write their lines
in either order, so readers key lines by seq, never by position.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)

SYSLOG_PREFIX = "syslog:"
_syslog: dict[str, logging.Logger] = {}


def sink_target() -> str:
    """The configured sink: a file path, or a `syslog:` value."""
    return settings.AUDIT_SINK or str(Path(settings.DATA_DIR) / "audit-head.log")


def sink_path() -> Path | None:
    """The sink file, or None when the sink is syslog."""
    target = sink_target()
    return None if target.startswith(SYSLOG_PREFIX) else Path(target)


def write_head(seq: int, hmac: str, **extra: object) -> None:
    """Append the chain head after entry `seq`. Never raises: the entry is already committed,
    and a sink that cannot be written shows in `verify` as entries not anchored."""
    line = json.dumps({"seq": seq, "hmac": hmac, **extra}, sort_keys=True)
    target = sink_target()
    try:
        if target.startswith(SYSLOG_PREFIX):
            _syslog_logger(target).info("inspect-audit-head %s", line)
            return
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except Exception:
        log.exception("could not write audit head seq %s to %s", seq, target)


def _syslog_logger(target: str) -> logging.Logger:
    logger = _syslog.get(target)
    if logger is None:
        address: str | tuple[str, int] = target.removeprefix(SYSLOG_PREFIX) or "/dev/log"
        if not address.startswith("/"):
            host, _, port = address.rpartition(":")
            address = (host, int(port))
        handler = logging.handlers.SysLogHandler(
            address=address, facility=logging.handlers.SysLogHandler.LOG_AUTHPRIV
        )
        logger = logging.getLogger(f"inspect.audit.sink.{len(_syslog)}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        _syslog[target] = logger
    return logger


@dataclass
class SinkHeads:
    """What a sink file holds: the head recorded after each seq, and lines it could not read."""

    path: Path
    heads: dict[int, str] = field(default_factory=dict)
    unreadable: list[int] = field(default_factory=list)  # line numbers
    # seqs recorded twice with different heads: one of them was never the database's
    conflicting: list[int] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return max(self.heads, default=0)

    @property
    def first_seq(self) -> int:
        return min(self.heads, default=0)


def read_heads(path: Path) -> SinkHeads | None:
    """The heads in the sink file at `path`, or None when it does not exist."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    sink = SinkHeads(path)
    for number, raw in enumerate(text.splitlines(), start=1):
        try:
            line = json.loads(raw)
            seq, hmac = int(line["seq"]), str(line["hmac"])
        except (ValueError, KeyError, TypeError):
            sink.unreadable.append(number)
            continue
        if sink.heads.setdefault(seq, hmac) != hmac:
            sink.conflicting.append(seq)
    return sink
