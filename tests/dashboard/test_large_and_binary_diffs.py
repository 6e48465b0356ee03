"""A turn that writes a 10 MB text file and a binary file: the diff is recorded, and the session
page still comes back quickly, small, with the big file collapsed and the binary one named."""

import time

import pytest

from sessions.models import Event

pytestmark = pytest.mark.django_db

# 100,000 lines of 100 bytes = 10 MB of text, and 4 KiB of random bytes.
AGENT = (
    "head -c 9900000 /dev/zero | tr '\\0' 'x' | fold -w 99 > big.txt && "
    "head -c 4096 /dev/urandom > blob.bin"
)


def test_a_10_mb_file_and_a_binary_file_do_not_hang_the_session_page(
    ready_repo, create_session, client, team
):
    code, summary, err = create_session("--prompt", "big", "--agent-command", AGENT, "--inline")
    assert code == 0, err
    assert summary["state"] == "idle"
    assert sorted(summary["diff"]["paths"]) == ["big.txt", "blob.bin"]
    diffs = {
        e.payload["path"]: e.payload
        for e in Event.objects.filter(session_id=summary["id"], kind="diff")
    }
    assert diffs["big.txt"]["added"] == 100_000
    assert diffs["blob.bin"]["binary"] is True

    client.force_login(team.engineer)
    started = time.monotonic()
    response = client.get(f"/sessions/{summary['id']}/")
    elapsed = time.monotonic() - started
    page = response.content.decode()
    assert response.status_code == 200
    assert elapsed < 3, f"the page took {elapsed:.1f} s"
    assert len(response.content) < 1_000_000
    assert "lines, collapsed)" in page  # the big file is folded away
    assert "Binary file changed." in page
