"""Finding 3 (redaction): a secret printed base64-, URL- or hex-encoded is redacted like the
value itself, in stored events and in snapshot build logs.

The attack: code that holds a secret prints it encoded (`base64`, a URL query, an HTTP Basic
header, JSON inside URL-safe base64, hex) so that an exact-match scrubber lets it through.
"""

from __future__ import annotations

import base64
import secrets as random
from urllib.parse import quote, quote_plus

import pytest
from cryptography.fernet import Fernet

from approvals.redaction import REDACTED, Redactor, redact
from approvals.secrets import secret_set
from sessions.events import append_event
from sessions.models import Event

# '/', '+', ' ', '=', '&', '?' make every encoding differ from the value and from each other.
TOKEN = f"tok/{random.token_hex(12)}+a b=&c?"
RAW = TOKEN.encode()

# What the sandbox prints (PRINT_ENCODED), in order.
ENCODED = [
    base64.b64encode(RAW).decode(),  # `printf %s "$T" | base64`
    base64.b64encode(b"x" + RAW).decode(),  # the value at offset 1 of a longer string
    base64.b64encode(b"xy" + RAW + b"z").decode(),  # offset 2
    "Authorization: Basic " + base64.b64encode(b"user:" + RAW).decode(),
    base64.urlsafe_b64encode(b'{"token":"' + RAW + b'"}').decode(),
    base64.urlsafe_b64encode(b"k=" + RAW).decode().rstrip("="),
    "https://example.org/hook?token=" + quote(TOKEN, safe=""),
    "https://example.org/" + quote(TOKEN),
    "token=" + quote_plus(TOKEN),
    "token=" + quote(TOKEN, safe="").lower(),  # lowercase %-escapes are just as valid
    RAW.hex(),
    RAW.hex().upper(),
]
PRINT_ENCODED = (
    'printf %s "$DEPLOY_TOKEN" | base64 -w0; echo; '
    "python3 -c '"
    "import os, base64 as b, urllib.parse as u\n"
    's = os.environ["DEPLOY_TOKEN"]; r = s.encode()\n'
    'print(b.b64encode(b"x" + r).decode())\n'
    'print(b.b64encode(b"xy" + r + b"z").decode())\n'
    'print("Authorization: Basic " + b.b64encode(b"user:" + r).decode())\n'
    'print(b.urlsafe_b64encode(b"{\\"token\\":\\"" + r + b"\\"}").decode())\n'
    'print(b.urlsafe_b64encode(b"k=" + r).decode().rstrip("="))\n'
    'print("https://example.org/hook?token=" + u.quote(s, safe=""))\n'
    'print("https://example.org/" + u.quote(s))\n'
    'print("token=" + u.quote_plus(s))\n'
    'print("token=" + u.quote(s, safe="").lower())\n'
    "print(r.hex()); print(r.hex().upper())'"
)


@pytest.fixture
def secrets_key(settings):
    settings.SECRETS_KEY = Fernet.generate_key().decode()


def assert_scrubbed(lines: list[str]) -> None:
    assert len(lines) == len(ENCODED), lines
    for line, encoded in zip(lines, ENCODED, strict=True):
        assert encoded not in line
        assert REDACTED in line, f"{line!r} (was {encoded!r})"


def test_the_sandbox_really_prints_the_encoded_forms(tmp_path):
    """The attack works as written: without redaction these lines carry the secret."""
    from snapshots.backends import sandbox_backend

    sandbox = sandbox_backend().create(snapshot=None)
    try:
        result = sandbox.run(PRINT_ENCODED, env={"DEPLOY_TOKEN": TOKEN})
    finally:
        sandbox.terminate()
    assert result.stdout.splitlines() == ENCODED, result.stderr


@pytest.mark.django_db
def test_encoded_forms_of_a_secret_are_redacted_from_stored_events(
    team, secrets_key, agent_session
):
    from snapshots.backends import sandbox_backend

    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    sandbox = sandbox_backend().create(snapshot=None)
    try:
        result = sandbox.run(PRINT_ENCODED, env={"DEPLOY_TOKEN": TOKEN})
    finally:
        sandbox.terminate()
    for line in result.output:
        append_event(agent_session.pk, "output", {"stream": line.stream, "text": line.text})
    stored = Event.objects.filter(session=agent_session, kind="output").order_by("seq")
    assert_scrubbed([e.payload["text"] for e in stored])


@pytest.mark.django_db
def test_encoded_forms_of_a_secret_are_redacted_from_the_build_log(
    team, secrets_key, inspect_cli, make_git_repo
):
    from snapshots.models import Snapshot

    recipe = "setup = [" + _toml_string(PRINT_ENCODED) + "]\n"
    upstream = make_git_repo(files={"README.md": "# w\n", ".inspect/environment.toml": recipe})
    team.repository.url = str(upstream.path)
    team.repository.save()
    secret_set(repository=team.repository, name="DEPLOY_TOKEN", value=TOKEN, by=team.admin)
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, out + err
    snapshot = Snapshot.objects.get(repository=team.repository)
    assert snapshot.state == Snapshot.State.READY, snapshot.error
    for encoded in ENCODED:
        assert encoded not in snapshot.log
        assert encoded not in out + err
    assert snapshot.log.count(REDACTED) >= len(ENCODED)


def _toml_string(text: str) -> str:
    """A TOML basic string holding `text`."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


@pytest.mark.parametrize("encoded", ENCODED)
def test_each_encoded_form_is_replaced(encoded):
    assert redact({"text": f"before {encoded} after"}, [TOKEN])["text"] != f"before {encoded} after"
    assert REDACTED in redact(encoded, [TOKEN])


def test_ordinary_text_and_short_values_are_left_alone():
    text = "build ok: 42 files, base64 aGVsbG8gd29ybGQ=, url a%20b, hex 68656c6c6f"
    assert redact(text, [TOKEN, "hello"]) == text


def test_a_redactor_is_built_once_per_set_of_secrets():
    assert Redactor.for_secrets((TOKEN,)) is Redactor.for_secrets((TOKEN,))
