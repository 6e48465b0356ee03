"""The recipe's `preview` table: what can be set and what is refused, with the reason."""

import pytest

from snapshots.recipe import RecipeError, parse_recipe


def test_paths_window_and_readiness_have_defaults():
    recipe = parse_recipe('preview = { command = "serve", url = "http://127.0.0.1:8000/" }\n')
    assert recipe.preview.paths == ("/",)
    assert recipe.preview.window == (1280, 800)
    assert recipe.preview.ready_seconds == 60


def test_paths_and_window_can_be_set():
    recipe = parse_recipe(
        'preview = { command = "serve", url = "http://localhost:3000/", '
        'paths = ["/", "/about"], window = [800, 600], ready_seconds = 5 }\n'
    )
    assert recipe.preview.paths == ("/", "/about")
    assert recipe.preview.window == (800, 600)
    assert recipe.preview.ready_seconds == 5


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('url = "http://example.com/"', "must be http://127.0.0.1:PORT/"),
        ('url = "http://127.0.0.1:1/", paths = ["about"]', "paths starting with '/'"),
        ('url = "http://127.0.0.1:1/", window = [10, 10]', "100 to 4000 pixels"),
        ('url = "http://127.0.0.1:1/", wait = 3', "unknown key preview.wait"),
    ],
)
def test_a_wrong_preview_is_refused_with_the_reason(table, message):
    with pytest.raises(RecipeError, match=message):
        parse_recipe(f'preview = {{ command = "serve", {table} }}\n')
