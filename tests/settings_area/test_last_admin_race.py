"""Two admins demoting each other at the same moment: one wins, the other is refused, and the
repository keeps an admin (the repository's row is locked for member changes)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from accounts.models import Role
from snapshots.members import MemberRefused, member_set_role

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_admins_demoting_each_other_leave_one(team):
    repository = team.repository
    member_set_role(repository, team.manager, Role.ADMIN, by=team.admin)
    first_done, release = threading.Event(), threading.Event()
    outcome: dict[str, str] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                member_set_role(repository, team.admin, Role.ENGINEER, by=team.manager)
                first_done.set()
                release.wait(10)  # hold the transaction open while the second one tries
        finally:
            connection.close()

    def second() -> None:
        first_done.wait(10)
        try:
            member_set_role(repository, team.manager, Role.ENGINEER, by=team.admin)
            outcome["second"] = "demoted"
        except MemberRefused as exc:
            outcome["second"] = str(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    first_done.wait(10)
    time.sleep(0.5)
    assert threads[1].is_alive(), "the second change waits for the first"
    release.set()
    for thread in threads:
        thread.join(20)
    assert "last admin" in outcome["second"]
    roles = dict(repository.memberships.values_list("user__username", "role"))
    assert roles["admin"] == Role.ENGINEER and roles["manager"] == Role.ADMIN
