"""The rules of a repository's approval policy, pure — no models, no audit log, so the models
that store a policy can check it: which actions wait for a reviewer, and the TOML they are written
in. Parsing is strict, like the recipe's: an unknown key or a wrong type is a PolicyError naming
it, and nothing that does not parse is saved.

```toml
require = ["merge_pr", "push_protected", "widen_egress", "delete_branch"]
irreversible_commands = ["deploy*", "*terraform apply*"]  # agent commands that need approval
protected_branches = ["main", "release/*"]
expire_hours = 72       # an undecided request expires after this
wait_seconds = 900      # how long an agent's turn waits for a decision
```
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from dataclasses import dataclass

MERGE_PR = "merge_pr"
PUSH_PROTECTED = "push_protected"
WIDEN_EGRESS = "widen_egress"
DELETE_BRANCH = "delete_branch"
IRREVERSIBLE_COMMAND = "irreversible_command"
# A policy change that gates less anywhere (approvals.policy_change): it needs a second person.
LOOSEN_POLICY = "loosen_policy"
DEFAULT_ACTIONS = (MERGE_PR, PUSH_PROTECTED, WIDEN_EGRESS, DELETE_BRANCH)
# Always gated whatever `require` says: a command is only marked irreversible to be gated, and
# a policy that could drop `loosen_policy` would let one person loosen it after all.
ALWAYS_GATED = (IRREVERSIBLE_COMMAND, LOOSEN_POLICY)

_KEYS = {"require", "irreversible_commands", "protected_branches", "expire_hours", "wait_seconds"}
_ACTION = re.compile(r"^[a-z][a-z0-9_]{0,59}$")


class PolicyError(ValueError):
    """The policy does not parse or has a wrong value; the message says which key."""


@dataclass(frozen=True)
class Policy:
    require: tuple[str, ...] = DEFAULT_ACTIONS
    irreversible_commands: tuple[str, ...] = ()
    protected_branches: tuple[str, ...] = ("main", "master")
    expire_hours: int = 72
    wait_seconds: int = 900

    def requires(self, action: str) -> bool:
        return action in self.require or action in ALWAYS_GATED

    def is_irreversible(self, command: str) -> bool:
        """Whether an agent command matches one of the `irreversible_commands` patterns."""
        text = " ".join(command.split())
        return any(fnmatch.fnmatchcase(text, pattern) for pattern in self.irreversible_commands)

    def is_protected(self, branch: str) -> bool:
        return any(fnmatch.fnmatchcase(branch, p) for p in self.protected_branches)


DEFAULT_POLICY = Policy()


def _strings(data: dict, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = data.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise PolicyError(f"approval policy: '{key}' must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _number(data: dict, key: str, default: int, low: int, high: int) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise PolicyError(f"approval policy: '{key}' must be a whole number from {low} to {high}")
    return value


def parse_policy(text: str) -> Policy:
    """Parse policy TOML; raises PolicyError saying what is wrong and where."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"approval policy does not parse: {exc}") from None
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise PolicyError(
            f"approval policy: unknown key {unknown[0]!r}; "
            f"known keys are {', '.join(sorted(_KEYS))}"
        )
    require = _strings(data, "require", DEFAULT_ACTIONS)
    bad = [a for a in require if not _ACTION.match(a)]
    if bad:
        raise PolicyError(
            f"approval policy: action {bad[0]!r} in 'require' is not a name like merge_pr"
        )
    return Policy(
        require=require,
        irreversible_commands=_strings(data, "irreversible_commands", ()),
        protected_branches=_strings(data, "protected_branches", DEFAULT_POLICY.protected_branches),
        expire_hours=_number(data, "expire_hours", 72, 1, 24 * 90),
        wait_seconds=_number(data, "wait_seconds", 900, 1, 24 * 3600),
    )


def loosenings(before: Policy, after: Policy) -> list[str]:
    """What `after` gates less than `before`, one phrase each; empty when it gates as much or
    more. Patterns are compared as written: a removed or rewritten pattern counts, even if a new
    one happens to cover the same commands or branches (better a needless review than a hole)."""
    found = []
    dropped = [a for a in before.require if a not in after.require and a not in ALWAYS_GATED]
    if dropped:
        found.append(f"{', '.join(dropped)} would no longer wait for approval")
    commands = [p for p in before.irreversible_commands if p not in after.irreversible_commands]
    if commands:
        found.append(f"irreversible command pattern {', '.join(map(repr, commands))} removed")
    branches = [b for b in before.protected_branches if b not in after.protected_branches]
    if branches:
        found.append(f"protected branch {', '.join(map(repr, branches))} removed")
    return found
