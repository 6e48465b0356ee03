"""Every kind of event in a session's log, with the shape of its payload: the one list.

Each kind names what happened and has one payload shape (a TypedDict). The list is part of the
API (docs/streaming.md, "Event kinds", documents it) and each kind has its template,
templates/sessions/events/<kind>.html.

A kind the server alone writes is *closed*: its payload holds the declared keys and no others.
A kind an agent runtime writes is open: the runtime (a `command` agent's own JSON lines, say)
may add keys, and may leave any out, so only what the server itself guarantees is required.
`check_payload` enforces that; `append_events` calls it when settings.CHECK_EVENT_PAYLOADS is
on (DEBUG and the test suite), since it is a developer's check, not a guard for production.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

# -- what the server writes when something happens to the session ------------------------------

StateChange = TypedDict(  # `from` is a keyword, hence the functional form
    "StateChange", {"from": str, "to": str, "reason": NotRequired[str]}
)
StateChange.__doc__ = "The session moved from one state to another (sessions.states)."


class StopRequested(TypedDict):
    """Someone asked the running turn to stop."""

    by: str  # the username


class TurnFinished(TypedDict):
    """A turn ended; how long its phases took, in milliseconds."""

    turn: int  # the prompt's order
    timings: dict[str, float]


class Drift(TypedDict):
    commits: int  # new commits on the branch since the snapshot
    files: int
    stale: bool


class WorkspaceSynced(TypedDict):
    """The sandbox's workspace caught up with the branch before the agent ran."""

    turn: int
    sync_ms: float
    drift: Drift


class AgentReviewPosted(TypedDict):
    """The review agent's review of a pull request, posted (on the reviewed session and the
    review session alike)."""

    pull_request: int
    review_session: int
    comments: int  # on lines of the diff
    file_comments: int  # on files (their line was not in the diff)
    url: str  # on the code host ("" for a local repository)
    message: str


class PublishNote(TypedDict):
    """Something publishing the turn's work did that the user should know (a branch renamed)."""

    message: str


class PullRequestPublished(TypedDict):
    """The turn's work reached the session's pull request: opened it, or pushed to it."""

    pull_request: int
    pr_url: str  # on the code host, or the session page's pull request panel
    branch: str
    head: str
    opened: bool  # False: an update of the open pull request
    host: Literal["local", "github"]
    opened_as_app: bool


class PullRequestMerged(TypedDict):
    pull_request: int
    sha: str  # the merge commit


class PullRequestClosed(TypedDict):
    """Closed without merging."""

    pull_request: int


class PullRequestReverted(TypedDict):
    """The merged pull request was reverted on its base branch (an escaped defect)."""

    pull_request: int
    revert_sha: str
    message: str


class PullRequestPushedOutside(TypedDict):
    """Someone pushed to the pull request's branch on the code host, not through the session."""

    pull_request: int
    head: str
    message: str


class Review(TypedDict):
    """A review of the pull request, on the code host or in the dashboard."""

    pull_request: int
    review: str  # a ReviewEvent kind: approved, changes_requested, commented, …
    reviewer: str
    commit: str  # the head it reviewed ("" if unknown)
    message: str


class ReviewAnswered(TypedDict):
    """After a turn that answered review comments: replies posted, and the resolving commit."""

    turn: int
    comments: int  # how many comments were answered
    commit: str  # the turn's commit ("" when it changed nothing)
    message: str


# The functional form: with postponed annotations, Python 3.11 reads a class's NotRequired as
# required. `origin` "ci_fix": asked by the system on the author's behalf (sessions/ci_fixes.py).
Prompt = TypedDict(  # noqa: UP013 - see above
    "Prompt",
    {"prompt": int, "order": int, "author": str, "text": str, "origin": NotRequired[str]},
)


class CheckResult(TypedDict):
    """A CI check on the pull request reported a result (sessions/ci_fixes.py)."""

    pull_request: int
    source: Literal["check_run", "check_suite", "status"]
    name: str
    commit: str
    on_head: bool  # on the PR's head commit (a check of an older commit decides nothing)
    conclusion: str  # success, failure, … ("" while it runs)
    summary: str
    excerpt: str
    url: str
    message: str


class CIFixOffered(TypedDict):
    """A CI check failed and the repository asks the author before a fix turn is queued."""

    pull_request: int
    fix: int  # the CIFix to queue (POST /sessions/<id>/ci-fixes/<fix>/queue/)
    check: str
    commit: str
    message: str


class CIFixLimitReached(TypedDict):
    """A CI check failed again, but the pull request used up its CI-fix turns."""

    pull_request: int
    check: str
    commit: str
    attempts: int
    message: str


class CheckPublished(TypedDict):
    """The turn's verification was published as a check run on the PR's head commit."""

    pull_request: int
    name: str  # "Inspect / verify"
    head: str
    conclusion: str  # success, failure or neutral
    url: str
    turn: int


class Terminal(TypedDict):
    """A line someone typed in the session's terminal."""

    user: str
    input: str


class Diff(TypedDict, total=False):
    """One file changed by a turn (or by hand in the terminal)."""

    path: str
    added: int
    removed: int
    binary: bool
    patch: str
    turn: int
    commit: str
    author: str
    by_hand: str  # who typed, for a change made in the terminal


class Command(TypedDict, total=False):
    """A command the platform ran in the sandbox (the recipe's verify commands)."""

    command: str
    phase: str
    exit_code: int
    ok: bool
    duration_ms: float
    limit_hit: str | None
    turn: int
    output_head: str
    output_tail: str


class Screenshot(TypedDict, total=False):
    label: str  # before / after
    path: str
    key: str
    url: str
    width: int
    height: int
    bytes: int
    turn: int
    commit: str
    changed: list[str]


class Approval(TypedDict, total=False):
    """An approval request was made or decided (approvals.gate)."""

    approval: int
    action: str
    state: str
    summary: str


class EgressRefused(TypedDict, total=False):
    """The sandbox's egress policy refused a connection."""

    host: str
    port: int
    reason: str
    sandbox: str
    turn: int


class BudgetPaused(TypedDict):
    """A model request found a budget spent: the turn waits until an admin raises it
    (gateway.budgets), at most `wait_s` seconds."""

    budget: str  # "the daily budget of user ada"
    scope: str  # user, repository, site
    period: str  # day, month
    spent_usd: float
    limit_usd: float
    left_usd: float
    wait_s: int
    raise_at: str  # the page where an admin raises it
    message: str
    turn: int


class BudgetResumed(TypedDict):
    """The budget that paused the turn was raised or removed; its model requests go on."""

    budget: str
    limit_usd: float | None  # None: the budget was removed
    waited_s: float
    message: str
    turn: int


# -- what an agent runtime writes (sessions.agents.base.EVENT_KIND) -----------------------------


class Text(TypedDict, total=False):
    """agent_message and reasoning."""

    text: str
    turn: int


class Output(TypedDict, total=False):
    stream: str  # stdout, stderr, agent
    text: str
    turn: int


class ToolCall(TypedDict, total=False):
    id: str
    name: str
    arguments: Any
    turn: int


class ToolResult(TypedDict, total=False):
    id: str
    name: str
    ok: bool
    output: str
    duration_ms: float
    turn: int


class FileEdit(TypedDict, total=False):
    path: str
    action: str
    turn: int


class Usage(TypedDict, total=False):
    provider: str
    model: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    turn: int


class ModelRequestMetered(TypedDict):
    """One request the turn's runtime made through the model gateway, as metered there (the
    session's cost counts these). `request` is the ModelRequest's id, which its replay page
    (/sessions/<id>/model-requests/<request>/) takes."""

    request: int
    turn: int | None
    runtime: str
    provider: str
    endpoint: str
    model: str
    status: int
    outcome: str
    input_tokens: int  # cached tokens included
    output_tokens: int
    cached_tokens: int
    cost_usd: float | None  # None: the model is unpriced
    latency_ms: float
    message: str  # why it was refused or failed ("" when it went through)


class Message(TypedDict, total=False):
    """error and notice: a sentence for the user (the agent's or the platform's)."""

    message: str
    phase: str
    turn: int


@dataclass(frozen=True)
class EventKind:
    name: str
    payload: type  # a TypedDict
    closed: bool  # the server alone writes it: no keys beyond the declared ones

    @property
    def required(self) -> frozenset[str]:
        return self.payload.__required_keys__  # type: ignore[attr-defined]

    @property
    def keys(self) -> frozenset[str]:
        return self.required | self.payload.__optional_keys__  # type: ignore[attr-defined]


EVENT_KINDS: tuple[EventKind, ...] = (
    EventKind("state", StateChange, closed=True),
    EventKind("stop_requested", StopRequested, closed=True),
    EventKind("turn_finished", TurnFinished, closed=True),
    EventKind("workspace_synced", WorkspaceSynced, closed=True),
    EventKind("publish_note", PublishNote, closed=True),
    EventKind("pull_request_published", PullRequestPublished, closed=True),
    EventKind("pull_request_merged", PullRequestMerged, closed=True),
    EventKind("pull_request_closed", PullRequestClosed, closed=True),
    EventKind("pull_request_reverted", PullRequestReverted, closed=True),
    EventKind("pull_request_pushed_outside", PullRequestPushedOutside, closed=True),
    EventKind("review", Review, closed=True),
    EventKind("review_answered", ReviewAnswered, closed=True),
    EventKind("agent_review_posted", AgentReviewPosted, closed=True),
    EventKind("prompt", Prompt, closed=True),
    EventKind("check_result", CheckResult, closed=True),
    EventKind("ci_fix_offered", CIFixOffered, closed=True),
    EventKind("ci_fix_limit_reached", CIFixLimitReached, closed=True),
    EventKind("check_published", CheckPublished, closed=True),
    EventKind("terminal", Terminal, closed=True),
    EventKind("model_request", ModelRequestMetered, closed=True),
    EventKind("diff", Diff, closed=False),
    EventKind("command", Command, closed=False),
    EventKind("screenshot", Screenshot, closed=False),
    EventKind("approval", Approval, closed=False),  # the gate adds what the decision carries
    EventKind("egress_refused", EgressRefused, closed=False),  # the sandbox's refusal record
    EventKind("budget_paused", BudgetPaused, closed=True),
    EventKind("budget_resumed", BudgetResumed, closed=True),
    EventKind("agent_message", Text, closed=False),
    EventKind("reasoning", Text, closed=False),
    EventKind("output", Output, closed=False),
    EventKind("tool_call", ToolCall, closed=False),
    EventKind("tool_result", ToolResult, closed=False),
    EventKind("file_edit", FileEdit, closed=False),
    EventKind("usage", Usage, closed=False),
    EventKind("error", Message, closed=False),
    EventKind("notice", Message, closed=False),
)  # `presence` is broadcast only, never stored
BY_NAME: dict[str, EventKind] = {kind.name: kind for kind in EVENT_KINDS}
KINDS: frozenset[str] = frozenset(BY_NAME)

# Kinds that say something happened to the session's pull request (the page's panel follows).
PULL_REQUEST_KINDS = frozenset(
    {"pull_request_published", "pull_request_merged", "pull_request_closed",
     "pull_request_reverted", "pull_request_pushed_outside", "review"}
)  # fmt: skip


def check_payload(kind: str, payload: dict[str, Any]) -> None:
    """Raise ValueError if `payload` does not fit `kind`: an unknown kind, a required key
    missing, or (for a closed kind) a key it does not declare."""
    declared = BY_NAME.get(kind)
    if declared is None:
        raise ValueError(f"unknown event kind {kind!r}")
    if not isinstance(payload, dict):
        raise ValueError(f"a {kind} event's payload must be a dict, not {type(payload).__name__}")
    missing = declared.required - payload.keys()
    if missing:
        raise ValueError(f"a {kind} event's payload lacks {sorted(missing)}")
    if declared.closed:
        extra = payload.keys() - declared.keys
        if extra:
            raise ValueError(f"a {kind} event's payload has undeclared keys {sorted(extra)}")
