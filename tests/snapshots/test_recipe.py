import pytest

from snapshots.recipe import RecipeError, parse_recipe

FULL = """
setup   = ["pip install -e .[dev]"]
start   = ["redis-server --daemonize yes"]
verify  = ["pytest -q", "ruff check ."]
preview = { command = "python -m http.server 8000", url = "http://127.0.0.1:8000/" }
ui      = ["*.html", "src/components/**"]
egress  = { mode = "allowlist", domains = ["pkgs.example.org", "files.example.org"] }
refresh_minutes = 30
"""


def test_the_design_documents_recipe_parses():
    recipe = parse_recipe(FULL)
    assert recipe.setup == ("pip install -e .[dev]",)
    assert recipe.verify == ("pytest -q", "ruff check .")
    assert recipe.preview.url == "http://127.0.0.1:8000/"
    assert recipe.egress.mode == "allowlist"
    assert recipe.egress.allows("files.example.org")
    assert not recipe.egress.allows("example.com")
    assert recipe.refresh_minutes == 30


def test_an_empty_recipe_means_no_network_and_nothing_to_run():
    recipe = parse_recipe("")
    assert (recipe.setup, recipe.verify, recipe.egress.mode) == ((), (), "none")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("setup = [", "does not parse"),
        ("setpu = ['make']", "unknown key 'setpu'"),
        ("setup = [1, 2]", "'setup' must be a list of non-empty command strings"),
        ("egress = { mode = 'sometimes' }", "egress: unknown network mode 'sometimes'"),
        ("refresh_minutes = 0", "'refresh_minutes' must be a whole number"),
        ("preview = { command = 'serve' }", "'preview' needs a command and a url"),
    ],
)
def test_a_bad_recipe_says_what_is_wrong(text, message):
    with pytest.raises(RecipeError, match=message):
        parse_recipe(text)
