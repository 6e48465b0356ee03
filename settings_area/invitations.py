"""The invitation link's page, `/invitations/<token>/` (routed by inspect_web/urls.py).

Logged out: the token is kept in the visitor's session, which opens sign-up for them alone even
when open sign-up is off (accounts.identity.AccountAdapter), and the new account gets the
invited address; after signing up or in they come back here. Logged in: one button joins the
repository (snapshots.members.invitation_accept, audited). A used, expired or unknown link
says so.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse

from accounts import invitations
from snapshots.members import MemberRefused, invitation_accept


def _closed(request: HttpRequest, reason: str, status: int) -> HttpResponse:
    request.session.pop(invitations.SESSION_KEY, None)
    return render(
        request, "settings_area/people_invitation.html", {"closed": reason}, status=status
    )


def invitation(request: HttpRequest, token: str) -> HttpResponse:
    found = invitations.find(token)
    if (reason := invitations.why_closed(found)) is not None:
        return _closed(request, reason, 404 if found is None else 410)
    here = reverse("invitation", args=[token])
    if not request.user.is_authenticated:
        request.session[invitations.SESSION_KEY] = token
        return render(
            request,
            "settings_area/people_invitation.html",
            {
                "invitation": found,
                "signup_url": reverse("account_signup")
                + "?"
                + urlencode({"next": here, "email": found.email}),
                "login_url": reverse("account_login") + "?" + urlencode({"next": here}),
            },
        )
    if request.method == "POST":
        try:
            membership = invitation_accept(token, request.user)
        except MemberRefused as exc:
            return _closed(request, str(exc), 410)
        request.session.pop(invitations.SESSION_KEY, None)
        messages.success(request, f"You are now {membership.role} on {membership.repository.name}.")
        return redirect("home")
    return render(request, "settings_area/people_invitation.html", {"invitation": found})


urlpatterns = [path("<str:token>/", invitation, name="invitation")]
