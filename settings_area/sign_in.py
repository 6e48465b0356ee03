"""Settings › Sign-in (site admins): single sign-on with OpenID Connect, who it lets in, the role
a new user gets, and whether local passwords still work.

The settings live in accounts.social_apps (the environment wins; a pinned field shows read-only).
`configure_sign_in` is the one action that changes them: it validates everything first (the
issuer must answer as an OpenID provider), saves atomically and audits, never the secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path, reverse

from accounts import social_apps
from accounts.models import Role
from approvals import audit
from inspect_web import site_settings
from inspect_web.models import SiteSetting
from settings_area.access import require_site_admin
from snapshots.models import Repository

# The page's fields and the site settings they hold (the secret is handled on its own).
FIELDS = {
    "name": social_apps.OIDC_NAME.name,
    "server_url": social_apps.OIDC_SERVER_URL.name,
    "client_id": social_apps.OIDC_CLIENT_ID.name,
    "allowed_domains": social_apps.SSO_ALLOWED_DOMAINS.name,
    "default_role": social_apps.SSO_DEFAULT_ROLE.name,
    "default_repositories": social_apps.SSO_DEFAULT_REPOSITORIES.name,
    "local_passwords_off": social_apps.LOCAL_PASSWORDS_OFF.name,
}
SECRET = social_apps.OIDC_CLIENT_SECRET.name
OIDC_FIELDS = ("name", "server_url", "client_id")


class SignInRefused(Exception):
    """A change that cannot be saved; `field` is the form field it is about ("" for the form)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass
class SignInChange:
    name: str = ""
    server_url: str = ""
    client_id: str = ""
    client_secret: str = ""  # "" keeps the stored one
    allowed_domains: str = ""
    default_role: str = ""
    default_repositories: list[str] = field(default_factory=list)
    local_passwords_off: bool = False


def _secret_present() -> bool:
    """Whether a client secret is in force, without decrypting it."""
    return bool(getattr(settings, site_settings.declared(SECRET).setting_name, "")) or (
        SiteSetting.objects.filter(name=SECRET).exists()
    )


def pinned() -> set[str]:
    """The page's fields the environment sets (they cannot be changed here)."""
    names = {**FIELDS, "client_secret": SECRET}
    return {
        form_field
        for form_field, name in names.items()
        if site_settings.in_force(name).source == site_settings.ENVIRONMENT
    }


def _stored_values(change: SignInChange) -> dict[str, str]:
    return {
        FIELDS["name"]: change.name.strip(),
        FIELDS["server_url"]: change.server_url.strip().rstrip("/"),
        FIELDS["client_id"]: change.client_id.strip(),
        FIELDS["allowed_domains"]: ", ".join(social_apps.parse_domains(change.allowed_domains)),
        FIELDS["default_role"]: change.default_role,
        FIELDS["default_repositories"]: ", ".join(sorted(change.default_repositories)),
        FIELDS["local_passwords_off"]: "1" if change.local_passwords_off else "",
    }


def _validate(change: SignInChange, fixed: set[str]) -> None:
    try:
        social_apps.parse_domains(change.allowed_domains)
    except ValueError as exc:
        raise SignInRefused(f"{exc}.", "allowed_domains") from None
    if change.default_role and change.default_role not in Role.values:
        raise SignInRefused("Choose one of the roles listed.", "default_role")
    if change.default_role and not change.default_repositories:
        raise SignInRefused(
            "Choose the repositories a new user joins with this role.", "default_repositories"
        )
    if change.default_repositories and not change.default_role:
        raise SignInRefused(
            "Choose the role a new user gets on these repositories.", "default_role"
        )
    known = set(
        Repository.objects.filter(name__in=change.default_repositories).values_list(
            "name", flat=True
        )
    )
    if missing := sorted(set(change.default_repositories) - known):
        raise SignInRefused(f"No repository named {', '.join(missing)}.", "default_repositories")
    server_url = change.server_url.strip()
    has_secret = bool(change.client_secret) or _secret_present()
    if server_url or change.client_id.strip():
        if not server_url:
            raise SignInRefused("Give the provider's issuer URL.", "server_url")
        if not change.client_id.strip():
            raise SignInRefused(
                "Give the client id the provider issued for this site.", "client_id"
            )
        if not has_secret:
            raise SignInRefused("Give the client secret the provider issued.", "client_secret")
        if "server_url" not in fixed:
            try:
                social_apps.check_openid_provider(server_url)
            except social_apps.ProviderRefused as exc:
                raise SignInRefused(str(exc), "server_url") from None
    if change.local_passwords_off and not (server_url or social_apps.github_login_enabled()):
        raise SignInRefused(
            "Turning local passwords off needs single sign-on or GitHub login set up first, "
            "or nobody could log in.",
            "local_passwords_off",
        )


def configure_sign_in(change: SignInChange, *, by) -> list[str]:
    """Validate, save and audit a change of the sign-in settings; returns the names of the
    settings changed. SignInRefused (nothing saved) says what to fix."""
    fixed = pinned()
    _validate(change, fixed)
    wanted = _stored_values(change)
    if not change.server_url.strip() and "server_url" not in fixed:
        change.client_secret = ""  # single sign-on removed: its secret goes too
    changed: dict[str, str] = {}
    for form_field, name in FIELDS.items():
        if form_field not in fixed and site_settings.value(name) != wanted[name]:
            changed[name] = wanted[name]
    secret_changed = "client_secret" not in fixed and (
        bool(change.client_secret)
        or (not change.server_url.strip() and SiteSetting.objects.filter(name=SECRET).exists())
    )
    if not changed and not secret_changed:
        return []
    with transaction.atomic():
        for name, new_value in changed.items():
            site_settings.store(name, new_value, by=by)
        if secret_changed:
            site_settings.store(SECRET, change.client_secret, by=by)
        audit.record(
            "settings.sign_in",
            actor=by,
            object_type="site_setting",
            object_id="sign_in",
            # Values of the plain settings; of the secret, only that it changed.
            data={"changed": changed, "client_secret_changed": secret_changed},
        )
    return [*changed, *([SECRET] if secret_changed else [])]


class SignInForm(forms.Form):
    name = forms.CharField(
        label="Name on the login button", required=False, max_length=60,
        help_text='Shown as "Log in with …"; "single sign-on" when empty.',
    )  # fmt: skip
    server_url = forms.CharField(
        label="Issuer URL", required=False, max_length=500,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="The provider's issuer, e.g. https://login.example.com/realms/staff; "
        "its /.well-known/openid-configuration must answer.",
    )  # fmt: skip
    client_id = forms.CharField(label="Client id", required=False, max_length=200)
    client_secret = forms.CharField(
        label="Client secret", required=False, max_length=500,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Write-only: leave empty to keep the stored one.",
    )  # fmt: skip
    allowed_domains = forms.CharField(
        label="Allowed e-mail domains", required=False, max_length=1000,
        help_text="Comma-separated; empty lets in anyone the provider signs in. A user whose "
        "verified address is elsewhere is refused.",
    )  # fmt: skip
    default_role = forms.ChoiceField(
        label="Role of a new user", required=False,
        choices=[("", "None (an admin adds them)"), *Role.choices],
    )  # fmt: skip
    default_repositories = forms.MultipleChoiceField(
        label="On these repositories", required=False, widget=forms.CheckboxSelectMultiple
    )
    local_passwords_off = forms.BooleanField(
        label="Local passwords off", required=False,
        help_text="Only single sign-on and GitHub log in; password login and sign-up are refused.",
    )  # fmt: skip

    def __init__(self, *args, fixed: set[str] = frozenset(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        names = Repository.objects.order_by("name").values_list("name", flat=True)
        self.fields["default_repositories"].choices = [(name, name) for name in names]
        for name in fixed:
            self.fields[name].disabled = True
            self.fields[name].help_text = "Set by the environment; change it there."

    def change(self) -> SignInChange:
        data = self.cleaned_data
        return SignInChange(
            name=data["name"], server_url=data["server_url"], client_id=data["client_id"],
            client_secret=data["client_secret"], allowed_domains=data["allowed_domains"],
            default_role=data["default_role"],
            default_repositories=list(data["default_repositories"]),
            local_passwords_off=data["local_passwords_off"],
        )  # fmt: skip


def _initial() -> dict:
    values = {f: site_settings.value(s) for f, s in FIELDS.items()}
    values["default_repositories"] = [
        name for name in values["default_repositories"].replace(",", " ").split() if name
    ]
    values["local_passwords_off"] = bool(values["local_passwords_off"])
    return values


def _test(form: SignInForm) -> tuple[bool, str]:
    server_url = (form.cleaned_data.get("server_url") or "").strip()
    if not server_url:
        return False, "Give the provider's issuer URL to test it."
    try:
        document = social_apps.check_openid_provider(server_url)
    except social_apps.ProviderRefused as exc:
        return False, str(exc)
    return True, (
        f"{document['issuer']} is an OpenID provider; users will log in at "
        f"{document['authorization_endpoint']}. Nothing is saved until you press Save."
    )


@login_required
def sign_in(request: HttpRequest) -> HttpResponse:
    require_site_admin(request.user)
    fixed = pinned()
    tested: tuple[bool, str] | None = None
    if request.method == "POST":
        form = SignInForm(request.POST, initial=_initial(), fixed=fixed)
        if form.is_valid():
            if request.POST.get("action") == "test":
                tested = _test(form)
            else:
                try:
                    changed = configure_sign_in(form.change(), by=request.user)
                except SignInRefused as exc:
                    form.add_error(exc.field or None, exc.message)
                else:
                    messages.success(
                        request, "Sign-in settings saved." if changed else "Nothing changed."
                    )
                    return redirect("settings_area:sign_in")
    else:
        form = SignInForm(initial=_initial(), fixed=fixed)
    apps = social_apps.apps()
    context = {
        "form": form,
        "tested": tested,
        "secret_stored": _secret_present(),
        "callback_url": request.build_absolute_uri(
            reverse("openid_connect_callback", kwargs={"provider_id": social_apps.OIDC_PROVIDER_ID})
        ),
        "github_login": any(app.provider == social_apps.GITHUB for app in apps),
        "sso_active": any(app.provider == social_apps.OIDC for app in apps),
    }
    return render(request, "settings_area/sign_in.html", context)


urlpatterns: list[URLPattern] = [path("sign-in/", sign_in, name="sign_in")]
