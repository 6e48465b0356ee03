"""The recipe's sources as the settings show them: the file read from the mirror's git objects
(a link refused), and an egress written into recipe TOML with nothing else changed."""

from __future__ import annotations

import pytest

from snapshots import mirror
from snapshots.models import Snapshot
from snapshots.recipe import RecipeError, parse_recipe
from snapshots.recipe_sources import (
    OVERRIDE_SOURCE,
    recipe_in_force,
    repository_recipe_file,
    with_egress,
)
from snapshots.sandbox import NetworkPolicy

pytestmark = pytest.mark.django_db

ALLOW = NetworkPolicy("allowlist", ("pkgs.example.org",))


def test_the_file_comes_from_the_mirror_at_the_default_branch(team, make_git_repo):
    upstream = make_git_repo(files={".inspect/environment.toml": 'setup = ["make"]\n'})
    team.repository.url = str(upstream.path)
    assert repository_recipe_file(team.repository).text is None  # not fetched yet
    mirror.update_mirror(team.repository.name, team.repository.url)
    file = repository_recipe_file(team.repository)
    assert file.text == 'setup = ["make"]\n' and "on main" in file.note
    in_force = recipe_in_force(team.repository, file)
    assert in_force.recipe.setup == ("make",) and in_force.source == ".inspect/environment.toml"
    team.repository.recipe_override = "bogus = 1\n"
    broken = recipe_in_force(team.repository, file)
    assert broken.recipe is None and broken.error.position == "line 1, column 1"


def test_a_linked_recipe_is_refused(team, make_git_repo, tmp_path):
    upstream = make_git_repo(files={"README.md": "x\n"})
    (tmp_path / "upstream" / ".inspect").mkdir()
    (tmp_path / "upstream" / ".inspect" / "environment.toml").symlink_to("/etc/passwd")
    upstream.git("add", "-A")
    upstream.git("commit", "-qm", "link")
    team.repository.url = str(upstream.path)
    mirror.update_mirror(team.repository.name, team.repository.url)
    file = repository_recipe_file(team.repository)
    assert file.text is None and "is a link" in file.note


def test_a_repository_without_a_recipe_file(team, make_git_repo):
    upstream = make_git_repo()
    team.repository.url = str(upstream.path)
    mirror.update_mirror(team.repository.name, team.repository.url)
    assert repository_recipe_file(team.repository).text == ""
    assert recipe_in_force(team.repository, repository_recipe_file(team.repository)).source == (
        "the default (no recipe)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        'setup = ["a"]  # a comment kept\n',
        'setup = ["a"]\negress = { mode = "open" }\nverify = ["b"]\n',
        'setup = ["a"]\n[egress]\nmode = "open"\n\n[agents]\n',
        '[preview]\ncommand = "s"\nurl = "http://127.0.0.1:8000/"\n',
        'setup = ["a"]\negress.mode = "allowlist"\negress.domains = ["x.example.org"]\n',
    ],
)
def test_with_egress_changes_only_the_egress(text):
    result = with_egress(text, ALLOW)
    recipe = parse_recipe(result)
    assert recipe.egress == ALLOW
    before = parse_recipe(text) if text else None
    if before is not None:
        assert (recipe.setup, recipe.verify, recipe.preview, recipe.agents) == (
            before.setup, before.verify, before.preview, before.agents
        )  # fmt: skip
    assert "# a comment kept" in result or "comment" not in text


def test_with_egress_refuses_what_it_cannot_edit_safely():
    with pytest.raises(RecipeError, match="does not parse"):
        with_egress("setup = [\n", ALLOW)
    with pytest.raises(RecipeError, match="cannot change safely"):
        with_egress('setup = ["a"]\n"egress" = { mode = "open" }\n', ALLOW)


def test_without_a_mirror_the_file_is_read_as_the_last_build_recorded_it(team):
    assert repository_recipe_file(team.repository).text is None
    Snapshot.objects.create(
        repository=team.repository, branch="main", state="ready",
        recipe_toml='setup = ["from-the-file"]\n', recipe_source=".inspect/environment.toml",
    )  # fmt: skip
    Snapshot.objects.create(
        repository=team.repository, branch="main", state="ready",
        recipe_toml='setup = ["from-the-dashboard"]\n', recipe_source=OVERRIDE_SOURCE,
    )  # fmt: skip
    file = repository_recipe_file(team.repository)
    assert file.text == 'setup = ["from-the-file"]\n' and "as snapshot" in file.note
