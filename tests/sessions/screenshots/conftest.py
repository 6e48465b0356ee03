"""A small web application repository: one page, a preview that serves it, `ui` = *.html."""

from __future__ import annotations

import pytest

PAGE = (
    "<!doctype html><html><head><title>Widgets</title></head>"
    '<body style="margin:0;background:#ffffff">'
    '<h1 style="font-size:72px">Hello</h1></body></html>\n'
)
RECIPE = (
    'preview = { command = "python3 -m http.server 8000 --bind 127.0.0.1", '
    'url = "http://127.0.0.1:8000/", paths = ["/", "/about.html"], window = [640, 480] }\n'
    'ui = ["*.html"]\n'
)
# The turn: the page turns red and says goodbye.
REDDEN = "sed -i 's/#ffffff/#cc0000/; s/Hello/Goodbye/' index.html"


@pytest.fixture
def web_repo(inspect_cli, make_git_repo, team):
    upstream = make_git_repo(
        files={
            "README.md": "# widgets\n",
            "index.html": PAGE,
            "about.html": "<!doctype html><p>About us</p>\n",
            ".inspect/environment.toml": RECIPE,
        }
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, _, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    team.repository.upstream = upstream
    return team.repository
