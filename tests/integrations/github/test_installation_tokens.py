"""Installation tokens: minted on the worker for one repository, reused only while GitHub's
`expires_at` is comfortably ahead, and never visible inside a sandbox."""

import time
from datetime import timedelta
from types import SimpleNamespace

import pytest

from integrations.github import codehost
from integrations.github.codehost import TOKEN_MARGIN_S, GitHubHost
from integrations.github.models import GitHubLink
from sessions.models import PullRequest
from tests.integrations.github.conftest import REPO
from tests.integrations.github.github_fake import _git

pytestmark = pytest.mark.django_db


def test_a_token_is_reused_until_shortly_before_it_expires(github_server, team, monkeypatch):
    GitHubLink.objects.create(repository=team.repository, full_name=REPO)
    host = GitHubHost(team.repository)
    first = host.token()
    assert host.token() == first and len(github_server.tokens) == 1

    # Fifty-nine minutes later the hour-long token is within the margin: a fresh one is minted.
    later = time.time() + 3600 - TOKEN_MARGIN_S + 1
    monkeypatch.setattr(codehost, "time", SimpleNamespace(time=lambda: later))
    second = host.token()
    assert second != first and len(github_server.tokens) == 2
    monkeypatch.undo()

    # A token GitHub gives a shorter life than the margin is never reused.
    github_server.token_lifetime = timedelta(seconds=TOKEN_MARGIN_S // 2)
    short = host.token(refresh=True)
    assert host.token() != short
    assert len(github_server.tokens) == 4
    assert github_server.problems == []


SNOOP = (
    "(env; git -c safe.directory='*' config --list --show-origin; cat .git/config; "
    "cat ~/.git-credentials ~/.config/git/credentials 2>/dev/null; true) > seen.txt"
)


# Committed: a first turn fetches the mirror on a thread of its own (its own connection), which
# must see the repository's GitHub link to fetch with a token.
@pytest.mark.django_db(transaction=True)
def test_no_token_is_visible_inside_the_sandbox(github, create_session):
    code, summary, err = create_session("--prompt", "look around", "--agent-command", SNOOP,
                                        "--inline", "--as", "engineer")  # fmt: skip
    assert code == 0, (err, summary and summary.get("error"))
    pr = PullRequest.objects.get(session_id=summary["id"])
    seen = _git(github.repo(REPO).path, "show", f"{pr.branch}:seen.txt")
    assert "PATH=" in seen and "[core]" in seen  # the agent did read its environment
    assert github.tokens  # the snapshot's clone and the push used tokens …
    for token in github.tokens.values():  # … none of which reached the sandbox
        assert token.value not in seen
    assert "ghs_" not in seen and "x-access-token" not in seen and "extraheader" not in seen
    assert github.problems == []
