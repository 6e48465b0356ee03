"""What a model call cost, where the price is known.

Prices are USD per million tokens (input, output), from the providers' public price pages; a
deployment adds or corrects entries with INSPECT_LLM_PRICES (parsed by inspect_web/pricing.py).
A model missing from the table reports its tokens and `cost_usd: null`, never a guess.

Cached input tokens (a prompt-cache hit) are part of the input tokens and cost a fraction of the
input price: the provider's published discount where the table knows it, else the full price (an
unknown discount is never assumed, so spend is not under-counted).
"""

from __future__ import annotations

from collections.abc import Mapping

# (input, output) USD per 1M tokens. Keys match the start of a model name, longest first, so
# "gpt-4.1-mini-2025-04-14" finds "gpt-4.1-mini".
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-codex": (1.25, 10.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-haiku-4-5": (1.00, 5.00),
}


# The share of the input price a cached input token costs, by model-name prefix as in PRICES
# (Anthropic: cache reads at 10%; OpenAI: 10% to 50% by model family).
CACHED_INPUT_SHARE: dict[str, float] = {
    "claude": 0.1,
    "gpt-5": 0.1,
    "gpt-4.1": 0.25,
    "gpt-4o": 0.5,
    "o3": 0.25,
    "o3-mini": 0.5,
    "o4-mini": 0.25,
}


def _bare(model: str) -> str:
    return model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4.1" via a gateway


def cached_input_share(model: str) -> float:
    """What a cached input token costs as a share of an input token (1.0 when unknown)."""
    name = _bare(model)
    for key in sorted(CACHED_INPUT_SHARE, key=len, reverse=True):
        if name == key or name.startswith(key + "-"):
            return CACHED_INPUT_SHARE[key]
    return 1.0


def price_of(model: str, extra: Mapping[str, tuple[float, float]] | None = None):
    """(input, output) USD per million tokens for `model`, or None if unknown."""
    table = {**PRICES, **(extra or {})}
    name = _bare(model)
    for key in sorted(table, key=len, reverse=True):
        if name == key.lower() or name.startswith(key.lower() + "-"):
            return table[key]
    return None


def cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    extra: Mapping[str, tuple[float, float]] | None = None,
    *,
    cached_tokens: int = 0,
) -> float | None:
    """The cost of one call in USD, rounded to a millionth of a dollar; None if unpriced.
    `cached_tokens` are the part of `input_tokens` read from the provider's prompt cache."""
    price = price_of(model, extra)
    if price is None:
        return None
    cached = min(max(cached_tokens, 0), input_tokens)
    given = (input_tokens - cached) * price[0] + cached * price[0] * cached_input_share(model)
    return round((given + output_tokens * price[1]) / 1_000_000, 6)


def usd(amount: float) -> str:
    """A dollar amount for a message: cents when that is exact, else four decimals (a $0.004
    limit must not read as "$0.00")."""
    return f"${amount:,.2f}" if round(amount, 2) == amount else f"${amount:,.4f}"
