"""The init / command server that runs INSIDE a local sandbox.

Started once per sandbox as ``/usr/bin/python3 -I -S -c BOOT`` under bubblewrap or gVisor. The
project is not inside the sandbox, so this package is not imported from a path there: ``BOOT``
(``snapshots/sandbox/launch.py``) reads ``boot.py`` from stdin, which reads the modules below
from stdin too and loads them as the package ``sandbox_init``, then a JSON config line follows
(so secrets in the config never show in argv). Its modules must only use the stdlib of the
sandbox's /usr/bin/python3 and import nothing from the project, each only the ones listed
before it in ``MODULES`` (relative imports), which is the order they are loaded in.

It holds the sandbox's namespaces alive (when it exits the sandbox dies) and serves a tiny
framed protocol (``frames``) on a unix socket, so any host process -- including a worker that
restarted -- can run commands (``commands``), PTYs and file operations (``files``) in the same
live sandbox (``server``). It also keeps the sandbox's doors (``doors``): the host's streams to
a port inside (the live preview), and the forwarders from ports on the sandbox's loopback to the
host sockets mounted in (the allowlist proxy, the model gateway).

Who can touch whom (issue 14): the init runs as uid 0 of the sandbox's user namespace (a host
uid of its own), non-dumpable; every command runs as the workload uid with no capabilities, so
it can neither signal, trace nor read the init (``confine``). A command given secrets
(``contain``) is started by a *reaper* (``reaper``): the command gets a Landlock domain of its
own, a sibling of the one every other command inherits from the init, so no other command can
read its /proc/<pid>/environ or mem, and when it returns the reaper ends every process it left
(unless it is a ``service``).
"""

# The modules shipped into the sandbox, in the order boot.py loads them.
MODULES = ("frames", "confine", "files", "reaper", "commands", "doors", "server")
