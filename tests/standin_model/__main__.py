"""``python -m tests.standin_model``: serve the stand-in model and print how to point each CLI
at it."""

from __future__ import annotations

import argparse
import json
import time

from . import __doc__ as package_doc
from .conversation import DEFAULT_MODELS, DEFAULT_PREFIXES
from .server import StandinModel


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(package_doc or "").split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8990)
    parser.add_argument("--key", default="sk-standin", help="the API key it requires")
    parser.add_argument("--model", action="append", help="an accepted model (repeatable)")
    parser.add_argument("--prefix", action="append", help="an accepted model prefix")
    args = parser.parse_args(argv)
    standin = StandinModel(
        key=args.key,
        models=args.model or DEFAULT_MODELS,
        prefixes=args.prefix or DEFAULT_PREFIXES,
        host=args.host,
        port=args.port,
    ).start()
    base = f"http://{args.host}:{standin.port}"
    key = args.key
    provider = {"options": {"baseURL": f"{base}/v1", "apiKey": key}}
    lines = [
        f"stand-in model on {base} (key {key!r}); models: {', '.join(standin.models)}",
        f"  Claude Code: ANTHROPIC_BASE_URL={base} ANTHROPIC_API_KEY={key}"
        " claude -p --model claude-sonnet-4-5 ...",
        f"  Codex: OPENAI_API_KEY={key} codex exec -m gpt-5-codex -c model_provider=standin"
        " -c model_providers.standin.name=standin"
        f" -c model_providers.standin.base_url={base}/v1"
        " -c model_providers.standin.env_key=OPENAI_API_KEY"
        " -c model_providers.standin.wire_api=responses ...",
        "  OpenCode: OPENCODE_CONFIG_CONTENT='"
        + json.dumps({"provider": {"anthropic": provider}, "model": "anthropic/claude-sonnet-4-5"})
        + "' opencode run ...",
        f"  OpenAI Chat Completions / Responses clients: base URL {base}/v1",
        "  (a sandbox cannot reach 127.0.0.1: see this module's docstring)",
    ]
    print("\n".join(lines), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        standin.stop()


if __name__ == "__main__":
    main()
