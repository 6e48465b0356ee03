"""Settings › Repositories in a real browser: a site admin adds a repository whose default
branch (master) is detected, sees a bad URL refused on the form, archives it and no longer finds
it under New task; an engineer has no Settings and gets 403; a non-member gets 404."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from snapshots.models import Repository
from tests.browser.conftest import screenshot
from tests.settings_area.test_repository_settings import git_repo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_adds_a_master_repository_and_archives_it(login, team, tmp_path):
    page = login(team.admin)
    page.goto("/settings/repositories/")
    form = page.locator("form", has=page.get_by_role("button", name="Add repository"))
    (tmp_path / "plain").mkdir()
    form.get_by_label("Name").fill("legacy")
    form.get_by_label("URL or path").fill(str(tmp_path / "plain"))
    form.get_by_role("button", name="Add repository").click()
    expect(page.locator("#id_url-error")).to_contain_text("cannot read")
    assert not Repository.objects.filter(name="legacy").exists()
    screenshot(page, "settings-repository-refused")

    legacy = git_repo(tmp_path, "legacy", "master")
    page.get_by_label("URL or path").fill(str(legacy))
    page.get_by_role("button", name="Add repository").click()
    expect(page.locator(".messages")).to_contain_text("Added legacy (default branch master)")
    expect(page.get_by_role("heading", level=1)).to_have_text("legacy")
    assert Repository.objects.get(name="legacy").default_branch == "master"
    screenshot(page, "settings-repository-added")

    page.get_by_role("button", name="Archive legacy").click()
    expect(page.locator(".messages")).to_contain_text("legacy is archived")
    expect(page.get_by_role("button", name="Unarchive")).to_be_visible()
    assert Repository.objects.get(name="legacy").archived_at is not None
    page.goto("/sessions/new/")
    options = page.locator("select[name=repository] option").all_inner_texts()
    assert "widgets" in options and "legacy" not in options
    page.goto("/settings/repositories/")
    expect(page.locator("tr", has_text="legacy")).to_contain_text("archived")


def test_the_github_page_link_prefills_the_form(login, team):
    page = login(team.admin)
    page.goto("/settings/repositories/?name=octo&url=https://github.example/o/octo.git")
    expect(page.get_by_label("Name")).to_have_value("octo")
    expect(page.get_by_label("URL or path")).to_have_value("https://github.example/o/octo.git")


def test_an_engineer_has_no_settings_and_a_non_member_gets_404(login, team):
    engineer = login(team.engineer)
    engineer.goto("/")
    expect(engineer.get_by_role("link", name="Settings")).to_have_count(0)
    assert engineer.goto("/settings/repositories/").status == 403
    assert engineer.goto("/settings/repositories/widgets/").status == 403
    outsider = login(team.outsider)  # admin of gadgets only
    assert outsider.goto("/settings/repositories/widgets/").status == 404
    assert outsider.goto("/settings/repositories/widgets/people/").status == 404
    assert outsider.goto("/settings/repositories/gadgets/").status == 200
