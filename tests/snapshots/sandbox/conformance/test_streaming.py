"""Output streams live, line by line, in arrival order; exit codes are faithful."""

from __future__ import annotations

import time


def test_interleaved_stdout_stderr_order(sandbox):
    cmd = (
        "echo out1; sleep 0.05; echo err1 >&2; sleep 0.05; echo out2; sleep 0.05; "
        "echo err2 >&2; sleep 0.05; printf 'tail-no-newline'"
    )
    lines = [(ln.stream, ln.text) for ln in sandbox.exec(cmd)]
    assert lines == [
        ("stdout", "out1"),
        ("stderr", "err1"),
        ("stdout", "out2"),
        ("stderr", "err2"),
        ("stdout", "tail-no-newline"),
    ]


def test_lines_arrive_before_the_command_ends(sandbox):
    handle = sandbox.exec("echo first; sleep 1; echo second")
    start = time.monotonic()
    it = iter(handle)
    first = next(it)
    assert first.text == "first" and time.monotonic() - start < 0.8
    assert [ln.text for ln in it] == ["second"]
    assert handle.wait().exit_code == 0


def test_exit_codes(sandbox):
    assert sandbox.run("true").exit_code == 0
    assert sandbox.run("exit 3").exit_code == 3
    assert sandbox.run(["sh", "-c", "kill -TERM $$"]).exit_code == 128 + 15
    r = sandbox.run("definitely-not-a-command")
    assert r.exit_code == 127 and "not found" in r.stderr


def test_argv_form_is_not_shell_interpreted(sandbox):
    r = sandbox.run(["printf", "%s|", "a b", "$HOME", ";rm -rf /"])
    assert [ln.text for ln in r.output] == ["a b|$HOME|;rm -rf /|"]


def test_cwd_and_large_output(sandbox):
    assert sandbox.run("pwd", cwd="src/pkg").stdout == "/workspace/src/pkg\n"
    assert sandbox.run("pwd").stdout == "/workspace\n"
    r = sandbox.run("seq 1 200000")
    assert r.stdout.count("\n") == 200000 and r.stdout.endswith("199999\n200000\n")


def test_wait_without_iterating_keeps_output(sandbox):
    h = sandbox.exec("echo a; echo b >&2; exit 4")
    res = h.wait()
    assert res.exit_code == 4
    assert res.stdout == "a\n" and res.stderr == "b\n"


def test_kill_stops_a_command(sandbox):
    h = sandbox.exec("echo begin; sleep 60")
    it = iter(h)
    assert next(it).text == "begin"
    start = time.monotonic()
    h.kill()
    res = h.wait()
    assert time.monotonic() - start < 3
    assert res.exit_code == 128 + 9 and not res.timed_out


def test_unicode_and_binary_output(sandbox):
    r = sandbox.run("printf 'h\\303\\251llo \\342\\234\\223\\n\\377\\n'")
    assert r.stdout.splitlines()[0] == "héllo ✓"
    assert "\ufffd" in r.stdout.splitlines()[1]  # invalid UTF-8 is replaced, not fatal


def test_background_daemon_does_not_hold_the_exec_open(sandbox):
    start = time.monotonic()
    r = sandbox.run("sleep 30 & echo launched")
    assert r.stdout == "launched\n" and time.monotonic() - start < 2
