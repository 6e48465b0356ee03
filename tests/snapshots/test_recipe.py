import pytest

from snapshots.recipe import RecipeError, StartCommand, parse_recipe

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
        ("start = [{ secrets = ['A'] }]", "a 'start' table needs a non-empty command"),
        ("start = [{ command = 'x', secret = ['A'] }]", "unknown key start.secret"),
        ("start = [{ command = 'x', secrets = ['NPM-TOKEN'] }]", "must be a list of secret"),
        ("start = [1]", "each 'start' entry is a command string or a table"),
    ],
)
def test_a_bad_recipe_says_what_is_wrong(text, message):
    with pytest.raises(RecipeError, match=message):
        parse_recipe(text)


def test_a_start_service_names_the_secrets_it_gets():
    recipe = parse_recipe(
        'start = ["redis-server --daemonize yes",'
        ' { command = "npm run registry", secrets = ["NPM_TOKEN"] }]'
    )
    assert recipe.start == (
        StartCommand("redis-server --daemonize yes"),
        StartCommand("npm run registry", ("NPM_TOKEN",)),
    )
