"""Sandbox backends: the protocol (``base``) and its implementations (``local``, ``modal``).

Importing this package is cheap and Django-free; backends are imported on demand.
"""

from snapshots.sandbox.base import (
    WORKSPACE,
    BackendUnavailable,
    ExecHandle,
    ExecResult,
    FileInfo,
    LimitExceeded,
    Limits,
    NetworkPolicy,
    OutputLine,
    PathEscapesWorkspace,
    Pty,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxGone,
    SnapshotNotFound,
    SnapshotRef,
)

__all__ = [
    "WORKSPACE",
    "BackendUnavailable",
    "ExecHandle",
    "ExecResult",
    "FileInfo",
    "LimitExceeded",
    "Limits",
    "NetworkPolicy",
    "OutputLine",
    "PathEscapesWorkspace",
    "Pty",
    "Sandbox",
    "SandboxBackend",
    "SandboxError",
    "SandboxGone",
    "SnapshotNotFound",
    "SnapshotRef",
]
