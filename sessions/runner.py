"""The turn runner: drives a session's queued prompts, one turn at a time, on a Celery worker.

A turn: claim the oldest queued prompt → make sure there is a sandbox (the live one, else the
session's own snapshot, else the repository snapshot + drift sync) → run the agent, streaming its
events → commit and diff against the base → run `verify` → snapshot the session → idle.

The agent reaches models only through the model gateway, with a token minted as it starts and
revoked as it ends (sessions/model_access.py): `verify`, which runs the repository's code, and
anything after the turn find a dead token.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import connection
from django.utils import timezone

from sessions import (
    conversations,
    database_outage,
    model_access,
    review_agent,
    review_comments,
    services,
    states,
    turn_audit,
    warm_pool,
)
from sessions.agents import AgentError, get_runtime, honours_sync, validate_agent
from sessions.agents.approvals import SessionApprovals, agent_env
from sessions.agents.base import EVENT_KIND, Turn
from sessions.agents.providers import turn_limits
from sessions.children import SessionChildren
from sessions.drift import DriftSync, MirrorFetch
from sessions.events import EventWriter, append_event
from sessions.lease import DriverLease
from sessions.models import Prompt, PullRequest, Session, State
from sessions.pulls import publish_changes
from sessions.screenshots import capture_turn_screenshots
from sessions.totals import TOTALS, totals_changed
from sessions.turn_changes import commit_author, record_turn_diff, report_egress_refusals
from sessions.verification import StopRequested, record_command, verify
from snapshots import agent_installs, mirror
from snapshots.backends import sandbox_backend
from snapshots.prewarm import claim_prewarmed
from snapshots.restore import (
    NoSnapshot,
    Restored,
    newest_ready,
    recipe_of,
    restore_sandbox,
)
from snapshots.sandbox import ExecResult, Limits, Sandbox, SandboxError, SandboxGone

log = logging.getLogger(__name__)

STOP_POLL_SECONDS = 0.1


class LeaseLost(Exception):
    """Another driver took over; this one must stop writing."""


def drive_session(session_id: int) -> str:
    """Run every queued prompt of the session, unless another worker already drives it."""
    outcome = "idle"
    while True:
        lease = DriverLease(session_id)
        if not lease.acquire():
            return "already driven"
        try:
            with lease.heartbeat():
                while not lease.lost.is_set():
                    session = Session.objects.select_related("repository").get(pk=session_id)
                    prompt = _claim_next_prompt(session)
                    if prompt is None:
                        break
                    outcome = TurnRunner(session, prompt, lease).run()
        except LeaseLost:
            return "lease lost"
        finally:
            lease.release()
        # A prompt queued while we were finishing found the lease held; look once more.
        if not Prompt.objects.filter(session_id=session_id, state=Prompt.State.QUEUED).exists():
            return outcome


def _claim_next_prompt(session: Session) -> Prompt | None:
    if session.state in services.NO_MORE_PROMPTS:
        return None
    # A prompt left "running" is a turn whose driver died: resume it first.
    interrupted = session.prompts.filter(state=Prompt.State.RUNNING).order_by("order").first()
    if interrupted is not None:
        return interrupted
    for prompt in session.prompts.filter(state=Prompt.State.QUEUED).order_by("order"):
        now = timezone.now()
        claimed = Prompt.objects.filter(pk=prompt.pk, state=Prompt.State.QUEUED).update(
            state=Prompt.State.RUNNING, started_at=now
        )
        if claimed:  # what the update changed, without reading the row again
            prompt.state, prompt.started_at = Prompt.State.RUNNING, now
            return prompt
    return None


class TurnRunner:
    def __init__(self, session: Session, prompt: Prompt, lease: DriverLease) -> None:
        self.session = session
        self.prompt = prompt
        self.lease = lease
        self.timings: dict[str, float] = {}
        self.sync_alongside = False
        self.verify_ok: bool | None = None
        self.drift_sync: DriftSync | None = None
        self.fetched: MirrorFetch | None = None
        self.started = time.monotonic()
        # What the turn's file-change summary (audited at its end) is made of.
        self.sandbox: Sandbox | None = None
        self.agent_ran = False
        self.commit = ""
        self.changes: dict | None = None
        # The runtime's own message when it ended the turn failed (its work is kept).
        self.agent_failed = ""

    # -- state changes, fenced ------------------------------------------------------------
    def _to(self, target: str, reason: str = "") -> None:
        if self.lease.lost.is_set():
            raise LeaseLost()
        try:
            services.session_transition(self.session, target, fence=self.lease.fence, reason=reason)
        except states.IllegalTransition:
            if self.session.driver_fence != self.lease.fence:
                raise LeaseLost() from None
            raise

    def _save(self, **fields) -> None:
        updated = Session.objects.filter(pk=self.session.pk, driver_fence=self.lease.fence).update(
            **fields
        )
        if not updated:
            raise LeaseLost()
        for key, value in fields.items():
            setattr(self.session, key, value)
        if TOTALS.intersection(fields):
            totals_changed([self.session.pk])

    # -- the turn ---------------------------------------------------------------------------
    def run(self) -> str:
        prompt = self.prompt
        Prompt.objects.filter(pk=prompt.pk).update(attempts=prompt.attempts + 1)
        resumed = prompt.attempts > 0
        self.timings["queue_ms"] = round(
            ((prompt.started_at or timezone.now()) - prompt.created_at).total_seconds() * 1000, 2
        )
        if not (self.session.sandbox_id or self.session.session_snapshot_ref):
            self.fetched = MirrorFetch(self.session.repository).start()  # a first restore
        try:
            self._to(
                State.PROVISIONING,
                reason="resuming after the previous worker stopped" if resumed else "",
            )
            if services.stop_requested(self.session.pk):
                services.clear_stop(self.session.pk)
                self._finish_prompt(Prompt.State.CANCELLED)
                self._to(self._resting_state(), reason="stopped before the turn started")
                return "stopped"
            session = self.session
            backend = sandbox_backend().name
            # Refused before a sandbox is made: an unknown runtime, no upstream, no gateway.
            validate_agent(
                session.agent, session.agent_command, model=session.model, backend=backend
            )
            # A runtime that holds its writes until the sync is done starts while it runs.
            self.sync_alongside = honours_sync(session.agent)
            sandbox = self.sandbox = self._ensure_sandbox(discard_live=resumed)
            self._to(State.RUNNING)
            try:
                stopped = self._run_agent(sandbox, self._runtime(backend))
            finally:
                # The token dies with the agent's run, whatever way it ended.
                model_access.revoke(session.pk, prompt_id=prompt.pk)
                if self.drift_sync is not None:
                    self.drift_sync.join()
            if self.drift_sync is not None:
                self._finish_sync(self.drift_sync)
            if self.agent_failed:
                return self._fail_keeping_work(sandbox, resumed)
            if not stopped:
                self._to(State.VERIFYING)
            self._capture_diff(sandbox)
            if not stopped:
                self._verify(sandbox)
                capture_turn_screenshots(self.session, sandbox, self.prompt)
            report_egress_refusals(self.session, sandbox, self.prompt.order)
            self._snapshot(sandbox)
            self.timings["turn_ms"] = round((time.monotonic() - self.started) * 1000, 2)
            self._save(
                timings={**self.session.timings, **self.timings},
                error="",
                **self._totals(resumed),
            )
            append_event(
                self.session.pk, "turn_finished", {"turn": prompt.order, "timings": self.timings}
            )
            self._finish_prompt(Prompt.State.DONE)
            services.clear_stop(self.session.pk)
            # Published before the turn's end state, so whoever waits for that sees the PR.
            self._publish(sandbox)
            # The review comments this turn answered get the agent's answer as their reply.
            review_comments.review_comments_answer(
                session=self.session, prompt=prompt, commit=self.commit
            )
            if self.session.purpose == Session.Purpose.REVIEW:
                # A review session's answer becomes a review of the PR (it publishes nothing).
                review_agent.review_post(session=self.session, prompt=prompt)
            else:
                self._review_new_pull_request()
            resting = self._resting_state()
            self._to(resting, reason="stopped by " + stopped if stopped else "")
            self._audit_changes(ended=resting, stopped_by=stopped)
            return "stopped" if stopped else "idle"
        except LeaseLost:
            raise
        except database_outage.DATABASE_LOST as exc:
            # The database restarted mid-turn: once it is back, resume from the last snapshot.
            if database_outage.resumable(self.session.pk, prompt.attempts + 1, exc):
                return "resuming"  # drive_session claims this still-running prompt again
            return self._fail(database_outage.failure_message(exc))
        except (SandboxError, AgentError, NoSnapshot, mirror.MirrorError) as exc:
            return self._fail(str(exc))
        except Exception as exc:
            log.exception("turn %s of session %s crashed", prompt.order, self.session.pk)
            return self._fail(f"internal error: {exc.__class__.__name__}: {exc}")

    def _runtime(self, backend: str):
        """This turn's runtime, holding a fresh token for the gateway as its sandbox reaches
        it (the built-in agent runs here, on the worker, so it uses the host's address)."""
        session = self.session
        token = model_access.mint(session, self.prompt, session.agent)
        if session.agent == "builtin":
            base = model_access.host_gateway_base()
        else:
            base = model_access.gateway_base(backend)
        return get_runtime(
            session.agent,
            route=model_access.route_for(base, token),
            command=session.agent_command,
            model=session.model,
            backend=backend,
        )

    def _resting_state(self) -> str:
        """Where a turn ends: waiting on its open pull request, else idle."""
        has_open_pr = PullRequest.objects.filter(
            session=self.session, state=PullRequest.State.OPEN
        ).exists()
        return State.PR_OPEN if has_open_pr else State.IDLE

    def _publish(self, sandbox: Sandbox) -> None:
        """Push the branch and open (once) or update the pull request; never fails the turn."""
        publish_changes(self.session, sandbox, fence=self.lease.fence)
        self.session.refresh_from_db(fields=["state"])

    def _review_new_pull_request(self) -> None:
        """Under the repository's "every PR" review policy, the PR this turn opened gets its
        review session (once: a later turn, or GitHub's webhook, finds it started)."""
        pr = PullRequest.objects.filter(session=self.session, auto_reviewed=False).first()
        if pr is None:
            return
        try:
            review_agent.review_on_open(pr)
        except Exception:  # the turn's work is done; a review that cannot start must not fail it
            log.exception("the review of session %s's pull request did not start", pr.session_id)

    def _totals(self, resumed: bool) -> dict:
        """The session's running totals after this turn (what the metrics aggregate). Not its
        model cost: the gateway adds each request's cost as it is metered (gateway.metering),
        whichever runtime made it; a runtime's own report stays in its `usage` events."""
        session = self.session
        totals = {
            "sandbox_seconds": session.sandbox_seconds + self.timings["turn_ms"] / 1000,
            "retries": session.retries + (1 if resumed else 0),
            "verify_ok": self.verify_ok,
        }
        if session.start_ms is None and "first_event_ms" in self.timings:
            totals["start_ms"] = self.timings["queue_ms"] + self.timings["first_event_ms"]
        if session.snapshot_age_s is None and "snapshot_age_s" in self.timings:
            totals["snapshot_age_s"] = self.timings["snapshot_age_s"]
        return totals

    def _fail_keeping_work(self, sandbox: Sandbox, resumed: bool) -> str:
        """The agent said the turn failed (the model or its CLI refused, it exited non-zero):
        what it changed is committed and snapshotted as for any turn, so nothing is lost, but
        nothing is verified or published and the session ends `failed` with the agent's own
        message (already in the log as its error event). A new prompt retries."""
        message = self.agent_failed
        self._capture_diff(sandbox)
        report_egress_refusals(self.session, sandbox, self.prompt.order)
        self._snapshot(sandbox)
        self.timings["turn_ms"] = round((time.monotonic() - self.started) * 1000, 2)
        self._save(
            timings={**self.session.timings, **self.timings},
            error=message,
            **self._totals(resumed),
        )
        self._finish_prompt(Prompt.State.DONE)
        services.clear_stop(self.session.pk)
        self._to(State.FAILED, reason=message)
        self._audit_changes(ended=State.FAILED)
        return "failed"

    def _fail(self, message: str) -> str:
        append_event(self.session.pk, "error", {"message": message, "turn": self.prompt.order})
        self._finish_prompt(Prompt.State.DONE)
        self._save(error=message)
        if self.session.state != State.FAILED:
            self._to(State.FAILED, reason=message)
        self._audit_changes(ended=State.FAILED)
        return "failed"

    def _audit_changes(self, *, ended: str, stopped_by: str = "") -> None:
        """The turn's file-change summary in the audit log: once, from the one place a turn
        ends, whatever state it ends in (a turn that never got to run its agent changed
        nothing and writes none)."""
        if self.agent_ran:
            turn_audit.record_changes(
                self.session,
                self.prompt,
                commit=self.commit,
                changes=self.changes,
                sandbox=self.sandbox,
                ended=ended,
                stopped_by=stopped_by,
            )

    def _finish_prompt(self, state: str) -> None:
        Prompt.objects.filter(pk=self.prompt.pk).update(state=state, finished_at=timezone.now())

    def _ensure_sandbox(self, *, discard_live: bool) -> Sandbox:
        session = self.session
        backend = sandbox_backend()
        if session.sandbox_id:
            try:
                sandbox = backend.attach(session.sandbox_id)
                if discard_live:
                    # Its workspace holds the lost turn's partial work: start again from the
                    # last session snapshot so that work is not applied twice.
                    sandbox.terminate()
                else:
                    self.timings["restore_ms"] = 0.0
                    return sandbox
            except SandboxGone:
                pass
            self._save(sandbox_id="")
        limits = Limits(wall_seconds=settings.SNAPSHOT_SETUP_TIMEOUT)
        snapshot = session.snapshot or newest_ready(session.repository, session.branch)
        if session.session_snapshot_ref:
            restored = restore_sandbox(
                session.repository,
                snapshot=snapshot,
                snapshot_ref=session.session_snapshot_ref,
                limits=limits,
                on_command=self._record_recipe_command,
            )
            self.timings["restore_ms"] = restored.timings["restore_ms"]
        else:
            restored = self._first_restore(snapshot, limits)
        self._save(
            sandbox_id=restored.sandbox.id,
            sandbox_backend=backend.name,
            snapshot=snapshot,
            base_commit=session.base_commit or restored.snapshot.commit,
        )
        return restored.sandbox

    def _first_restore(self, snapshot, limits: Limits) -> Restored:
        session = self.session
        started = time.perf_counter()
        claimed = claim_prewarmed(session.creator_id, session.repository)
        if claimed is not None:
            restored = Restored(claimed, snapshot, recipe_of(snapshot), snapshot.commit)
            self.timings["restore_ms"] = round((time.perf_counter() - started) * 1000, 2)
            self.timings["prewarmed"] = True
        elif restored := warm_pool.claim_restored(
            session.repository, snapshot, on_command=self._record_recipe_command
        ):
            self.timings["restore_ms"] = round((time.perf_counter() - started) * 1000, 2)
            self.timings["pooled"] = True
        else:
            restored = restore_sandbox(
                session.repository,
                snapshot=snapshot,
                limits=limits,
                sync=False,
                on_command=self._record_recipe_command,
            )
            self.timings["restore_ms"] = restored.timings["restore_ms"]
        self.timings["snapshot_age_s"] = round(snapshot.age.total_seconds(), 1)
        # The sync (mirror fetch, bundle) starts at once: it runs while the state is recorded.
        sync = DriftSync(restored, session.repository, self.fetched).start()
        try:
            self._to(State.SYNCING)
        except BaseException:
            sync.join()
            restored.sandbox.terminate()
            raise
        if self.sync_alongside:
            self.drift_sync = sync
            return restored
        sync.join()
        try:
            self._finish_sync(sync)
        except BaseException:
            restored.sandbox.terminate()
            raise
        return restored

    def _finish_sync(self, sync: DriftSync, writer: EventWriter | None = None) -> None:
        """Record a finished sync once: called by the agent loop as soon as it sees the sync
        done (so the log shows it before the writes that waited for it), else after the turn."""
        if sync.error is not None:
            raise sync.error
        if sync.recorded:
            return
        sync.recorded = True
        restored = sync.restored
        self.timings["sync_ms"] = sync.elapsed_ms
        drift = {
            "commits": restored.drift_commits,
            "files": len(restored.drift_files),
            "stale": restored.stale,
        }
        self._save(drift=drift)
        payload = {"turn": self.prompt.order, "sync_ms": sync.elapsed_ms, "drift": drift}
        if writer is not None:
            writer.add("workspace_synced", payload)
        else:
            append_event(self.session.pk, "workspace_synced", payload)

    def _run_agent(self, sandbox: Sandbox, runtime) -> str:
        """Run the agent; returns who stopped it ('' if it ran to the end)."""
        session, prompt = self.session, self.prompt
        children = None
        if session.agent == "builtin":
            children = SessionChildren(
                session,
                user=prompt.author,
                max_depth=settings.AGENT_CHILD_DEPTH,
                max_per_repository=settings.AGENT_CHILDREN_PER_REPOSITORY,
            )
        turn = Turn(
            sandbox=sandbox,
            prompt=prompt.text,
            author=commit_author(prompt.author),
            instructions=_instructions(sandbox),
            limits=turn_limits(),
            children=children,
            sync_done=self.drift_sync.done if self.drift_sync is not None else None,
            env=agent_env(session),
            approvals=SessionApprovals(session, prompt),
            conversation=conversations.load(session),
            images=conversations.prompt_images(prompt),
            options=self._agent_options(),
        )
        stopped_by: list[str] = []
        finished = threading.Event()
        self.agent_ran = True
        # The process the runtime runs in the sandbox (the `command` agent's command, a CLI),
        # audited when it ends.
        process = runtime.process_command(turn)

        def watch() -> None:
            try:
                while not finished.wait(STOP_POLL_SECONDS):
                    who = services.stop_requested(session.pk)
                    sync_failed = self.drift_sync is not None and self.drift_sync.error
                    if who or self.lease.lost.is_set() or sync_failed:
                        stopped_by.append(who or ("lost lease" if not sync_failed else "sync"))
                        runtime.stop()
                        return
            finally:
                connection.close()  # this thread's own connection

        watcher = threading.Thread(target=watch, daemon=True, name=f"stop-{session.pk}")
        watcher.start()
        started = time.monotonic()
        try:
            with EventWriter(session.pk, first_at_once=True) as writer:
                for event in runtime.run(turn):
                    if "first_event_ms" not in self.timings:
                        self.timings["first_event_ms"] = round(
                            (time.monotonic() - self.started) * 1000, 2
                        )
                    sync = self.drift_sync
                    if sync is not None and sync.done.is_set() and not sync.error:
                        self._finish_sync(sync, writer)
                    if event.kind == "done":
                        if process is not None and "exit_code" in event.data:
                            turn_audit.record_agent_process(
                                self.session, prompt, process, event, started
                            )
                        self.agent_failed = str(event.data.get("failed") or "")
                        continue
                    writer.add(EVENT_KIND[event.kind], {**event.data, "turn": prompt.order})
        finally:
            finished.set()
            watcher.join()
            # Whatever was said this turn (even a failed or stopped one) is part of the
            # conversation the next turn continues.
            conversations.store(session, turn.conversation, fence=self.lease.fence)
        self.timings["agent_ms"] = round((time.monotonic() - started) * 1000, 2)
        if self.lease.lost.is_set():
            raise LeaseLost()
        return stopped_by[0] if stopped_by else ""

    def _agent_options(self) -> dict:
        """A CLI runtime's version: the recipe's pin (`[agents]`) or the platform's, installed on
        this worker and startable with the platform's node — else the turn fails naming the
        runtime and version, in the words `inspect doctor` uses."""
        agent = self.session.agent
        if agent not in agent_installs.PINNED:
            return {}
        snapshot = self.session.snapshot
        pins = dict(recipe_of(snapshot).agents) if snapshot is not None else {}
        version = pins.get(agent) or agent_installs.PINNED[agent].version
        if sandbox_backend().name == "modal":
            if version != agent_installs.PINNED[agent].version:
                raise AgentError(
                    f"{agent_installs.PINNED[agent].label} {version} ({agent}) is pinned by the "
                    "recipe, but the Modal image carries only the platform's version "
                    f"{agent_installs.PINNED[agent].version}"
                )
            return {}
        try:
            # A recipe's pin is installed when its snapshot is built; one somehow missing on this
            # worker is installed now (on the host: the sandbox needs no npm egress).
            agent_installs.ready(agent, version, install_missing=agent in pins)
        except agent_installs.InstallError as exc:
            raise AgentError(str(exc)) from None
        return {"agent_versions": pins} if pins else {}

    def _record_recipe_command(self, phase: str, command: str, result: ExecResult) -> None:
        """A recipe command run while restoring this session's sandbox (`start`): in the
        session's log, and so in the audit log, like `verify`'s."""
        record_command(self.session.pk, self.prompt.order, phase, command, result)

    def _capture_diff(self, sandbox: Sandbox) -> None:
        commit, stats = record_turn_diff(self.session, self.prompt, sandbox, self._save)
        if commit:
            self.commit = commit
        self.changes = {**stats, "paths": stats["paths"][:200]}

    def _verify(self, sandbox: Sandbox) -> None:
        recipe = recipe_of(self.session.snapshot) if self.session.snapshot else None
        self.verify_ok = verify(
            self.session,
            self.prompt,
            sandbox,
            recipe.verify if recipe else (),
            StopRequested(self.session.pk, self.lease.lost),
        )

    def _snapshot(self, sandbox: Sandbox) -> None:
        ref = sandbox.snapshot()
        self._save(session_snapshot_ref=str(ref))


def _instructions(sandbox: Sandbox) -> str:
    for name in ("AGENTS.md", "CLAUDE.md"):
        try:
            return sandbox.read_file(name).decode(errors="replace")[:32_000]
        except (SandboxError, OSError):
            continue
    return ""
