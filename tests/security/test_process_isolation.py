"""Red team: a secret given to one process tree is readable by no other, and the sandbox's
command server cannot be taken over from inside (issue 14, findings 3 and 5).

Every attack is what code the agent runs (or a repository's own `start` command) can do: plain
python3 with ctypes, run inside a real sandbox, on bubblewrap and on gVisor.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator

import psutil
import pytest

from snapshots.sandbox.base import Limits, NetworkPolicy, Sandbox, SandboxError

SECRET = "s3cr3t-value-" + "9" * 24

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root")


@pytest.fixture(scope="module", params=["bwrap", "runsc"])
def backend(request, tmp_path_factory):
    from snapshots.sandbox.local import LocalBackend

    if request.param == "bwrap" and not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    if request.param == "runsc":
        from snapshots.sandbox import runsc

        if runsc.problem():
            pytest.skip(f"runsc cannot run here: {runsc.problem()}")
    be = LocalBackend(tmp_path_factory.mktemp("proc-" + request.param), runtime=request.param)
    src = tmp_path_factory.mktemp("tree")
    (src / "README.md").write_text("# demo\n")
    be.base = be.snapshot_from_directory(str(src))  # type: ignore[attr-defined]
    yield be
    for sid in be.list_sandboxes():
        be.attach(sid).terminate()
    be.reap()


@pytest.fixture
def sandbox(backend) -> Iterator[Sandbox]:
    sb = backend.create(
        snapshot=backend.base,
        network=NetworkPolicy("none"),
        limits=Limits(wall_seconds=60, memory_mb=1024, pids=256),
    )
    yield sb
    sb.terminate()


def python(sb: Sandbox, code: str, **kwargs):
    return sb.run(["/usr/bin/python3", "-c", code], timeout=30, **kwargs)


# Scans every process's environment and (readable) memory for SECRET; prints what it found.
SCAN = f"""
import glob, os, re
found = []
for d in glob.glob('/proc/[0-9]*'):
    if d == f'/proc/{{os.getpid()}}':
        continue  # this very script holds the value it looks for
    try:
        if {SECRET!r}.encode() in open(d + '/environ', 'rb').read():
            found.append(d + '/environ')
    except OSError:
        pass
    try:
        maps = open(d + '/maps').read().splitlines()
        with open(d + '/mem', 'rb', 0) as mem:
            for line in maps:
                m = re.match(r'([0-9a-f]+)-([0-9a-f]+) r', line)
                if not m or '[vvar]' in line or '[vsyscall]' in line:
                    continue
                start, end = int(m[1], 16), int(m[2], 16)
                if end - start > 64 << 20:
                    continue
                try:
                    mem.seek(start)
                    if {SECRET!r}.encode() in mem.read(end - start):
                        found.append(d + '/mem')
                        break
                except OSError:
                    pass
    except OSError:
        pass
print('FOUND' if found else 'CLEAN', *found)
"""

# The command server's pid, found as an attacker would: by its command line.
FIND_INIT = """
import glob
def init_pid():
    for d in glob.glob('/proc/[0-9]*'):
        try:
            if b'sandbox_init' in open(d + '/cmdline', 'rb').read():
                return int(d.rsplit('/', 1)[1])
        except OSError:
            pass
    raise SystemExit('no init found')
"""

LIBC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sys(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return r, ctypes.get_errno()
NR = dict(ptrace=101, process_vm_readv=310, pidfd_open=434, pidfd_getfd=438, unshare=272,
          keyctl=250, add_key=248, bpf=321, perf_event_open=298, userfaultfd=323,
          mount=165, setns=308, kexec_load=246, open_by_handle_at=304, clone=56)
"""


def test_a_daemon_left_by_a_command_given_a_secret_dies_with_it(sandbox):
    r = sandbox.run(
        "sleep 300 & (setsid sleep 301 &) ; nohup sleep 302 >/dev/null 2>&1 & echo started",
        secrets={"TOKEN": SECRET},
    )
    assert r.stdout.strip() == "started"
    time.sleep(0.3)
    scan = python(sandbox, SCAN)
    assert scan.stdout.startswith("CLEAN"), scan.stdout
    left = sandbox.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert "sleep 30" not in left.stdout


def test_a_service_keeps_its_secret_to_itself(sandbox, backend):
    if backend.runtime == "runsc":
        pytest.skip("refused under gVisor, see test_a_service_with_secrets_is_refused_on_gvisor")
    r = sandbox.run(
        "sleep 300 & echo started", secrets={"NPM_TOKEN": SECRET}, service=True, timeout=30
    )
    assert r.stdout.strip() == "started"
    time.sleep(0.3)
    running = sandbox.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert "sleep 300" in running.stdout  # a service keeps running
    scan = python(sandbox, SCAN)
    assert scan.stdout.startswith("CLEAN"), scan.stdout


def fd_links(pid: int) -> set[str]:
    """The sockets and pipes a host process holds (what ``ls -l /proc/<pid>/fd`` names)."""
    links = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith(("socket:", "pipe:")):
                links.add(link)
    return links


def test_a_services_reaper_holds_nothing_of_the_command_server(sandbox, backend):
    # Reapers are forked from a thread of the command server (to be outside its Landlock
    # domain): one keeping the server's listening socket or other commands' pipes would keep
    # the sandbox answering after its server died, and other commands' output open.
    if backend.runtime == "runsc":
        pytest.skip("under gVisor the sandbox's processes are not host processes")
    r = sandbox.run("sleep 300 & echo started", secrets={"K": SECRET}, service=True)
    assert r.stdout.strip() == "started"
    init = next(
        p for p in psutil.Process(sandbox.state["init_pid"]).children() if "python3" in p.name()
    )
    reapers = [p for p in init.children() if p.cmdline() == init.cmdline()]
    assert len(reapers) == 1, reapers  # the service's, which stays as its daemons' reaper
    shared = fd_links(reapers[0].pid) & fd_links(init.pid)
    assert not shared, shared


def test_a_service_with_secrets_is_refused_on_gvisor(sandbox, backend):
    if backend.runtime != "runsc":
        pytest.skip("gVisor only")
    with pytest.raises(SandboxError, match="environ"):
        sandbox.run("sleep 300 &", secrets={"NPM_TOKEN": SECRET}, service=True)


def test_a_running_secret_command_is_unreadable_by_a_concurrent_one(sandbox, backend):
    if backend.runtime == "runsc":
        pytest.skip("gVisor has no Landlock: a concurrent same-uid reader is not refused")
    # A daemon the repository's own code left behind (no secret) watches for the agent's key.
    spy = (
        "import os\nwhile not os.path.exists('/tmp/done'):\n"
        + "".join("    " + line + "\n" for line in SCAN.strip().splitlines()).replace(
            "print(", "out = ("
        )
        + "    if found: break\nprint(*out)\n"
    )
    sandbox.write_file("spy.py", spy.encode())
    sandbox.run("nohup /usr/bin/python3 spy.py >/tmp/spy.out 2>&1 &")
    holder = sandbox.run(
        "sleep 3; touch /tmp/done", secrets={"ANTHROPIC_API_KEY": SECRET}, timeout=30
    )
    assert holder.exit_code == 0
    for _ in range(300):
        out = sandbox.run("cat /tmp/spy.out").stdout
        if out:
            break
        time.sleep(0.1)
    assert "CLEAN" in out, out


def test_the_command_server_cannot_be_read_or_taken_over(sandbox, backend):
    attack = (
        FIND_INIT
        + LIBC
        + """
import signal
pid = init_pid()
out = {}
for name in ('environ', 'mem'):
    try:
        data = open(f'/proc/{pid}/{name}', 'rb').read(4096)
        keys = {kv.split(b'=')[0] for kv in data.split(b'\\0') if kv}
        # gVisor shows every environ (0444), but the init's holds only PATH and HOME.
        out[name] = 'empty' if name == 'environ' and keys <= {b'PATH', b'HOME'} else 'READ'
    except OSError as e:
        out[name] = 'refused'
try:
    out['fds'] = 'LISTED' if os.listdir(f'/proc/{pid}/fd') else 'refused'
except OSError:
    out['fds'] = 'refused'
r, e = sys(NR['ptrace'], 16, pid, 0, 0)  # PTRACE_ATTACH
out['ptrace'] = 'ATTACHED' if r == 0 else 'refused'
r, e = sys(NR['pidfd_open'], pid, 0)
stolen = 0
if r >= 0:
    for fd in range(0, 64):
        g, e = sys(NR['pidfd_getfd'], r, fd, 0)
        stolen += g >= 0
out['pidfd_getfd'] = f'STOLE {stolen}' if stolen else 'refused'
try:
    os.kill(pid, signal.SIGSTOP)
    out['signal'] = 'STOPPED'
    os.kill(pid, signal.SIGCONT)
except OSError:
    out['signal'] = 'refused'
print(sorted(out.items()))
"""
    )
    r = python(sandbox, attack)
    assert r.exit_code == 0, r.stderr
    assert "refused" in r.stdout
    # Under gVisor fd numbers are listable (their targets are not): nothing to take over.
    listed = () if backend.runtime == "runsc" else ("LISTED",)
    for word in ("READ", "ATTACHED", "STOLE", "STOPPED", *listed):
        assert word not in r.stdout, r.stdout
    assert sandbox.run("echo still mine").stdout == "still mine\n"


def test_the_command_server_socket_is_not_reachable_from_inside(sandbox):
    attack = """
import glob, json, os, socket, struct
hits = []
for path in glob.glob('/run/**', recursive=True) + glob.glob('/tmp/**', recursive=True):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
    except OSError:
        continue
    req = json.dumps({'op': 'ping'}).encode()
    s.sendall(struct.pack('!cI', b'J', len(req)) + req)
    hits.append(path + ' ' + repr(s.recv(200)))
try:
    os.unlink('/run/inspect/ctl.sock')
    hits.append('UNLINKED')
except OSError:
    pass
print('REACHED', hits) if hits else print('unreachable')
"""
    r = python(sandbox, attack)
    assert r.stdout.strip() == "unreachable", r.stdout
    assert sandbox.run("echo still mine").stdout == "still mine\n"


def test_nested_user_namespaces_are_refused(sandbox):
    assert sandbox.run("unshare -Ur true").exit_code != 0
    r = python(
        sandbox,
        LIBC
        + """
print(sys(NR['unshare'], 0x10000000))              # CLONE_NEWUSER
print(sys(NR['clone'], 0x10000000 | 17, 0, 0, 0, 0))  # CLONE_NEWUSER | SIGCHLD
""",
    )
    assert r.stdout.split("\n")[:2] == ["(-1, 1)", "(-1, 1)"], r.stdout


def test_a_sibling_process_cannot_be_traced_or_read(sandbox):
    sandbox.run("sleep 300 >/dev/null 2>&1 &")
    r = python(
        sandbox,
        LIBC
        + """
import subprocess
pid = int(subprocess.check_output(['pgrep', '-x', 'sleep']).split()[0])
print('ptrace', sys(NR['ptrace'], 16, pid, 0, 0))
buf = ctypes.create_string_buffer(64)
local = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 64)
remote = (ctypes.c_void_p * 2)(0x400000, 64)
print('vm_readv', sys(NR['process_vm_readv'], pid, ctypes.addressof(local), 1,
                      ctypes.addressof(remote), 1, 0))
""",
    )
    assert "ptrace (-1, 1)" in r.stdout, r.stdout
    assert "vm_readv (-1, 1)" in r.stdout, r.stdout


def test_calls_dockers_default_profile_refuses_are_refused(sandbox):
    r = python(
        sandbox,
        LIBC
        + """
for name in ('keyctl', 'add_key', 'bpf', 'perf_event_open', 'userfaultfd', 'mount',
             'setns', 'kexec_load', 'open_by_handle_at'):
    print(name, sys(NR[name], 0, 0, 0, 0, 0)[1])
""",
    )
    lines = dict(line.split() for line in r.stdout.splitlines())
    assert lines and all(err == "1" for err in lines.values()), r.stdout


def test_the_filter_exists_for_x86_64_and_aarch64_and_nothing_else():
    from snapshots.sandbox import seccomp

    for machine in ("x86_64", "aarch64"):
        program = seccomp.build_filter(machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 4096  # BPF_MAXINSNS
        arch = seccomp.AUDIT_ARCH[machine].to_bytes(4, "little")
        assert program[8 + 4 : 8 + 8] == arch  # the second instruction checks the ABI
    with pytest.raises(seccomp.UnsupportedArchitecture, match="riscv64"):
        seccomp.build_filter("riscv64")
