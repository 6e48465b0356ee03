"""A recipe error says where: the line and column of a TOML syntax error, and of the key at
fault for a schema error (top-level keys, tables, inline tables, dotted keys)."""

from __future__ import annotations

import pytest

from snapshots.recipe import RecipeError, locate_key, parse_recipe


def _error(text: str) -> RecipeError:
    with pytest.raises(RecipeError) as caught:
        parse_recipe(text, where="the recipe set in the dashboard")
    return caught.value


@pytest.mark.parametrize(
    ("text", "position", "key"),
    [
        ('setup = ["a"]\nverify = ["b" "c"]\n', "line 2, column 15", None),
        ("setup = [\n", "line 1, column 1", None),
        ('setup = ["a"]\n\n   stup = ["typo"]\n', "line 3, column 4", "stup"),
        ('setup = ["a"]\nrefresh_minutes = true\n', "line 2, column 1", "refresh_minutes"),
        ("verify = [1]\n", "line 1, column 1", "verify"),
        ('egress = { mode = "sideways" }\n', "line 1, column 1", "egress"),
        ('x = 1\n[preview]\ncommand = "s"\nurl = "http://evil.test/"\n', "line 1, column 1", "x"),
        ('[preview]\ncommand = "s"\nurl = "http://e.test/"\n', "line 3, column 1", "preview.url"),
        (
            'preview = { command = "s", url = "http://evil.test/" }\n',
            "line 1, column 28",
            "preview.url",
        ),
        ('[preview]\ncommand = "s"\nurl = "http://127.0.0.1:1/"\ncolour = 1\n', "line 4, column 1",
         "preview.colour"),
        ('[preview]\ncommand = "s"\nurl = "http://127.0.0.1:1"\nwindow = [1]\n', "line 4, column 1",
         "preview.window"),
        ('[agents]\nnot_a_cli = "1.0.0"\n', "line 2, column 1", "agents.not_a_cli"),
        ('start = [{ command = "x", secret = ["A"] }]\n', "line 1, column 1", "start"),
    ],
)  # fmt: skip
def test_errors_carry_their_position(text, position, key):
    error = _error(text)
    assert error.position == position, str(error)
    assert error.key == key
    assert str(error).startswith("the recipe set in the dashboard")


def test_a_key_that_is_not_written_has_no_position():
    assert locate_key('setup = ["a"]\n', "verify") == (None, None)
    assert RecipeError("plain").position == ""


def test_dotted_keys_are_found():
    assert locate_key('preview.url = "x"\n', "preview.url") == (1, 1)
    assert locate_key('[ preview ]\n  url = "x"\n', "preview.url") == (2, 3)
