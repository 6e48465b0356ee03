"""Two turns of one repository start together (threads of the turn worker): their mirror
fetches take turns instead of failing on git's ref locks."""

import threading

import pytest

from snapshots import mirror

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_fetches_of_one_mirror_all_succeed(make_git_repo, private_data_dir):
    upstream = make_git_repo()
    mirror.update_mirror("widgets", str(upstream.path))
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            mirror.update_mirror("widgets", str(upstream.path))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    for round_ in range(5):
        upstream.commit({f"f{round_}.txt": "x\n"}, f"round {round_}")
        threads = [threading.Thread(target=fetch) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    head = upstream.git("rev-parse", "HEAD").strip()
    assert mirror.head_commit(mirror.mirror_path("widgets"), "main") == head
