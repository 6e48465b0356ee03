import time

import pytest
from django.urls import reverse

from snapshots.models import Snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(team):
    good = Snapshot.objects.create(
        repository=team.repository,
        branch="main",
        commit="c0ffee" + "0" * 34,
        state="ready",
        build_seconds=12.5,
        size_bytes=5_000_000,
        file_count=512,
        log="$ make\nok",
    )
    bad = Snapshot.objects.create(
        repository=team.repository,
        branch="main",
        commit="badbad" + "0" * 34,
        state="failed",
        exit_code=2,
        error="setup command 'make' failed with exit code 2",
        log="$ make\nmake: *** No rule to make target",
    )
    return good, bad


def test_a_member_sees_the_newest_ready_snapshot_and_the_failures(client, team, history):
    client.force_login(team.reviewer)
    page = client.get(reverse("snapshots:list")).content.decode()
    assert "c0ffee0000" in page
    assert "12.5 s" in page
    assert "4.8\xa0MB" in page and "512 files" in page
    assert "setup command &#x27;make&#x27; failed with exit code 2" in page


def test_the_failed_build_shows_its_log_and_exit_code(client, team, history):
    client.force_login(team.engineer)
    page = client.get(history[1].get_absolute_url()).content.decode()
    assert "exit code 2" in page
    assert "No rule to make target" in page


def test_an_outsider_cannot_see_a_snapshot(client, team, history):
    client.force_login(team.outsider)
    assert client.get(history[0].get_absolute_url()).status_code == 404
    assert "c0ffee" not in client.get(reverse("snapshots:list")).content.decode()


def test_only_roles_that_may_refresh_get_the_button(client, team, history):
    url = reverse("snapshots:refresh", args=["widgets"])
    client.force_login(team.manager)
    assert "Refresh now" not in client.get(reverse("snapshots:list")).content.decode()
    assert client.post(url).status_code == 403
    client.force_login(team.outsider)
    assert client.post(url).status_code == 404


def test_refresh_now_builds_on_a_worker(client, team, make_git_repo, celery_worker_process):
    upstream = make_git_repo()
    team.repository.url = str(upstream.path)
    team.repository.save()
    client.force_login(team.engineer)
    response = client.post(reverse("snapshots:refresh", args=["widgets"]), follow=True)
    assert b"is being built" in response.content
    deadline = time.monotonic() + 60
    while not Snapshot.objects.filter(repository=team.repository, state="ready").exists():
        assert time.monotonic() < deadline, "the worker did not build the snapshot"
        time.sleep(0.2)
    snapshot = Snapshot.objects.get(repository=team.repository, state="ready")
    assert snapshot.commit == upstream.git("rev-parse", "HEAD").strip()


def test_the_operators_private_address_exceptions_are_shown(client, team, settings):
    client.force_login(team.engineer)
    page = client.get(reverse("snapshots:list")).content.decode()
    assert "Private addresses sandboxes may reach" in page and "None: no sandbox reaches" in page
    settings.EGRESS_EXCEPTIONS_SPEC = "pypi-mirror=10.1.2.3:443"
    page = client.get(reverse("snapshots:list")).content.decode()
    assert "pypi-mirror: 10.1.2.3/32 port 443" in page
