"""The model provider accounts an admin sets at run time (site admins only, every change
audited, never the key): what the settings area's Models page and `manage.py inspect models
provider` both call. The values are the run-time settings declared in
`sessions.agents.provider_accounts` (keys sealed); the environment wins, so a setting the
deployer pinned cannot be changed here. The Test makes one tiny request (the provider's model
list) through the gateway's own forwarder, so it fails exactly as the agents would."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.core.exceptions import PermissionDenied
from django.db import transaction

from approvals import audit
from gateway.allowed_models import NAME as MODEL_NAME
from gateway.forward import Forwarder, Unreachable, Upstream, configured_upstream
from gateway.wire import ANTHROPIC, route_for
from inspect_web import site_settings
from inspect_web.sealing import SecretsUnavailable
from sessions.agents import provider_accounts as accounts
from sessions.agents.provider_accounts import Account

_STORED = site_settings.InForce("", site_settings.SETTINGS_PAGE)  # an undecryptable stored key
NOT_ADMIN = "Only a site admin changes the model providers; ask one."
MAX_KEY = 500
TEST_SECONDS = 20
ANTHROPIC_VERSION = "2023-06-01"
# The settings each kind of account writes (the OpenAI route's two kinds share them).
NAMES = {
    accounts.OPENAI: (accounts.OPENAI_KEY.name, accounts.OPENAI_BASE.name),
    accounts.COMPATIBLE: (accounts.OPENAI_KEY.name, accounts.OPENAI_BASE.name),
    accounts.ANTHROPIC: (accounts.ANTHROPIC_KEY.name, accounts.ANTHROPIC_BASE.name),
}


class ProviderError(ValueError):
    """Input that cannot be saved or tested; `field` names the form field it is about."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class TestResult:
    ok: bool
    status: int  # the provider's HTTP status; 0 when it could not be reached
    message: str

    def __str__(self) -> str:
        return self.message


def may_manage_providers(user) -> bool:
    return bool(
        getattr(user, "is_authenticated", False)
        and user.is_active
        and (user.is_superuser or user.is_staff)
    )


def require_provider_admin(user) -> None:
    if not may_manage_providers(user):
        raise PermissionDenied(NOT_ADMIN)


def provider_list() -> list[Account]:
    return accounts.accounts()


def account_of(kind: str) -> Account:
    for account in accounts.accounts():
        if account.kind == kind:
            return account
    raise ProviderError(
        f"{kind!r} is not a kind of provider account; use one of: {', '.join(accounts.KINDS)}.",
        field="kind",
    )


def _clean_key(key: str) -> str:
    key = (key or "").strip()
    if len(key) > MAX_KEY:
        raise ProviderError(f"That key is longer than {MAX_KEY} characters.", field="key")
    if any(c.isspace() or not c.isprintable() for c in key):
        raise ProviderError(
            "The key has spaces, line breaks or invisible characters in it; paste it again.",
            field="key",
        )
    return key


def _clean_url(url: str, kind: str) -> str:
    url = (url or "").strip().rstrip("/")
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProviderError(
            f"{url!r} is not an http(s) URL, e.g. http://127.0.0.1:11434/v1.", field="base_url"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ProviderError(
            "Give the base URL without a user name, password, query or #fragment "
            "(a key goes in the key field, where it is kept sealed).",
            field="base_url",
        )
    if kind == accounts.COMPATIBLE and parts.hostname == accounts.HOSTED_OPENAI:
        raise ProviderError(
            "That is OpenAI's own API: set it as the OpenAI account instead.", field="base_url"
        )
    return url


def _in_force(name: str) -> site_settings.InForce | None:
    try:
        return site_settings.in_force(name)
    except SecretsUnavailable:
        return None  # stored, and undecryptable: replacing it is the fix


def _refuse_environment(names: dict[str, str]) -> None:
    """ProviderError when a setting would change away from what the environment fixes (the
    environment wins, so the change would do nothing)."""
    for name, new in names.items():
        force = _in_force(name)
        if force and force.source == site_settings.ENVIRONMENT and new != force.value:
            raise ProviderError(
                f"{name} is set in the platform's environment, which wins over this page; "
                "change or unset it where the platform is deployed, then restart it."
            )


def provider_set(*, kind: str, by, key: str = "", base_url: str | None = None) -> Account:
    """Set or replace one account (site admins). A blank key keeps the account's key when it
    is already this kind of account, as `base_url=None` keeps its URL ('' is the provider's
    default); switching the OpenAI route between OpenAI and an OpenAI-compatible server drops
    the old key, so it is never sent to the other. ProviderError names the field for bad
    input; nothing is saved then. Audited without the key."""
    require_provider_admin(by)
    current = account_of(kind)
    key_name, base_name = NAMES[kind]
    key = _clean_key(key)
    if base_url is None and kind != accounts.OPENAI:
        base_url = current.base_url if current.configured else ""
    url = _clean_url(base_url or "", kind)
    if kind == accounts.OPENAI:
        url = ""  # OpenAI's own address: the default
    elif kind == accounts.COMPATIBLE and not url:
        raise ProviderError(
            "An OpenAI-compatible server needs its base URL, e.g. http://127.0.0.1:11434/v1 "
            "for Ollama.",
            field="base_url",
        )
    kept = not key and current.key_set
    if not key and not kept and kind != accounts.COMPATIBLE:
        raise ProviderError(f"Paste the {current.label} API key.", field="key")
    writes = {base_name: url}
    base_force = _in_force(base_name)
    fixed = base_force.source == site_settings.ENVIRONMENT
    if fixed and kind != accounts.OPENAI and url in ("", base_force.value):
        writes = {}  # the URL the environment fixes stays in force, and is not copied here
    if not kept:
        writes[key_name] = key
    _refuse_environment(writes)
    try:
        with transaction.atomic():
            for name, new in writes.items():
                site_settings.store(name, new, by=by)
            audit.record(
                "model_provider.set",
                actor=by,
                object_type="model_provider",
                object_id=kind,
                data={
                    "kind": kind,
                    "key": "kept" if kept else ("replaced" if key else "none"),
                    "base_url": url or "(default)",
                },
            )
    except SecretsUnavailable as exc:
        raise ProviderError(str(exc), field="key") from None
    return account_of(kind)


def provider_remove(*, kind: str, by) -> None:
    """Remove an account's key and address from the settings page (site admins); audited.
    What the environment sets stays (ProviderError says so)."""
    require_provider_admin(by)
    account = account_of(kind)
    if not (account.configured or account.error):
        raise ProviderError(f"No {account.label} account is set.")
    names = NAMES[kind]
    stored = [n for n in names if (_in_force(n) or _STORED).source == site_settings.SETTINGS_PAGE]
    if not stored:
        raise ProviderError(
            f"The {account.label} account comes from the platform's environment, which wins "
            "over this page; unset it where the platform is deployed."
        )
    with transaction.atomic():
        for name in stored:
            site_settings.store(name, "", by=by)
        audit.record(
            "model_provider.remove",
            actor=by,
            object_type="model_provider",
            object_id=kind,
            data={"kind": kind, "removed": stored},
        )


def provider_test(*, kind: str, by) -> TestResult:
    """One tiny request to the account's provider (its model list) through the gateway's
    forwarder: success, or the provider's own status and message (a refused key: "401: …").
    Site admins; audited with the outcome."""
    require_provider_admin(by)
    account = account_of(kind)
    if not account.configured:
        raise ProviderError(f"No {account.label} account to test; set it first.")
    upstream = configured_upstream(account.upstream)
    result = asyncio.run(probe(upstream))
    audit.record(
        "model_provider.test",
        actor=by,
        object_type="model_provider",
        object_id=kind,
        data={"kind": kind, "ok": result.ok, "status": result.status},
    )
    return result


async def probe(upstream: Upstream) -> TestResult:
    """GET the provider's model list the way the gateway forwards one."""
    path = "/anthropic/v1/models" if upstream.provider == ANTHROPIC else "/openai/v1/models"
    route = route_for("GET", path)
    client_headers = {"accept": "application/json", "user-agent": "inspect-web-test"}
    if upstream.provider == ANTHROPIC:
        client_headers["anthropic-version"] = ANTHROPIC_VERSION
    forwarder = Forwarder(read_timeout=TEST_SECONDS)
    try:
        headers = forwarder.upstream_headers(upstream, client_headers)
        async with asyncio.timeout(TEST_SECONDS):
            async with forwarder.open(
                upstream, "GET", route.upstream_path, "", headers, b""
            ) as response:
                body = bytearray()
                async for chunk in response.chunks:
                    body += chunk
                    if len(body) > 1024 * 1024:
                        break
    except Unreachable as exc:
        return TestResult(False, 0, str(exc))
    except TimeoutError:
        return TestResult(
            False, 0, f"the model provider at {upstream.base_url} did not answer in time"
        )
    finally:
        await forwarder.close()
    text = bytes(body).decode("utf-8", "replace")
    if upstream.key:
        text = text.replace(upstream.key, "[redacted]")
    if response.status >= 400:
        return TestResult(False, response.status, f"{response.status}: {_message(text)}")
    return TestResult(True, response.status, _listed(text, upstream.base_url, bool(upstream.key)))


def _message(text: str) -> str:
    """The provider's own error message from its error body (either provider's shape)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500] or "(no message)"
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)[:500]
    return str(error or data)[:500]


def _listed(text: str, where: str, keyed: bool) -> str:
    try:
        models = json.loads(text).get("data") or []
    except (ValueError, AttributeError):
        models = []
    names = [m.get("id") for m in models if isinstance(m, dict) and m.get("id")]
    shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
    listed = f": {len(names)} models ({shown})" if names else ""
    # A local server that needs no key (Ollama, vLLM) was sent none: it answered, no more.
    return f"OK: {where} {'accepted the key' if keyed else 'answered'}{listed}"


def site_model_set(*, model: str, by) -> str:
    """The built-in agent's default model (INSPECT_LLM_MODEL) when a session and its
    repository name none; empty: each provider's default. Site admins; audited."""
    require_provider_admin(by)
    model = (model or "").strip()
    if model and (len(model) > 200 or not MODEL_NAME.match(model) or model.endswith("*")):
        raise ProviderError(f"{model[:60]!r} is not a model name.", field="model")
    _refuse_environment({accounts.LLM_MODEL.name: model})
    before = accounts.default_model()
    with transaction.atomic():
        site_settings.store(accounts.LLM_MODEL.name, model, by=by)
        audit.record(
            "model_provider.default_model",
            actor=by,
            object_type="site_setting",
            object_id=accounts.LLM_MODEL.name,
            data={"before": before, "after": model},
        )
    return model
