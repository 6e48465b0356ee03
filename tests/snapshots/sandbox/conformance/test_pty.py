"""A real terminal inside the sandbox."""

from __future__ import annotations

import re


def test_tty_is_a_pts(sandbox):
    with sandbox.open_pty(["/bin/sh", "-c", "tty; stty size"], cols=91, rows=33) as pty:
        out = pty.read_until(b"33 91", timeout=10).decode()
    assert re.search(r"/dev/pts/\d+", out), out
    assert "33 91" in out


def test_interactive_shell_and_resize(sandbox):
    with sandbox.open_pty(["/bin/bash", "--norc", "-i"], cols=80, rows=24) as pty:
        pty.write(b"stty size; echo mark-$((6*7))\n")
        out = pty.read_until(b"mark-42", timeout=10)
        assert b"24 80" in out
        pty.resize(cols=120, rows=50)
        # Under bubblewrap a loaded CI run once read the old size after a resize
        # (cause not found: the resize frame precedes the typed line on one socket); a
        # second look must see the new size.
        for attempt in (1, 2):
            pty.write(f"stty size; echo mark-$(({attempt}*49))\n".encode())
            out = pty.read_until(f"mark-{attempt * 49}".encode(), timeout=10)
            if b"50 120" in out:
                break
        assert b"50 120" in out
        pty.write(b"exit 5\n")
        pty.read_until(b"never-appears", timeout=5)
        assert pty.exit_code() == 5


def test_pty_close_kills_program(sandbox):
    pty = sandbox.open_pty(["/bin/sh", "-c", "echo ready; exec sleep 300"])
    assert b"ready" in pty.read_until(b"ready")
    pty.close()
    pty.close()  # idempotent
    import time

    for _ in range(50):
        if "sleep 300" not in sandbox.run("ps -eo args").stdout:
            break
        time.sleep(0.1)
    assert "sleep 300" not in sandbox.run("ps -eo args").stdout
