"""The first-run checklist on the home page: what a new admin does in their first hour, each
step with its state and the page that does it. Shown to repository and site admins until every
step is done."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

from accounts.models import Membership, Role
from sessions.agents import providers
from sessions.models import Session
from settings_area.access import administered, is_site_admin, may_open_settings
from snapshots.models import Snapshot


@dataclass(frozen=True)
class Step:
    title: str
    done: bool
    detail: str
    url: str


def _url(name: str, *args: str, fallback: str = "") -> str:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return fallback


def first_run_steps(user) -> list[Step]:
    """The checklist for `user`; empty when they administer nothing or every step is done."""
    if not may_open_settings(user):
        return []
    repositories = list(administered(user))
    first = repositories[0].name if repositories else ""
    names = ", ".join(r.name for r in repositories[:3]) + ("…" if len(repositories) > 3 else "")
    built = Snapshot.objects.filter(
        repository__in=repositories, state=Snapshot.State.READY
    ).exists()
    team = Membership.objects.filter(repository__in=repositories).exclude(role=Role.ADMIN).exists()
    model = providers.model_configured()
    sessions = Session.objects.filter(repository__in=repositories).exists()
    repository_page = _url("settings_area:repositories")
    steps = [
        Step(
            "Add a repository",
            bool(repositories),
            names or "By URL or path, or from the GitHub App's installations.",
            repository_page,
        ),
        Step(
            "Build its snapshot",
            built,
            "Ready: sessions start from it in milliseconds."
            if built
            else "Clone, set up and freeze the repository; edit the recipe first if it needs one.",
            _url("settings_area:recipe", first, fallback=_url("snapshots:list"))
            if first
            else repository_page,
        ),
        Step(
            "Connect a model",
            model,
            "A provider key is configured; agents reach it through the model gateway."
            if model
            else "Add an OpenAI, Anthropic or OpenAI-compatible provider and test it.",
            _url("settings_area:providers") if is_site_admin(user) else "",
        ),
        Step(
            "Invite the team",
            team,
            "Engineers start sessions; reviewers approve merges and wider egress.",
            _url("settings_area:people", first) if first else repository_page,
        ),
        Step(
            "Run a first session",
            sessions,
            "Describe a task; the agent works in the sandbox and opens a pull request.",
            _url("sessions:new"),
        ),
    ]
    return [] if all(step.done for step in steps) else steps
