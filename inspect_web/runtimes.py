"""The agent runtimes a session may run: their one list, read by the settings, the repository's
default agent, the forms, the API and the runtime registry (sessions/agents). Django-free, as
the settings import it."""

AGENT_RUNTIMES: tuple[str, ...] = ("command", "builtin", "opencode", "claude-code", "codex")
# The CLIs the platform installs and configures (snapshots/agent_installs.py pins each).
CLI_RUNTIMES: tuple[str, ...] = ("opencode", "claude-code", "codex")
# What a repository may default to: not `command`, which needs a command line per session.
REPOSITORY_DEFAULT_RUNTIMES: tuple[str, ...] = tuple(n for n in AGENT_RUNTIMES if n != "command")
