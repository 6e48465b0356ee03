"""Settings page: a repository's recipe — its file, the dashboard override and the recipe in
force; the override's editor (checked as you type by the build's own parser, saved through the
same action as `inspect recipe set`) and "Build now" with the build's log live on the page."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from settings_area.access import repository_for_settings
from snapshots.actions import snapshot_refresh_request
from snapshots.egress import (
    approved_egress,
    describe,
    recipe_override_set,
    widening_requests,
    widens,
)
from snapshots.live_log import lines_after
from snapshots.models import Repository, Snapshot
from snapshots.recipe import Recipe, RecipeError, parse_recipe
from snapshots.recipe_sources import OVERRIDE_SOURCE, recipe_in_force, repository_recipe_file

POLL = "500ms"
QUEUE_PATIENCE_SECONDS = 600  # a build no worker picked up by then is reported, not awaited


class RecipeForm(forms.Form):
    text = forms.CharField(
        required=False,
        label="Dashboard override (TOML)",
        strip=False,
        widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false", "class": "code"}),
    )

    def clean_text(self) -> str:
        return _lines(self.cleaned_data["text"])


def _lines(text: str) -> str:
    """A browser sends a textarea's lines ending in CRLF; the recipe is stored as the CLI
    stores it."""
    return text.replace("\r\n", "\n")


def _check(text: str, repository: Repository) -> dict:
    """What the editor says about `text`: the parser's error (with its position), or what
    saving it would do (egress that waits for approval)."""
    if not text.strip():
        return {"ok": True, "empty": True}
    try:
        recipe = parse_recipe(text, where=OVERRIDE_SOURCE)
    except RecipeError as exc:
        return {"ok": False, "error": exc}
    approved = approved_egress(repository)
    return {
        "ok": True,
        "recipe": recipe,
        "widens": widens(approved, recipe.egress),
        "asked": describe(recipe.egress),
        "approved": describe(approved),
    }


def _context(repository: Repository, form: RecipeForm, check: dict | None = None) -> dict:
    file = repository_recipe_file(repository)
    building = (
        Snapshot.objects.filter(repository=repository, state=Snapshot.State.BUILDING)
        .order_by("-created_at")
        .first()
    )
    in_force = recipe_in_force(repository, file)
    return {
        "repository": repository,
        "file": file,
        "override": repository.recipe_override,
        "in_force": in_force,
        "rows": _rows(in_force.recipe) if in_force.recipe is not None else [],
        "egress_in_force": describe(approved_egress(repository)),
        "widening": widening_requests(repository).order_by("-created_at"),
        "form": form,
        "check": check,
        "building": building,
        "poll": POLL,
    }


def _rows(recipe: Recipe) -> list[tuple[str, str]]:
    """The recipe in force, key by key, as the page lists it."""
    preview = recipe.preview
    return [
        ("setup", "\n".join(recipe.setup) or "—"),
        ("start", "\n".join(str(c) for c in recipe.start) or "—"),
        ("verify", "\n".join(recipe.verify) or "—"),
        ("preview", f"{preview.command} → {preview.url}" if preview else "—"),
        ("ui", ", ".join(recipe.ui) or "—"),
        ("egress (asked)", describe(recipe.egress)),
        ("refresh_minutes", str(recipe.refresh_minutes)),
        ("agents", ", ".join(f"{name} {version}" for name, version in recipe.agents) or "—"),
    ]


@login_required
@require_http_methods(["GET", "POST"])
def recipe_page(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    if request.method == "GET":
        form = RecipeForm(initial={"text": repository.recipe_override})
        return render(request, "settings_area/recipe.html", _context(repository, form))
    form = RecipeForm(request.POST)
    if not form.is_valid():
        return render(request, "settings_area/recipe.html", _context(repository, form), status=400)
    try:
        pending = recipe_override_set(
            repository=repository, text=form.cleaned_data["text"], by=request.user
        )
    except RecipeError as exc:
        context = _context(repository, form, {"ok": False, "error": exc})
        return render(request, "settings_area/recipe.html", context, status=400)
    if pending is None:
        messages.success(request, f"Recipe of {repository.name} saved.")
    else:
        messages.warning(
            request,
            f"This recipe widens egress ({pending.payload['summary']}): approval request "
            f"{pending.pk} is pending. The recipe applies once a reviewer other than you "
            "approves it.",
        )
    return redirect("settings_area:recipe", repository.name)


@login_required
@require_POST
def recipe_validate(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    check = _check(_lines(request.POST.get("text", "")), repository)
    return render(request, "settings_area/recipe_check.html", {"check": check, "oob": True})


@login_required
@require_POST
def recipe_build(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    since = time.time()
    snapshot_refresh_request(repository, user=request.user)
    if not request.headers.get("HX-Request"):
        messages.success(request, f"A fresh snapshot of {repository.name} is being built.")
        return redirect("settings_area:recipe", repository.name)
    return render(
        request,
        "settings_area/recipe_build_log.html",
        {"repository": repository, "lines": [], "after": 0, "since": f"{since:.3f}",
         "status": "Queued: waiting for a worker…", "poll": POLL},
    )  # fmt: skip


@login_required
@require_GET
def recipe_build_log(request: HttpRequest, name: str) -> HttpResponse:
    """The next lines of the build's log and its state; the fragment polls again until the
    build ends."""
    repository = repository_for_settings(request.user, name)
    after = _number(request.GET.get("after"), 0)
    since = _number(request.GET.get("since"), time.time())
    builds = Snapshot.objects.filter(repository=repository)
    if request.GET.get("snapshot", "").isdigit():
        snapshot = builds.filter(pk=int(request.GET["snapshot"])).first()
    else:
        started = datetime.fromtimestamp(since - 1, tz=UTC)
        snapshot = (
            builds.filter(Q(state=Snapshot.State.BUILDING) | Q(created_at__gte=started))
            .order_by("-created_at")
            .first()
        )
    context = {"repository": repository, "since": f"{since:.3f}", "poll": POLL, "after": 0}
    if snapshot is None:
        waited = time.time() - since
        if waited > QUEUE_PATIENCE_SECONDS:
            context["gave_up"] = (
                f"No worker started the build in {QUEUE_PATIENCE_SECONDS // 60} minutes; "
                "is a Celery worker running?"
            )
        context["status"] = "Queued: waiting for a worker…"
        return render(request, "settings_area/recipe_build_log.html", context)
    # The state is read before the lines: a build seen as ended has all its lines in place.
    lines = lines_after(snapshot, int(after))
    finished = snapshot.state != Snapshot.State.BUILDING
    context.update(
        snapshot=snapshot,
        lines=lines,
        after=int(after) + len(lines),
        finished=finished,
        status=f"Building snapshot {snapshot.pk}…",
    )
    return render(request, "settings_area/recipe_build_log.html", context)


def _number(text: str | None, default: float) -> float:
    """A count or a time from the poller's address; `default` for anything else."""
    try:
        value = float(text or "")
    except ValueError:
        return default
    return value if math.isfinite(value) and 0 <= value <= time.time() + 60 else default


urlpatterns = [
    path("repositories/<slug:name>/recipe/", recipe_page, name="recipe"),
    path("repositories/<slug:name>/recipe/check/", recipe_validate, name="recipe_validate"),
    path("repositories/<slug:name>/recipe/build/", recipe_build, name="recipe_build"),
    path("repositories/<slug:name>/recipe/build/log/", recipe_build_log, name="recipe_build_log"),
]
