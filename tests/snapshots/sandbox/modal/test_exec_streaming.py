"""exec streams stdout and stderr line by line, as Modal delivers them (text=True, bufsize=1)."""

from __future__ import annotations

import threading

from snapshots.sandbox import OutputLine
from snapshots.sandbox import modal_sandbox as ms
from tests.snapshots.sandbox.modal.fake_process import FakeProcess


def test_each_stream_keeps_its_line_order(fake_modal, sandbox):
    fake_modal.on_exec = lambda argv, kw: FakeProcess(
        stdout=["one\n", "two\n", "three\n"], stderr=["warn 1\n", "warn 2\n"]
    )

    result = sandbox.run(["make", "test"])

    assert result.exit_code == 0 and result.ok
    assert result.stdout == "one\ntwo\nthree\n"
    assert result.stderr == "warn 1\nwarn 2\n"


def test_lines_arrive_while_the_command_still_runs(fake_modal, sandbox):
    more, finish = threading.Event(), threading.Event()
    fake_modal.on_exec = lambda argv, kw: FakeProcess(
        stdout=["first\n", more, "second\n"], exit_gate=finish
    )

    handle = sandbox.exec("slow-build")
    lines = iter(handle)

    assert next(lines) == OutputLine("stdout", "first")
    assert fake_modal.only_sandbox().processes  # still running: nothing has exited yet
    more.set()
    assert next(lines) == OutputLine("stdout", "second")
    finish.set()
    assert list(lines) == []
    assert handle.wait().exit_code == 0


def test_stdout_and_stderr_interleave_in_the_order_received(fake_modal, sandbox):
    err_turn, out_turn = threading.Event(), threading.Event()
    fake_modal.on_exec = lambda argv, kw: FakeProcess(
        stdout=["out 1\n", out_turn, "out 3\n"], stderr=[err_turn, "err 2\n"]
    )
    handle = sandbox.exec("pytest")
    lines = iter(handle)

    first = next(lines)
    err_turn.set()
    second = next(lines)
    out_turn.set()
    third = next(lines)

    assert [first, second, third] == [
        OutputLine("stdout", "out 1"),
        OutputLine("stderr", "err 2"),
        OutputLine("stdout", "out 3"),
    ]


def test_a_final_line_without_newline_is_kept(fake_modal, sandbox):
    fake_modal.on_exec = lambda argv, kw: FakeProcess(stdout=["done\n", "prompt> "])

    result = sandbox.run("cat notes")

    assert [line.text for line in result.output] == ["done", "prompt> "]


def test_modal_is_asked_for_line_buffered_text(fake_modal, sandbox):
    sandbox.run("echo hi")

    call = fake_modal.recorder.last("Sandbox.exec")
    assert call.kwargs["text"] is True
    assert call.kwargs["bufsize"] == 1
    # A command line runs under /bin/sh -c, inside our process-group wrapper.
    assert call.args[:4] == ("/bin/sh", "-c", ms.EXEC_WRAPPER, ms.EXEC_WRAPPER_NAME)
    assert call.args[4].startswith(ms.CONTROL_DIR + "/")
    assert call.args[5:] == ("/bin/sh", "-c", "echo hi")


def test_an_argv_list_is_run_without_a_shell(fake_modal, sandbox):
    seen = []
    fake_modal.on_exec = lambda argv, kw: seen.append(argv) or FakeProcess()

    sandbox.run(["printf", "%s\n", "a b; rm -rf /"])

    assert seen == [("printf", "%s\n", "a b; rm -rf /")]


def test_env_and_cwd_are_passed_to_modal_explicitly(fake_modal, sandbox):
    sandbox.run("ls", env={"CI": "1"}, cwd="src/app")
    sandbox.run("ls", cwd="/var/log")
    sandbox.run("ls")

    first, absolute, default = fake_modal.recorder.named("Sandbox.exec")[-3:]
    assert first.kwargs["env"] == {"CI": "1"}
    assert first.kwargs["workdir"] == "/workspace/src/app"
    assert absolute.kwargs["workdir"] == "/var/log"
    assert default.kwargs["workdir"] == "/workspace" and default.kwargs["env"] is None
    assert all("secrets" not in c.kwargs for c in (first, absolute, default))


def test_wait_keeps_the_output_nobody_iterated(fake_modal, sandbox):
    fake_modal.on_exec = lambda argv, kw: FakeProcess(stdout=["a\n", "b\n"], stderr=["c\n"])

    handle = sandbox.exec("three-lines")
    result = handle.wait()

    assert sorted(line.text for line in result.output) == ["a", "b", "c"]
    assert [line.text for line in handle if line.stream == "stdout"] == ["a", "b"]


def test_a_non_utf8_stream_is_reported_not_crashing(fake_modal, sandbox):
    bad = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    fake_modal.on_exec = lambda argv, kw: FakeProcess(stdout=["readable\n", bad], stderr=["e\n"])

    result = sandbox.run("cat /bin/ls")

    assert result.stdout.splitlines() == ["readable", ms._UNDECODABLE]
    assert result.stderr == "e\n"


def test_a_background_child_holding_the_pipe_does_not_hang_wait(fake_modal, sandbox, short_grace):
    # `redis-server &` keeps stdout open after the command itself has exited.
    fake_modal.on_exec = lambda argv, kw: FakeProcess(stdout=["started\n"], open_streams=True)

    result = sandbox.run("redis-server &")

    assert result.exit_code == 0
    assert result.stdout == "started\n"


def test_wait_after_partial_iteration_keeps_only_the_rest(fake_modal, sandbox):
    fake_modal.on_exec = lambda argv, kw: FakeProcess(stdout=["1\n", "2\n", "3\n"])

    handle = sandbox.exec("count")
    first = next(iter(handle))
    result = handle.wait()

    assert first.text == "1"
    assert [line.text for line in result.output] == ["2", "3"]
    assert [line.text for line in handle] == ["2", "3"]
