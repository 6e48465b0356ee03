"""Settings page: a repository's approval policy and its egress. The policy is saved through
the same action as `inspect policy set` (approvals.policy_change): a change that gates less
anywhere files a `loosen_policy` request and applies once another reviewer approves it. Egress
is the recipe's, so a change here is written into the dashboard recipe through the action of
`inspect recipe set` (snapshots.egress): wider egress files a `widen_egress` request that
applies only once a reviewer who is not the requester approves it, narrower egress applies at
once."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_http_methods, require_POST

from approvals.models import ApprovalPolicy
from approvals.policy import policy_for
from approvals.policy_change import pending_loosenings, policy_set
from approvals.policy_rules import PolicyError
from settings_area.access import repository_for_settings
from snapshots.controls_cli import default_policy_text
from snapshots.egress import approved_egress, describe, recipe_override_set, widening_requests
from snapshots.models import Repository
from snapshots.recipe import RecipeError
from snapshots.recipe_sources import recipe_in_force, repository_recipe_file, with_egress
from snapshots.sandbox import NetworkPolicy


class PolicyForm(forms.Form):
    text = forms.CharField(
        label="Approval policy (TOML)",
        strip=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "code"}),
    )

    def clean_text(self) -> str:
        return self.cleaned_data["text"].replace("\r\n", "\n")  # a browser's line ends


class EgressForm(forms.Form):
    mode = forms.ChoiceField(
        choices=[
            ("none", "none: no network"),
            ("allowlist", "allowlist: only these domains"),
            ("open", "open: the internet (never the host or private ranges)"),
        ]
    )
    domains = forms.CharField(
        required=False,
        help_text="For an allowlist: one domain per line (*.example.org for its subdomains).",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
    )

    def clean(self) -> dict:
        data = super().clean()
        domains = tuple(d.strip() for d in data.get("domains", "").split() if d.strip())
        try:
            data["policy"] = NetworkPolicy(mode=data.get("mode", "none"), domains=domains)
        except (ValueError, TypeError) as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


def _page(
    request: HttpRequest,
    repository: Repository,
    *,
    policy_form: PolicyForm | None = None,
    egress_form: EgressForm | None = None,
    status: int = 200,
) -> HttpResponse:
    row = ApprovalPolicy.objects.filter(repository=repository).first()
    approved = approved_egress(repository)
    in_force = recipe_in_force(repository, repository_recipe_file(repository))
    context = {
        "repository": repository,
        "policy": policy_for(repository),
        "policy_is_default": row is None,
        "policy_form": policy_form
        or PolicyForm(initial={"text": row.text if row else default_policy_text()}),
        "egress_in_force": describe(approved),
        "egress_asked": describe(in_force.recipe.egress) if in_force.recipe else None,
        "recipe_source": in_force.source,
        "egress_form": egress_form
        or EgressForm(initial={"mode": approved.mode, "domains": "\n".join(approved.domains)}),
        "widening": widening_requests(repository).order_by("-created_at"),
        "loosening": pending_loosenings(repository).order_by("-created_at"),
    }
    return render(request, "settings_area/controls.html", context, status=status)


@login_required
@require_http_methods(["GET"])
def controls_page(request: HttpRequest, name: str) -> HttpResponse:
    return _page(request, repository_for_settings(request.user, name))


@login_required
@require_POST
def policy_save(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    form = PolicyForm(request.POST)
    if form.is_valid():
        try:
            change = policy_set(
                repository=repository, text=form.cleaned_data["text"], by=request.user
            )
        except PolicyError as exc:
            form.add_error("text", f"{exc}; the policy is unchanged")
    if not form.is_valid():
        return _page(request, repository, policy_form=form, status=400)
    if change.approval is None:
        messages.success(request, f"Approval policy of {repository.name} saved.")
    else:
        messages.warning(
            request,
            f"This loosens the policy ({'; '.join(change.loosens)}): approval request "
            f"{change.approval.pk} is waiting for a reviewer. The policy is unchanged until a "
            "reviewer other than you approves it.",
        )
    return redirect("settings_area:controls", repository.name)


@login_required
@require_POST
def egress_save(request: HttpRequest, name: str) -> HttpResponse:
    """Write the egress into the dashboard recipe (the file's recipe copied when there is no
    override yet) and save it through the recipe's action, which holds back a widening."""
    repository = repository_for_settings(request.user, name)
    form = EgressForm(request.POST)
    if form.is_valid():
        base = repository.recipe_override
        if not base.strip():
            file = repository_recipe_file(repository)
            if file.text is None:
                form.add_error(
                    None,
                    f"The repository's recipe file cannot be read ({file.note}); build once, "
                    "or set the egress in the recipe on the Recipe page.",
                )
            base = file.text or ""
    if form.is_valid():
        try:
            pending = recipe_override_set(
                repository=repository,
                text=with_egress(base, form.cleaned_data["policy"]),
                by=request.user,
            )
        except RecipeError as exc:
            form.add_error(None, f"{exc.position + ': ' if exc.position else ''}{exc}")
    if not form.is_valid():
        return _page(request, repository, egress_form=form, status=400)
    if pending is None:
        messages.success(
            request, f"Egress of {repository.name} is now {describe(approved_egress(repository))}."
        )
    else:
        messages.warning(
            request,
            f"This widens egress ({pending.payload['summary']}): approval request {pending.pk} "
            "is pending. It applies once a reviewer other than you approves it.",
        )
    return redirect("settings_area:controls", repository.name)


urlpatterns = [
    path("repositories/<slug:name>/controls/", controls_page, name="controls"),
    path("repositories/<slug:name>/controls/policy/", policy_save, name="controls_policy"),
    path("repositories/<slug:name>/controls/egress/", egress_save, name="controls_egress"),
]
