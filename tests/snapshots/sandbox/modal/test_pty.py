"""Interactive terminals run on Modal's exec(pty=True)."""

from __future__ import annotations

from snapshots.sandbox import modal_sandbox as ms
from tests.snapshots.sandbox.modal.fake_process import FakeProcess


def echoing_shell(argv, kwargs):
    def echo(process, data):
        process._stdout.feed(b"$ " + data)
        if data == b"exit\n":
            process._stdout.end()

    return FakeProcess(stdout=[b"welcome\n"], open_streams=True, on_stdin=echo)


def test_a_pty_is_an_exec_with_pty_true_sized_by_the_wrapper(fake_modal, sandbox):
    fake_modal.on_pty = echoing_shell

    with sandbox.open_pty(["/bin/bash", "-i"], cols=120, rows=40, env={"LANG": "C.UTF-8"}):
        pass

    call = next(
        c for c in fake_modal.recorder.named("Sandbox.exec") if c.args[3] == ms.PTY_WRAPPER_NAME
    )
    assert call.kwargs["pty"] is True and call.kwargs["text"] is False
    assert call.args[6:] == ("120", "40", "/bin/bash", "-i")
    assert call.kwargs["env"] == {"TERM": "xterm-256color", "LANG": "C.UTF-8"}
    assert call.kwargs["workdir"] == "/workspace"


def test_what_is_typed_reaches_the_program_and_its_output_comes_back(fake_modal, sandbox):
    fake_modal.on_pty = echoing_shell
    pty = sandbox.open_pty()

    assert pty.read_until(b"welcome\n", timeout=5) == b"welcome\n"
    pty.write(b"ls\n")
    assert pty.read_until(b"$ ls\n", timeout=5).endswith(b"$ ls\n")
    assert fake_modal.recorder.last("StreamWriter.write").args == (b"ls\n",)
    assert fake_modal.recorder.named("StreamWriter.drain")  # flushed, not left in a buffer

    pty.write(b"exit\n")
    pty.read_until(b"never", timeout=5)
    assert pty.read(timeout=0.1) == b""  # EOF
    pty.close()


def test_resize_sets_the_size_of_the_programs_terminal(fake_modal, sandbox):
    pty = sandbox.open_pty()

    pty.resize(132, 50)

    kind, (ttyfile, cols, rows) = fake_modal.only_sandbox().controls[-1]
    assert kind == "resize" and (cols, rows) == ("132", "50")
    assert ttyfile.startswith(ms.CONTROL_DIR + "/pty-") and ttyfile.endswith(".tty")
    pty.close()


def test_close_hangs_up_and_kills_the_program_once(fake_modal, sandbox):
    pty = sandbox.open_pty(["python3"])
    process = next(iter(fake_modal.only_sandbox().processes.values()))

    pty.close()
    pty.close()

    kills = [c for c in fake_modal.only_sandbox().controls if c[0] == "kill"]
    assert len(kills) == 1 and kills[0][1][1:] == ("HUP", "KILL")
    assert process.killed.is_set()
    assert pty.read(timeout=5) == b""
