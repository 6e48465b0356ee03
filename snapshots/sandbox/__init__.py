"""Sandbox backends: the protocol (``base``) and its implementations (``local``, ``modal``).

Importing this package is cheap and Django-free; backends are imported on demand.
"""

from snapshots.sandbox.base import (
    AGENT_TOOLS_MOUNT,
    GATEWAY_PORT,
    SANDBOX_PATH,
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
    "AGENT_TOOLS_MOUNT",
    "GATEWAY_PORT",
    "SANDBOX_PATH",
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
