"""A deterministic stand-in model served over HTTP, speaking the providers' own wire formats.

It answers the Anthropic Messages API (``/v1/messages``, ``/v1/messages/count_tokens``), OpenAI
Chat Completions (``/v1/chat/completions``) and the OpenAI Responses API (``/v1/responses``),
streaming (SSE) and not, plus ``/v1/models``; any path prefix is accepted (with or without
``/v1``), so each CLI can be pointed at it the way it expects. Websocket upgrades are refused
(426 by default: Codex then falls back to HTTPS at once and quietly; with ``websocket_status=404``
it retries five times and reports "Falling back from WebSockets to HTTPS transport").

What it "decides" (so tests can assert outcomes):

* the request offers tools and the conversation ends with a user message: the newest user text is
  searched (anywhere, CLIs wrap prompts in context) for ``create <path> with <text>``
  (-> one shell call ``printf '%s\\n' '<text>' > <path>``), ``append <text> to <path>``
  (-> ``... >> <path>``) or ``undo what you just did`` (-> the inverse of its own latest
  create/append found in the EARLIER turns of the request: ``rm -f <path>`` or
  ``sed -i '$d' <path>``; with none found it says "I can find no earlier change in this
  conversation to undo." and calls nothing), or ``append <text> to the file you created``
  (-> an append to the path of its own latest create in the earlier turns; with none, "I can
  find no file created earlier in this conversation."), or ``run the command `<command>```
  (-> that command, verbatim: what a model talked into it would run). Anything else gets a plain
  text reply.
* the conversation ends with a tool result: a final text reply ("Done: created notes.txt").
* no tools offered (title and summary requests): a short text reply ("Stand-in title").

The shell tool is the first offered of ``Bash, bash, shell, shell_command, exec_command,
local_shell, run_command, exec`` (case-insensitive); its arguments are built from its JSON
schema (``command`` string or argv array, ``cmd``, required extras by name and type); a freeform
(``custom``) tool gets the command as its input; the Responses ``local_shell`` tool gets a
``local_shell_call``.

Unknown models are refused with each provider's 404, a wrong key with its 401. Every request is
recorded (``.requests``) for tests to assert on, e.g. that turn 2's request holds turn 1.

Use::

    with StandinModel(key="sk-test") as model:
        env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "sk-test"}
        ...
        assert model.requests_with_tools()

By hand: ``python -m tests.standin_model --host 0.0.0.0 --port 8990 --key KEY`` prints the URLs
to configure.

How a sandboxed CLI reaches it. A sandbox has its own network namespace and never sees this
machine's loopback: ``open`` egress goes through slirp4netns with host loopback disabled, and an
nftables table refuses this machine's own and private addresses to the NAT/proxy group unless the
operator names an exception (``INSPECT_EGRESS_ALLOW_PRIVATE=name=ADDRESS[:PORTS]``,
``netns.EgressException``, accepted before the deny rules). What the tests use (checked from a
real sandbox in tests/sessions/agents/test_standin_model.py):

* ``allowlist`` egress through the sandbox's proxy: ``route = standin.sandbox_route()`` gives
  ``egress_hosts`` (a name, ``model.test``, that only the proxy resolves, to this server's
  address) and ``egress_exceptions`` (that address and port) for ``LocalBackend``, plus
  ``NetworkPolicy("allowlist", (route.name,))``. The sandbox sets ``HTTP_PROXY`` and
  ``HTTPS_PROXY`` to its proxy; Claude Code, Codex and OpenCode all honour them and send absolute
  ``POST http://model.test:PORT/...`` requests, which the proxy relays. The base URL must be the
  name (``NO_PROXY`` holds 127.0.0.1). Codex's websocket attempt goes as ``CONNECT``, which the
  proxy refuses without TLS: configure Codex with a custom ``model_provider`` (no websocket).
* ``open`` egress: serve on a non-loopback address of this machine and name it in
  ``INSPECT_EGRESS_ALLOW_PRIVATE`` (e.g. ``standin=10.0.0.5:8990``); the base URL is then
  ``http://10.0.0.5:8990``.

The package, by idea: ``conversation`` (what it decides, API-neutral), ``anthropic`` and
``openai`` (each provider's parsing and replies), ``wire`` (SSE framing), ``server`` (HTTP,
keys, recording) and ``__main__`` (the command line).
"""

from .conversation import NO_EARLIER_FILE, NO_INSTRUCTION, NO_UNDO, TITLE, decide
from .server import Recorded, SandboxRoute, StandinModel
from .wire import iter_sse

__all__ = [
    "NO_EARLIER_FILE",
    "NO_INSTRUCTION",
    "NO_UNDO",
    "TITLE",
    "Recorded",
    "SandboxRoute",
    "StandinModel",
    "decide",
    "iter_sse",
]
