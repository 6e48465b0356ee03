"""Settings pages: a repository's people. Its admins (and site admins) list members, change a
role, remove a member and invite by username or e-mail; each change is snapshots.members' (the
same actions as `inspect member …`), audited there. The invitation link's own page is
settings_area.invitations."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from accounts.models import Role
from settings_area.access import repository_for_settings
from snapshots.members import (
    MemberRefused,
    invite,
    member_remove,
    member_set_role,
    members_of,
    pending_invitations,
)


class InviteForm(forms.Form):
    who = forms.CharField(
        label="Username or e-mail",
        max_length=254,
        help_text="An account's username, or an e-mail address (someone without an account "
        "gets an invitation link).",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ENGINEER)


def _page(request: HttpRequest, repository, *, form=None, link: str = "", status: int = 200):
    return render(
        request,
        "settings_area/people.html",
        {
            "repository": repository,
            "memberships": members_of(repository),
            "invitations": pending_invitations(repository),
            "roles": Role.choices,
            "form": form or InviteForm(),
            "invitation_link": link,
        },
        status=status,
    )


@login_required
def people(request: HttpRequest, name: str) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    if request.method != "POST":
        return _page(request, repository)
    form = InviteForm(request.POST)
    if not form.is_valid():
        return _page(request, repository, form=form, status=400)
    data = form.cleaned_data
    try:
        invited = invite(
            repository,
            data["who"],
            data["role"],
            by=request.user,
            base_url=request.build_absolute_uri("/"),
        )
    except MemberRefused as exc:
        form.add_error("role" if exc.field == "role" else "who", str(exc))
        return _page(request, repository, form=form, status=400)
    if invited.membership is not None:
        member = invited.membership
        messages.success(request, f"{member.user.get_username()} is now {member.role}.")
        return redirect("settings_area:people", repository.name)
    # Shown once, on this response only: only the token's hash is stored.
    messages.success(
        request,
        f"Invitation sent to {invited.invitation.email}. The link works once, for 7 days.",
    )
    return _page(request, repository, link=invited.link)


def _member(repository, user_id: int):
    user = get_user_model().objects.filter(pk=user_id, memberships__repository=repository).first()
    if user is None:
        raise Http404("No member matches this address.")
    return user


@login_required
@require_POST
def person_role(request: HttpRequest, name: str, user_id: int) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    user = _member(repository, user_id)
    try:
        member_set_role(repository, user, request.POST.get("role", ""), by=request.user)
    except MemberRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{user.get_username()} is now {request.POST['role']}.")
    return redirect("settings_area:people", repository.name)


@login_required
@require_POST
def person_remove(request: HttpRequest, name: str, user_id: int) -> HttpResponse:
    repository = repository_for_settings(request.user, name)
    user = _member(repository, user_id)
    try:
        member_remove(repository, user, by=request.user)
    except MemberRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{user.get_username()} is no longer a member.")
    return redirect("settings_area:people", repository.name)


urlpatterns = [
    path("repositories/<slug:name>/people/", people, name="people"),
    path("repositories/<slug:name>/people/<int:user_id>/role/", person_role, name="people_role"),
    path(
        "repositories/<slug:name>/people/<int:user_id>/remove/",
        person_remove,
        name="people_remove",
    ),
]
