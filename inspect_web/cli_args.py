"""How a subcommand of `manage.py inspect` is declared, the same way in every app's CLI."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def command_parser(
    parent: Any, name: str, handler: Callable[..., int], help_text: str
) -> argparse.ArgumentParser:
    """Add subcommand `name` to `parent` (an argparse sub-parsers action): its help is also its
    description, it runs `handler`, and a usage error prints the usage, not a traceback."""
    parser = parent.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(handler=handler)
    parser.called_from_command_line = True
    return parser
