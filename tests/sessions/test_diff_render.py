"""The review diff's renderer: each side highlighted in the file's language, changes marked,
unified and side by side, whole files, and the limits that keep a big diff fast."""

from __future__ import annotations

import re
import time

import pytest
from django.template.loader import render_to_string

from sessions import diff_render, rendering
from sessions.diff_render import parse_patch, render_patch, render_whole_file

PATCH = """diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -1,5 +1,6 @@ class App:
 import os
-limit = 1
+limit = 2
+name = "<script>alert(1)</script>"
 def run():
     \"\"\"Run it.\"\"\"
     return limit
"""


@pytest.fixture(autouse=True)
def fresh_cache():
    diff_render.clear_cache()
    yield
    diff_render.clear_cache()


def rows(table: str, kind: str) -> list[str]:
    return re.findall(rf'<tr class="{kind}"[^>]*>(.*?)</tr>', table)


def test_each_side_is_highlighted_in_the_files_language():
    view = render_patch("src/app.py", PATCH)
    assert view.language == "Python"
    [removed] = rows(view.unified, "del")
    assert '<span class="mi">1</span>' in removed  # a number, coloured as Python's
    added = rows(view.unified, "add")
    assert len(added) == 2 and '<span class="mi">2</span>' in added[0]
    assert '<span class="k">def</span>' in "".join(rows(view.unified, "ctx"))
    assert 'data-old="2"' in view.unified and 'data-new="3"' in view.unified


def test_code_is_escaped_never_markup():
    view = render_patch("src/app.py", PATCH)
    for table in (view.unified, view.split):
        assert "<script>" not in table
        assert "&lt;script&gt;" in table


def test_side_by_side_puts_removed_lines_beside_the_lines_that_replace_them():
    view = render_patch("src/app.py", PATCH)
    body = view.split
    pair = re.search(r'<tr><td class="ln del">2</td>.*?</tr>', body).group(0)
    assert '<td class="ln add">2</td>' in pair  # "limit = 1" beside "limit = 2"
    lone = re.search(r'<tr><td class="ln empty"></td>.*?</tr>', body).group(0)
    assert '<td class="ln add">3</td>' in lone  # the extra added line has nothing beside it
    assert body.count("<tr>") == 6  # 4 context rows, 2 changed rows, no more


def test_an_unknown_language_is_plain_text_still_marked():
    patch = "--- a/notes.zzq\n+++ b/notes.zzq\n@@ -1 +1 @@\n-old <i>\n+new <i>\n"
    view = render_patch("notes.zzq", patch)
    assert view.language == diff_render.PLAIN
    assert rows(view.unified, "del") and rows(view.unified, "add")
    assert "new &lt;i&gt;" in view.unified and "<span" not in view.unified


def test_a_file_named_without_extension_gets_its_language():
    assert render_patch("Makefile", "@@ -1 +1 @@\n-a:\n+b:\n").language == "Makefile"


def test_odd_characters_do_not_shift_lines():
    patch = "@@ -1,3 +1,3 @@\n a\r\n-page\x0cbreak\n+page\x0bbreak\n c\n"
    view = render_patch("x.py", patch)
    assert re.findall(r'data-new="(\d+)"', view.unified) == ["1", "2", "3"]


def test_a_huge_patch_is_shown_plain_with_a_note():
    patch = "@@ -0,0 +1,6000 @@\n" + "".join(f"+x_{i} = {i}\n" for i in range(6000))
    view = render_patch("big.py", patch)
    assert "<span" not in view.unified
    assert any("without highlighting" in note for note in view.notes)
    assert len(rows(view.unified, "add")) == 6000


def test_a_truncated_patch_says_so():
    patch = "@@ -1,2 +1,2 @@\n-a = 1\n+a = 2\n… (truncated)\n"
    view = render_patch("a.py", patch)
    assert parse_patch(patch).truncated
    assert any("cut" in note for note in view.notes)


def test_the_whole_file_shows_every_line_with_the_changes_in_place():
    content = "import os\nlimit = 2\nname = 'x'\ndef run():\n    return limit\n\nrun()\n"
    patch = "@@ -1,3 +1,4 @@\n import os\n-limit = 1\n+limit = 2\n+name = 'x'\n def run():\n"
    view = render_whole_file("app.py", patch, content)
    new_numbers = re.findall(r'data-new="(\d+)"', view.unified)
    assert new_numbers == [str(n) for n in range(1, 8)]  # all seven lines, in order
    assert re.findall(r'<tr class="del" data-old="(\d+)"', view.unified) == ["2"]
    assert re.findall(r'<tr class="add"[^>]*data-new="(\d+)"', view.unified) == ["2", "3"]
    # old numbers continue past the hunk: the last line is old 6, new 7
    assert '<tr class="ctx" data-old="6" data-new="7">' in view.unified


def test_the_whole_file_places_a_pure_deletion_after_its_line():
    content = "a\nb\nd\ne\n"
    patch = "@@ -3,2 +2,0 @@\n-x\n-y\n"  # x and y were after b, new line 2
    view = render_whole_file("f.txt", patch, content)
    order = re.findall(r'<tr class="(ctx|del)"', view.unified)
    assert order == ["ctx", "ctx", "del", "del", "ctx", "ctx"]


def test_rendered_files_are_cached_by_path_and_patch():
    first = render_patch("src/app.py", PATCH)
    assert render_patch("src/app.py", PATCH) is first
    assert render_patch("src/other.py", PATCH) is not first
    assert render_patch("src/app.py", PATCH + " \n") is not first


def test_a_two_thousand_line_diff_renders_quickly_and_again_at_once():
    files = []
    for f in range(20):  # 20 files of 100 changed lines: 2,000 lines added, 2,000 removed
        body = "".join(f"-value_{i} = compute({i}, 'old')\n+value_{i} = compute({i}, 'new')\n"
                       for i in range(100))  # fmt: skip
        files.append((f"pkg/module_{f}.py", f"@@ -1,100 +1,100 @@\n{body}"))
    started = time.perf_counter()
    for path, patch in files:
        render_patch(path, patch)
    first = time.perf_counter() - started
    started = time.perf_counter()
    for path, patch in files:
        render_patch(path, patch)
    again = time.perf_counter() - started
    assert first < 3.0, f"{first:.2f} s for 4,000 highlighted lines"
    assert again < 0.05, f"{again:.3f} s from the cache"


def test_the_panel_marks_a_binary_file_and_offers_the_whole_file_for_text():
    text = rendering.diff_file({"path": "src/app.py", "patch": PATCH, "added": 2, "removed": 1,
                                "binary": False, "turn": 1, "commit": "a" * 40})  # fmt: skip
    binary = rendering.diff_file({"path": "logo.png", "patch": "", "added": 0, "removed": 0,
                                  "binary": True, "turn": 1, "commit": "a" * 40})  # fmt: skip

    class Session:
        pk = 7

    html = render_to_string("sessions/panels/diff.html", {"diff": [text, binary],
                                                          "session": Session()})  # fmt: skip
    assert "Binary file changed" in html
    assert html.count('class="whole-file"') == 1
    assert "/sessions/7/diff/file/?path=src%2Fapp.py&amp;commit=" in html
    assert html.count('class="viewed-box"') == 2 and "checked" not in html
