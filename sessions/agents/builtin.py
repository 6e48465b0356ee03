"""The built-in agent: a tool-calling loop over a model API, tools run through the sandbox.

The model key lives in the client on the worker; tools reach the sandbox only through its API,
and nothing of the key is passed to an exec. Per-turn limits (steps, tokens, cost, wall time)
end the turn with an error event; the work done so far stays in the workspace and is diffed
and verified like any other turn.

A session is one conversation: the transcript (user prompts with their authors, the agent's
replies, tool calls and results) lives in `turn.conversation.messages`, which the runner keeps
between turns, and every request sends it before the new prompt. When it nears the model's
context (`context_tokens`), the turns before the current one (and, if that is not enough, the
current turn's older steps) are replaced by a summary the model writes, sent first from then on.
A model API failure ends the turn `failed` with the API's own words; the work is kept.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, TypeVar

from approvals.redaction import Redactor
from sessions.agents import pricing
from sessions.agents.base import AgentEvent, AgentRuntime, Conversation, Turn
from sessions.agents.llm import Entry, ModelClient, ModelError, ModelReply, ToolCall
from sessions.agents.tools import Stopped, Toolbox, ToolInputError, ToolOutcome
from sessions.agents.transcript import (
    CHARS_PER_TOKEN,
    COMPACT_SHARE,
    IMAGE_TOKENS,
    KEEP_SHARE,
    SUMMARY_HEADER,
    SUMMARY_SYSTEM,
    close_transcript,
    split_for_summary,
    summary_request,
    user_entry,
)

T = TypeVar("T")

SYSTEM_PROMPT = """\
You are a coding agent working on a git repository checked out at /workspace, inside an \
isolated sandbox. A person asked for the change below; do it completely and carefully.

How to work:
- Explore first (list_files, search, read_file), then change files with edit_file (exact \
string replacement) or write_file (whole files).
- Run the project's tests, linters or build with run_command when they exist, and fix what \
you broke.
- Do not commit, push or open pull requests: the platform commits your work, shows the diff \
and runs the repository's verify commands after your turn.
- Paths are relative to the repository root. The sandbox may have no network access.
- When you are done, call finish with a short summary of what you changed and why.
"""

BACKOFF_CAP_SECONDS = 30.0


class BuiltinAgent(AgentRuntime):
    """`client`: the model API. `retries`: extra attempts for 429/5xx/timeouts, with
    exponential backoff from `backoff_seconds`. `malformed_limit`: consecutive malformed
    replies (bad JSON arguments, unknown tool, empty reply) tolerated before giving up."""

    name = "builtin"
    honours_sync = True

    def __init__(
        self,
        client: ModelClient,
        *,
        retries: int = 4,
        backoff_seconds: float = 1.0,
        request_timeout: float = 120.0,
        malformed_limit: int = 3,
        command_timeout: float = 600.0,
        prices: Mapping[str, tuple[float, float]] | None = None,
        context_tokens: int = 128_000,
    ) -> None:
        self.client = client
        self.model = client.model
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        self.request_timeout = request_timeout
        self.malformed_limit = malformed_limit
        self.command_timeout = command_timeout
        self.prices = dict(prices or {})
        self.context_tokens = context_tokens
        # What is stored of the conversation never holds the model key.
        self._redact = Redactor(client.secrets())
        self._stopped = threading.Event()
        self._toolbox: Toolbox | None = None
        # (input tokens the API reported for the last request, the transcript's length then)
        self._reported = (0, 0)

    def stop(self) -> None:
        self._stopped.set()
        if self._toolbox is not None:
            self._toolbox.kill()

    # -- the loop ---------------------------------------------------------------------------
    def run(self, turn: Turn) -> Iterator[AgentEvent]:
        started = time.monotonic()
        deadline = started + turn.limits.wall_seconds
        toolbox = Toolbox(
            turn.sandbox,
            stopped=self._stopped,
            sync_done=turn.sync_done,
            env=turn.env,
            command_timeout=self.command_timeout,
            deadline=deadline,
            children=turn.children,
            approvals=turn.approvals,
        )
        self._toolbox = toolbox
        if self._stopped.is_set():
            toolbox.kill()
        system = system_prompt(turn)
        conversation = turn.conversation
        # The session's transcript, continued in place: whatever way the turn ends, the runner
        # stores what was said so far.
        transcript = conversation.messages
        close_transcript(transcript, "The previous turn ended before I finished it.")
        prompt_entry = self._keep(transcript, user_entry(turn))
        images = [
            {
                "name": image.name,
                "media_type": image.media_type,
                "data": base64.b64encode(image.data).decode(),
            }
            for image in turn.images
        ]
        totals = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "priced": True}
        steps = malformed_streak = 0

        def done(reason: str, note: str = "", **extra: Any) -> AgentEvent:
            close_transcript(transcript, note)
            return AgentEvent(
                "done",
                {
                    "reason": reason,
                    "steps": steps,
                    "input_tokens": totals["input_tokens"],
                    "output_tokens": totals["output_tokens"],
                    "cost_usd": round(totals["cost_usd"], 6) if totals["priced"] else None,
                    **extra,
                },
            )

        def wire() -> list[Entry]:
            """What the model is sent: the summary first, then the transcript with this
            turn's images attached to its prompt."""
            sent: list[Entry] = []
            if conversation.summary:
                sent.append({"role": "user", "text": f"{SUMMARY_HEADER}\n\n{conversation.summary}"})
            for entry in transcript:
                if entry is prompt_entry and images:
                    entry = {**entry, "images": images}
                sent.append(entry)
            return sent

        stopped_note = "(The turn was stopped before I finished.)"
        try:
            while True:
                if self._stopped.is_set():
                    yield done("stopped", stopped_note, stopped=True)
                    return
                limit = _limit_reached(turn, steps, totals, deadline)
                if limit:
                    yield AgentEvent("error", {"message": limit[1], "limit": limit[0]})
                    yield done("limit", f"(The turn ended: {limit[1]}.)", limit=limit[0])
                    return
                steps += 1
                try:
                    if self._near_context(system, conversation, toolbox, len(images)):
                        yield from self._compact(
                            conversation, prompt_entry, system, toolbox, len(images), deadline,
                            totals, steps,
                        )  # fmt: skip
                    reply = yield from self._ask(system, wire(), toolbox.specs(), deadline)
                except ModelError as exc:
                    # The API's own words fail the turn; whatever it changed so far is kept.
                    message = str(exc)
                    yield AgentEvent("error", {"message": message, "status": exc.status})
                    yield done("model_error", f"(The turn failed: {message})", failed=message)
                    return
                self._reported = (reply.input_tokens, len(transcript))
                yield self._usage(reply, totals, steps)
                if reply.reasoning:
                    yield AgentEvent("reasoning", {"text": reply.reasoning})
                if reply.text:
                    yield AgentEvent("message", {"text": reply.text})
                if not reply.tool_calls:
                    if reply.text:  # a plain answer ends the turn
                        self._keep(transcript, {"role": "assistant", "text": reply.text})
                        yield done("answered")
                        return
                    malformed_streak += 1
                    yield AgentEvent(
                        "error",
                        {"message": "the model returned an empty reply", "malformed": True},
                    )
                    if malformed_streak > self.malformed_limit:
                        yield from self._give_up(malformed_streak)
                        yield done("malformed", "(The turn ended after malformed replies.)")
                        return
                    self._keep(
                        transcript,
                        {
                            "role": "user",
                            "text": "Your last reply was empty. Call a tool, or call finish "
                            "with a summary if the work is done.",
                        },
                    )
                    continue
                self._keep(
                    transcript,
                    {
                        "role": "assistant",
                        "text": reply.text,
                        "tool_calls": [
                            {"id": c.id, "name": c.name, "arguments": c.arguments}
                            for c in reply.tool_calls
                        ],
                    },
                )
                bad_calls = 0
                finished: str | None = None
                for call in reply.tool_calls:
                    result, answer = yield from self._call_tool(toolbox, call)
                    self._keep(transcript, answer)  # every call gets an answer, even a bad one
                    if result is None:
                        bad_calls += 1
                    elif result.finished:
                        finished = result.data.get("summary") or ""
                if finished is not None:
                    if finished and finished != reply.text:
                        yield AgentEvent("message", {"text": finished, "final": True})
                    yield done("finished", finished or "Finished.")
                    return
                malformed_streak = malformed_streak + 1 if bad_calls else 0
                if malformed_streak > self.malformed_limit:
                    yield from self._give_up(malformed_streak)
                    yield done("malformed", "(The turn ended after malformed replies.)")
                    return
        except Stopped:
            yield done("stopped", stopped_note, stopped=True)
        finally:
            self._toolbox = None

    def _keep(self, transcript: list[Entry], entry: Entry) -> Entry:
        """Append `entry` to the transcript, redacted (it is stored); returns what was kept."""
        kept = self._redact(entry) if self._redact.forms else entry
        transcript.append(kept)
        return kept

    # -- compaction ---------------------------------------------------------------------------
    def _estimate(
        self, system: str, conversation: Conversation, toolbox: Toolbox, images: int
    ) -> int:
        """The next request's size in tokens: characters / 4, or what the API reported for
        the last request plus what was added since, whichever is larger."""
        transcript = conversation.messages
        fixed = len(system) + len(json.dumps(toolbox.specs())) + len(conversation.summary)
        sizes = [len(json.dumps(e)) for e in transcript]
        estimate = (fixed + sum(sizes)) // CHARS_PER_TOKEN + images * IMAGE_TOKENS
        reported, upto = self._reported
        if reported and upto <= len(transcript):
            estimate = max(estimate, reported + sum(sizes[upto:]) // CHARS_PER_TOKEN)
        return estimate

    def _near_context(
        self, system: str, conversation: Conversation, toolbox: Toolbox, images: int
    ) -> bool:
        used = self._estimate(system, conversation, toolbox, images)
        return used >= self.context_tokens * COMPACT_SHARE

    def _compact(
        self,
        conversation: Conversation,
        prompt_entry: Entry,
        system: str,
        toolbox: Toolbox,
        images: int,
        deadline: float,
        totals: dict[str, Any],
        step: int,
    ) -> Generator[AgentEvent, None, None]:
        """Replace the earlier turns (and, if the current turn alone is too large, its older
        steps) with a summary the model writes; the current prompt and the newest steps stay."""
        transcript = conversation.messages
        before = self._estimate(system, conversation, toolbox, images)
        budget = self.context_tokens * KEEP_SHARE * CHARS_PER_TOKEN
        dropped, kept = split_for_summary(transcript, prompt_entry, budget)
        if not dropped:
            return  # nothing older to summarise; the request goes as it is
        request = summary_request(
            conversation.summary, dropped, self.context_tokens * CHARS_PER_TOKEN // 2
        )
        reply = yield from self._ask(SUMMARY_SYSTEM, [request], [], deadline)
        yield self._usage(reply, totals, step, purpose="compaction")
        summary = reply.text.strip() or (
            (conversation.summary + "\n\n" if conversation.summary else "")
            + f"({len(dropped)} earlier messages were dropped; the model wrote no summary.)"
        )
        conversation.summary = self._redact(summary) if self._redact.forms else summary
        transcript[:] = kept
        self._reported = (0, 0)
        after = self._estimate(system, conversation, toolbox, images)
        yield AgentEvent(
            "notice",
            {
                "text": f"the conversation neared the model's context (about {before:,} of "
                f"{self.context_tokens:,} tokens): {len(dropped)} earlier messages were "
                f"summarised (about {after:,} tokens now)",
                "compacted": len(dropped),
            },
        )

    def _give_up(self, streak: int) -> Iterator[AgentEvent]:
        yield AgentEvent(
            "error",
            {
                "message": f"the model sent {streak} malformed replies in a row; the turn ends "
                "here (the work so far is kept)",
                "malformed": True,
            },
        )

    def _call_tool(
        self, toolbox: Toolbox, call: ToolCall
    ) -> Generator[AgentEvent, None, tuple[ToolOutcome | None, Entry]]:
        """Run one tool call; returns its outcome (None if the call was malformed: an error
        event is recorded) and the transcript entry that answers it."""

        def answer(content: str, ok: bool) -> Entry:
            return {
                "role": "tool",
                "call_id": call.id,
                "name": call.name,
                "content": content,
                "is_error": not ok,
            }

        def refuse(problem: str) -> AgentEvent:
            return AgentEvent(
                "error", {"message": problem, "malformed": True, "tool": call.name, "id": call.id}
            )

        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError as exc:
            problem = (
                f"the arguments of {call.name or 'a tool call'} are not valid JSON ({exc}); "
                "send a JSON object"
            )
            yield refuse(problem)
            return None, answer(f"error: {problem}", False)
        if not isinstance(arguments, dict):
            problem = f"the arguments of {call.name} must be a JSON object"
            yield refuse(problem)
            return None, answer(f"error: {problem}", False)
        if call.name not in toolbox.names():
            problem = f"there is no tool named {call.name!r}; the tools are " + ", ".join(
                toolbox.names()
            )
            yield refuse(problem)
            return None, answer(f"error: {problem}", False)
        yield AgentEvent("tool_call", {"id": call.id, "name": call.name, "arguments": arguments})
        started = time.monotonic()
        try:
            outcome = yield from toolbox.run(call.name, arguments)
        except ToolInputError as exc:
            problem = f"{call.name}: {exc}"
            yield AgentEvent(
                "tool_result", {"id": call.id, "name": call.name, "ok": False, "output": str(exc)}
            )
            yield refuse(problem)
            return None, answer(f"error: {problem}", False)
        for edit in outcome.edits:
            yield AgentEvent("file_edit", {**edit, "tool_call": call.id})
        yield AgentEvent(
            "tool_result",
            {
                "id": call.id,
                "name": call.name,
                "ok": outcome.ok,
                "output": outcome.output,
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
                **outcome.data,
            },
        )
        return outcome, answer(outcome.output, outcome.ok)

    # -- the model --------------------------------------------------------------------------
    def _ask(
        self,
        system: str,
        transcript: list[Entry],
        tools: list[dict[str, Any]],
        deadline: float,
    ) -> Generator[AgentEvent, None, ModelReply]:
        """One model reply, retrying transient failures with backoff; raises ModelError when
        they persist (or at once for a permanent one) and Stopped when the turn is stopped."""
        attempt = 0
        while True:
            timeout = max(1.0, min(self.request_timeout, deadline - time.monotonic()))
            try:
                return self._interruptible(
                    lambda t=timeout: self.client.send(system, transcript, tools, timeout=t)
                )
            except ModelError as exc:
                if not exc.retryable or attempt >= self.retries:
                    if exc.retryable:
                        raise ModelError(
                            f"{exc} (gave up after {attempt + 1} attempts)", status=exc.status
                        ) from None
                    raise
                delay = self.backoff_seconds * (2**attempt) * (1 + random.random() * 0.25)
                if exc.retry_after is not None:
                    delay = max(delay, exc.retry_after)
                delay = min(delay, BACKOFF_CAP_SECONDS, max(0.0, deadline - time.monotonic()))
                attempt += 1
                yield AgentEvent(
                    "output",
                    {
                        "stream": "agent",
                        "text": f"{exc}; retrying in {delay:.1f} s "
                        f"(attempt {attempt + 1} of {self.retries + 1})",
                    },
                )
                if self._stopped.wait(delay):
                    raise Stopped() from None

    def _interruptible(self, call: Callable[[], T]) -> T:
        """Run a blocking request in a helper thread so that stop() ends the turn at once; an
        abandoned request ends by its own timeout."""
        box: dict[str, Any] = {}
        finished = threading.Event()

        def work() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                finished.set()

        threading.Thread(target=work, daemon=True, name="model-request").start()
        while not finished.wait(0.05):
            if self._stopped.is_set():
                raise Stopped()
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _usage(
        self, reply: ModelReply, totals: dict[str, Any], step: int, **extra: Any
    ) -> AgentEvent:
        model = reply.model or self.model
        cost = pricing.cost_usd(model, reply.input_tokens, reply.output_tokens, self.prices)
        totals["input_tokens"] += reply.input_tokens
        totals["output_tokens"] += reply.output_tokens
        if cost is None:
            totals["priced"] = False
        else:
            totals["cost_usd"] += cost
        return AgentEvent(
            "usage",
            {
                "provider": self.client.provider,
                "model": model,
                "step": step,
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
                "cost_usd": cost,
                "turn_input_tokens": totals["input_tokens"],
                "turn_output_tokens": totals["output_tokens"],
                "turn_cost_usd": round(totals["cost_usd"], 6) if totals["priced"] else None,
                **extra,
            },
        )


def system_prompt(turn: Turn) -> str:
    """The agent's instructions plus the repository's own (AGENTS.md / CLAUDE.md)."""
    text = (
        SYSTEM_PROMPT
        + "\nThis is a session several people may continue: each request names who asked, and "
        + f"the newest one comes from {turn.author.name} ({turn.author.username}).\n"
    )
    if turn.children is not None:
        text += (
            "\nFor a large task made of independent parts you may start separate sessions with "
            "spawn_session and check them with session_status; keep small tasks to yourself.\n"
        )
    if turn.instructions.strip():
        text += (
            "\nThe repository's instructions for agents (AGENTS.md / CLAUDE.md) follow; they "
            "take precedence over the advice above.\n\n" + turn.instructions.strip() + "\n"
        )
    return text


def _limit_reached(
    turn: Turn, steps: int, totals: dict[str, Any], deadline: float
) -> tuple[str, str] | None:
    limits = turn.limits
    kept = "the work so far is kept; queue a follow-up prompt to continue"
    if steps >= limits.steps:
        return "steps", f"the turn reached its limit of {limits.steps} model steps; {kept}"
    used = totals["input_tokens"] + totals["output_tokens"]
    if used >= limits.tokens:
        return "tokens", f"the turn used {used:,} tokens, its limit is {limits.tokens:,}; {kept}"
    if totals["priced"] and totals["cost_usd"] >= limits.cost_usd:
        return (
            "cost",
            f"the turn cost ${totals['cost_usd']:.4f}, its limit is "
            f"{pricing.usd(limits.cost_usd)}; {kept}",
        )
    if time.monotonic() >= deadline:
        return (
            "wall_time",
            f"the turn ran longer than its limit of {limits.wall_seconds:.0f} s; {kept}",
        )
    return None
