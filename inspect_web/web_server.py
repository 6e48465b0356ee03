"""daphne as the supervisor runs it, with an access log that keeps credentials out.

daphne writes every request's address to its access log (stdout by default). An address can
carry a credential: a stream ticket (`?ticket=`), or a token a careless client put there
(`?token=`, refused, but logged all the same). Such query values are replaced before daphne's
own access logger sees the request, whatever logger or stream it was given.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode

from daphne.cli import CommandLineInterface
from daphne.server import Server

# Query parameters whose values are credentials, compared case-insensitively after decoding.
SECRET_PARAMETERS = frozenset(
    {"token", "ticket", "access_token", "api_key", "key", "s", "inspect_preview_entry"}
)
# Values that are credentials whatever their parameter's name: API tokens, stream tickets and
# preview entry tokens.
SECRET_VALUE = re.compile(r"^insp[tv]?_", re.IGNORECASE)
REDACTED = "[redacted]"


def redact_address(address: str) -> str:
    """`address` with the values of credential-bearing query parameters replaced."""
    path, mark, query = address.partition("?")
    if not mark:
        return address
    pairs = parse_qsl(query, keep_blank_values=True)
    if not pairs:  # not key=value pairs: nothing to tell apart, keep none of it
        return f"{path}?{REDACTED}" if query else address
    kept = []
    for name, value in pairs:
        if SECRET_VALUE.match(name):  # "?insp_…" with no "=": the credential is the name
            name, value = REDACTED, ""
        elif name.lower() in SECRET_PARAMETERS or SECRET_VALUE.match(value):
            value = REDACTED
        kept.append((name, value))
    return f"{path}?{urlencode(kept, safe='[]/:,')}"


def redacting(logger: Callable[[str, str, dict], None]) -> Callable[[str, str, dict], None]:
    """daphne's action logger `logger`, given addresses without credentials."""

    def log_action(protocol: str, action: str, details: dict) -> None:
        if isinstance(details.get("path"), str):
            details = {**details, "path": redact_address(details["path"])}
        logger(protocol, action, details)

    return log_action


class RedactingServer(Server):
    def __init__(self, *args, action_logger=None, **kwargs) -> None:
        super().__init__(
            *args, action_logger=redacting(action_logger) if action_logger else None, **kwargs
        )


class WebServerCommand(CommandLineInterface):
    server_class = RedactingServer


def main() -> None:
    WebServerCommand().run(sys.argv[1:])


if __name__ == "__main__":
    main()
