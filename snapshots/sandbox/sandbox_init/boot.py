"""The init's first code, read from stdin by the one-line ``BOOT`` (``launch.INIT_BOOT``): it
loads the package's modules, sent after it on stdin, and starts the command server.

Stdin: one JSON line of ``[module name, size]`` pairs, the modules' sources one after another,
then the config line that ``server.main`` reads. The project is not inside the sandbox, so the
modules are made here from their sources and registered as ``sandbox_init.<name>``, where their
relative imports find the ones loaded before them.
"""

import io  # not typing: it costs every idle sandbox half a megabyte (bench/density.py)
import json
import sys
import types

PACKAGE = "sandbox_init"


def load_package(stream: io.BufferedReader) -> types.ModuleType:
    package = types.ModuleType(PACKAGE)
    package.__path__ = []
    sys.modules[PACKAGE] = package
    for name, size in json.loads(stream.readline()):
        module = types.ModuleType(f"{PACKAGE}.{name}")
        module.__package__ = PACKAGE
        sys.modules[module.__name__] = module
        setattr(package, name, module)
        code = compile(stream.read(size), f"{PACKAGE}/{name}.py", "exec")
        exec(code, module.__dict__)  # noqa: S102 - the init's own source, sent by the host
    return package


if __name__ == "__main__":
    load_package(sys.stdin.buffer).server.main()
