"""A sandbox sees its own world only: no host secrets, no host files to write, no neighbours."""

from __future__ import annotations

import os

import pytest


def test_host_environment_is_not_visible(backend, base_snapshot, new_sandbox, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "host-secret-value-123")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw@127.0.0.1/db")
    sb = new_sandbox(env={"GIVEN": "yes"})
    # Every process's environment, not only the shell's: pid 1 must not leak it either.
    r = sb.run("env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert r.exit_code == 0
    assert "host-secret-value-123" not in r.stdout
    assert "postgres://" not in r.stdout
    assert "GIVEN=yes" in r.stdout


def test_env_passed_at_create_and_exec(sandbox):
    r = sandbox.run("echo $A-$B", env={"A": "x", "B": "y z"})
    assert r.stdout == "x-y z\n"


def test_cannot_write_outside_workspace_and_tmp(sandbox):
    for target in ("/usr/evil", "/etc/evil", "/evil", "/bin/evil", "/home/evil"):
        r = sandbox.run(f"echo x > {target}")
        assert r.exit_code != 0, f"wrote {target}"
    assert sandbox.run("echo ok > /tmp/fine && cat /tmp/fine").stdout == "ok\n"
    assert sandbox.run("echo ok > /workspace/fine && cat fine").stdout == "ok\n"


def test_host_files_are_invisible(sandbox, caps, tmp_path):
    if "same_host" not in caps:
        pytest.skip("only meaningful when the sandbox runs on this machine")
    marker = tmp_path / "host-only-marker.txt"
    marker.write_text("host")
    r = sandbox.run(
        f"test -e {marker} && echo VISIBLE; test -e /root/. && echo ROOT; "
        "test -e /work && echo WORK"
    )
    assert r.stdout == ""
    assert str(tmp_path) not in sandbox.run("cat /proc/mounts").stdout


def test_host_processes_are_invisible(sandbox, caps):
    r = sandbox.run("ls /proc | grep -E '^[0-9]+$' | wc -l")
    # Only the sandbox's own handful of processes, never the host's hundreds.
    assert int(r.stdout.strip()) < 15
    if "same_host" in caps:
        assert str(os.getpid()) not in sandbox.run("ps -eo pid,args").stdout.split()


def test_other_sandboxes_are_invisible(new_sandbox):
    a = new_sandbox()
    b = new_sandbox()
    a.run("echo only-in-a > /workspace/secret-a.txt; echo tmp-a > /tmp/tmp-a; sleep 300 &")
    r = b.run("find /workspace; cat /tmp/tmp-a 2>&1; ps -eo args")
    assert "secret-a.txt" not in r.stdout
    assert "tmp-a\n" not in r.stdout
    assert "sleep 300" not in r.stdout
    assert a.read_file("secret-a.txt") == b"only-in-a\n"
    with pytest.raises(FileNotFoundError):
        b.read_file("secret-a.txt")


def test_runs_without_root_privileges(sandbox, caps):
    if "local_layout" not in caps:
        pytest.skip("local backend property")
    r = sandbox.run("id -u; cat /proc/self/status | grep CapEff")
    uid, capeff = r.stdout.split("\n")[:2]
    assert uid != "0"
    assert capeff.split()[-1] == "0000000000000000"
